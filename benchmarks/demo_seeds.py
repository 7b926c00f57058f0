# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The demo over several seeds: each system's scores and the paired difference (group - shared), mean ± std.

    headsel-demo --output_dir outputs/demo_longer/steps1000_seed1 --max_steps 1000 --seed 1   # and seeds 2, 3
    python benchmarks/demo_seeds.py outputs/demo_longer/steps1000_seed{1,2,3} \
        --output benchmarks/results/quality/demo_longer/steps1000.md

Each positional folder is one finished `headsel-demo` run: the head-selection model's recipe run in the folder, the
shared baseline's in its `shared_baseline/`. Both start from the same checkpoint with the same data, order and seed,
so the difference is paired run by run. `--group DIR ...` takes the head-selection side from other recipe runs of
the same seeds instead (a probe with one head-selection flag changed, `headsel-train mt <run_config.json>`), paired
with the baselines of the positional folders in order. What the report holds:

* test loss (`predict_loss`, nats per target token: the cross-entropy against label-smoothed targets, epsilon 0.1,
  the recipes' default and the demo's; the KL weight is 0),
  BLEU averaged over directions, chrF pooled and averaged and the share of degenerate outputs (from the run's
  `generated_predictions.jsonl`, as the demo scores them), chrF per direction;
* what head selection learned: selection choices changed between the first and the last of the Trainer's logged
  snapshots, the change events (each logged step's changes summed: a change undone later counts twice), the step
  of the last change, the range of the final selection logits (they start in `[log 0.01, 0]`), and head sharing
  (the fraction of the `H` selected heads two target languages share, averaged over layers) between the Romance
  languages and between every other pair.
"""

from __future__ import annotations

import argparse
import json
import statistics
from itertools import combinations
from pathlib import Path

from hf_headsel.analysis import ANALYSIS_NAME

from headsel_recipes.demo import BASELINE_DIR, METRIC, SYSTEM_TITLES
from headsel_recipes.metrics import prediction_quality
from headsel_recipes.results_keys import loss_key, predictions_path, read_predictions, read_results, score_key
# benchmarks/ is on the path: the script's folder, or the tests' `pythonpath`
from quality_tables import is_finished, mean_std, paired_cells
from recipe_curves import logit_range, net_selection_changes, selection_changes

# The demo's related target languages: head selection should let them share more heads than unrelated pairs.
ROMANCE = frozenset({"es", "fr", "it", "pt"})
SYSTEMS = tuple(SYSTEM_TITLES)  # ("group", "shared")
SCORES = {  # row title -> (format digits, higher is better)
    "test loss (label-smoothed)": (3, False), "BLEU avg": (2, True), "chrF pooled": (2, True), "chrF avg": (2, True),
    "degenerate outputs (%)": (2, False),
}


def system_scores(run: Path) -> dict[str, float]:
    """The scores of one finished recipe run (one system of one seed): the rows of `SCORES`, then chrF per
    direction."""
    results = read_results(run, "predict")
    quality = prediction_quality(read_predictions(predictions_path(run)))
    scores = {
        "test loss (label-smoothed)": results[loss_key("predict")],
        "BLEU avg": results[score_key(METRIC, split="predict")],
        "chrF pooled": quality["chrf_pooled"], "chrF avg": quality["chrf"],
        "degenerate outputs (%)": 100 * quality["degenerate"],
    }
    scores.update({f"chrF {key.removeprefix('chrf_')}": value for key, value in sorted(quality.items())
                   if key.startswith("chrf_") and key != "chrf_pooled"})
    return scores


def selection_summary(run: Path) -> dict[str, float]:
    """What the head-selection model of one run learned: choices changed, last change, logit range, Romance vs
    other head sharing."""
    changes = [(step, count) for step, count in selection_changes(run) if count]
    low, high = logit_range(run)  # they start in LOGIT_INIT_RANGE, [log 0.01, 0]
    summary = {"selection choices changed, first to last": net_selection_changes(run),
               "selection change events": sum(count for _, count in changes),
               "last change at step": changes[-1][0] if changes else 0,
               "lowest selection logit": low, "highest selection logit": high}
    analysis = json.loads((run / ANALYSIS_NAME).read_text(encoding="utf-8"))
    for component, found in analysis["components"].items():
        related, other = [], []
        for (i, a), (j, b) in combinations(enumerate(found["tasks"]), 2):
            (related if {a, b} <= ROMANCE else other).append(found["sharing"][i][j])
        for pairs, values in (("Romance pairs", related), ("other pairs", other)):
            if values:  # a demo of other languages (`DemoSettings.languages`) may have no pair of a kind
                summary[f"{component} sharing, {pairs}"] = statistics.mean(values)
    return summary


def summary_table(group_runs: list[Path], shared_runs: list[Path]) -> str:
    """A Markdown report of paired runs: one row per score (group, shared, paired difference), then the selection
    rows of the group runs."""
    runs = dict(zip(SYSTEMS, (group_runs, shared_runs)))
    scores = {system: [system_scores(run) for run in runs[system]] for system in SYSTEMS}
    lines = [f"{len(group_runs)} pairs; group: {', '.join(map(str, group_runs))}; shared: "
             f"{', '.join(map(str, shared_runs))}; mean ± sample std over the pairs", "",
             "| score | group | shared | group - shared (paired) | group better in |",
             "|---|---:|---:|---:|---:|"]
    for name in scores["group"][0]:
        digits, higher_is_better = SCORES.get(name, (2, True))
        group, shared = ([run[name] for run in scores[system]] for system in SYSTEMS)
        difference, wins = paired_cells(group, shared, digits, higher_is_better)
        lines.append(f"| {name} | {mean_std(group, digits)} | {mean_std(shared, digits)} | {difference} | {wins} |")
    selections = [selection_summary(run) for run in group_runs]
    lines += ["", "| head selection (group) | mean ± std | per run |", "|---|---:|---|"]
    for name in selections[0]:
        values = [selection[name] for selection in selections]
        lines.append(f"| {name} | {mean_std(values, 3)} | {', '.join(f'{v:.4g}' for v in values)} |")
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished headsel-demo output folders (one per seed)")
    parser.add_argument("--group", nargs="+", type=Path,
                        help="head-selection recipe runs to pair with the runs' baselines instead of their own")
    parser.add_argument("--output", type=Path, help="also write the report to this Markdown file")
    options = parser.parse_args(args)
    for name, folders in (("runs", options.runs), ("--group", options.group or [])):
        resolved = [folder.resolve() for folder in folders]
        if len(set(resolved)) != len(resolved):  # one run counted twice would pass for two seeds
            parser.error(f"{name} names a folder twice: {[str(f) for f in folders if resolved.count(f.resolve()) > 1]}")
    group_runs = options.group or options.runs
    if len(group_runs) != len(options.runs):
        parser.error(f"--group pairs one run with each demo folder: {len(group_runs)} for {len(options.runs)}")
    shared_runs = [run / BASELINE_DIR for run in options.runs]
    missing = [str(run) for run in (*group_runs, *shared_runs) if not is_finished(run)]
    if missing:
        parser.error(f"not finished runs (no predict_results.json, or no generated_predictions.jsonl or an empty "
                     f"one): {', '.join(missing)}")
    report = summary_table(group_runs, shared_runs)
    print(report)
    if options.output:
        options.output.parent.mkdir(parents=True, exist_ok=True)
        options.output.write_text(report + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
