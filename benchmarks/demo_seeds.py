# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The demo over several seeds: each system's scores and the paired difference (group - shared), mean ± std.

    headsel-demo --output_dir outputs/demo_longer/steps1000_seed1 --max_steps 1000 --seed 1   # and seeds 2, 3
    python benchmarks/demo_seeds.py outputs/demo_longer/steps1000_seed* \\
        --output benchmarks/results/quality/demo_longer/summary.md

Each folder is one finished `headsel-demo` run (its `metrics.json`, the head-selection model's `predict_results.json`,
`analysis.json` and `head_selection_log.jsonl`, the baseline's in `shared_baseline/`). Both systems of a run start
from the same checkpoint with the same data, order and seed, so the difference is paired run by run. What the
table holds:

* test cross-entropy (`predict_loss`, nats per target token; label smoothing and the KL weight are 0 in the demo),
  BLEU averaged over directions, chrF pooled and averaged, the share of degenerate outputs, chrF per direction;
* what head selection learned: selection choices changed over training (the Trainer's logged snapshots), the step
  of the last change, and head sharing (the fraction of the `H` selected heads two target languages share, averaged
  over layers) between the Romance languages and between every other pair.
"""

from __future__ import annotations

import argparse
import json
import statistics
from itertools import combinations
from pathlib import Path

from hf_headsel.analysis import ANALYSIS_NAME, SELECTION_LOG_NAME, read_selection_log, selection_stability

from headsel_recipes.demo import BASELINE_DIR, SYSTEM_TITLES
from headsel_recipes.results_keys import loss_key, read_results
from quality_tables import mean_std  # benchmarks/ is on the path: the script's folder, or the tests' `pythonpath`

# The demo's related target languages: head selection should let them share more heads than unrelated pairs.
ROMANCE = frozenset({"es", "fr", "it", "pt"})
SYSTEMS = tuple(SYSTEM_TITLES)  # ("group", "shared")
SCORES = {  # row title -> (format digits, higher is better)
    "test cross-entropy": (3, False), "BLEU avg": (2, True), "chrF pooled": (2, True), "chrF avg": (2, True),
    "degenerate outputs (%)": (2, False),
}


def system_scores(run: Path, system: str) -> dict[str, float]:
    """The scores of one system of one demo run: the rows of `SCORES`, then chrF per direction."""
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    quality = metrics["prediction_quality"][system]
    folder = run if system == "group" else run / BASELINE_DIR
    scores = {
        "test cross-entropy": read_results(folder, "predict")[loss_key("predict")],
        "BLEU avg": metrics[system]["average"][metrics["metric"]],
        "chrF pooled": quality["chrf_pooled"], "chrF avg": quality["chrf"],
        "degenerate outputs (%)": 100 * quality["degenerate"],
    }
    scores.update({f"chrF {key.removeprefix('chrf_')}": value for key, value in sorted(quality.items())
                   if key.startswith("chrf_") and key != "chrf_pooled"})
    return scores


def selection_summary(run: Path) -> dict[str, float]:
    """What the head-selection model of one run learned: choices changed, last change, Romance vs other sharing."""
    stability = selection_stability(read_selection_log(run / SELECTION_LOG_NAME).snapshots)
    changes = [step for step in stability["changes"] if step["total"]]
    summary = {"selection choices changed": sum(step["total"] for step in changes),
               "last change at step": changes[-1]["step"] if changes else 0}
    analysis = json.loads((run / ANALYSIS_NAME).read_text(encoding="utf-8"))
    for component, found in analysis["components"].items():
        related, other = [], []
        for (i, a), (j, b) in combinations(enumerate(found["tasks"]), 2):
            (related if {a, b} <= ROMANCE else other).append(found["sharing"][i][j])
        summary[f"{component} sharing, Romance pairs"] = statistics.mean(related)
        summary[f"{component} sharing, other pairs"] = statistics.mean(other)
    return summary


def summary_table(runs: list[Path]) -> str:
    """A Markdown report: one row per score (group, shared, paired difference), then the selection rows."""
    scores = {system: [system_scores(run, system) for run in runs] for system in SYSTEMS}
    lines = [f"{len(runs)} runs: {', '.join(str(run) for run in runs)}; mean ± sample std over them", "",
             "| score | group | shared | group - shared (paired) | group better in |",
             "|---|---:|---:|---:|---:|"]
    for name in scores["group"][0]:
        digits, higher_is_better = SCORES.get(name, (2, True))
        group, shared = ([run[name] for run in scores[system]] for system in SYSTEMS)
        differences = [g - s for g, s in zip(group, shared)]
        wins = sum(d > 0 if higher_is_better else d < 0 for d in differences)
        lines.append(f"| {name} | {mean_std(group, digits)} | {mean_std(shared, digits)} | "
                     f"{mean_std(differences, digits)} | {wins} of {len(runs)} |")
    selections = [selection_summary(run) for run in runs]
    lines += ["", "| head selection (group) | mean ± std | per run |", "|---|---:|---|"]
    for name in selections[0]:
        values = [selection[name] for selection in selections]
        lines.append(f"| {name} | {mean_std(values, 3)} | {', '.join(f'{v:.3g}' for v in values)} |")
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished headsel-demo output folders (one per seed)")
    parser.add_argument("--output", type=Path, help="also write the report to this Markdown file")
    options = parser.parse_args(args)
    missing = [str(run) for run in options.runs if not (run / "metrics.json").is_file()]
    if missing:
        parser.error(f"not finished demo runs (no metrics.json): {', '.join(missing)}")
    report = summary_table(options.runs)
    print(report)
    if options.output:
        options.output.parent.mkdir(parents=True, exist_ok=True)
        options.output.write_text(report + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
