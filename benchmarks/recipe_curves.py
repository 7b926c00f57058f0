# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The curves behind the recipe defaults: for every run of an experiment, the training loss, the selection changes
per logging interval (from `head_selection_log.jsonl`) and the final range of the selection logits, plus its test
cross-entropy; one plot and one Markdown table.

    python benchmarks/recipe_curves.py outputs/benchmark/mt_recipe_options \
        --output_dir benchmarks/results/quality/mt_recipe_options
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from safetensors.torch import load_file

from hf_headsel.analysis import SELECTION_LOG_NAME, read_selection_log, selection_stability
from headsel_recipes.results_keys import loss_key, read_results, results_path


def selection_changes(run: Path) -> list[tuple[int, int]]:
    """`(step, choices changed since the previous snapshot)` from a run's selection log (empty without one)."""
    path = run / SELECTION_LOG_NAME
    if not path.is_file():
        return []
    return [(change["step"], change["total"])
            for change in selection_stability(read_selection_log(path).snapshots)["changes"]]


def net_selection_changes(run: Path) -> int | None:
    """The choices that differ between a run's first and last logged selection (`None` without a log): a change
    undone later counts 0, where [`selection_changes`] counts each step's changes."""
    path = run / SELECTION_LOG_NAME
    if not path.is_file():
        return None
    snapshots = read_selection_log(path).snapshots
    return selection_stability([snapshots[0], snapshots[-1]])["changes"][0]["total"] if snapshots else 0


def logit_range(run: Path) -> tuple[float, float] | None:
    """The smallest and largest selection logit of a run's final model (`None` without selection logits)."""
    state = load_file(str(run / "model.safetensors"))
    logits = [value for key, value in state.items() if key.startswith("head_selection.") and key.endswith(".logits")]
    if not logits:
        return None
    return min(float(v.min()) for v in logits), max(float(v.max()) for v in logits)


def run_summary(run: Path) -> dict:
    """Training loss curve, selection changes, logit range and test loss of one finished run."""
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    changes = selection_changes(run)
    return {
        "loss": [(entry["step"], entry["loss"]) for entry in history if "loss" in entry],
        "changes": changes,
        "total_changes": sum(count for _, count in changes),
        "logit_range": logit_range(run),
        "test_loss": read_results(run, "predict")[loss_key("predict")],
    }


def collect(experiment: Path) -> dict[str, dict]:
    """`{system folder: summary}` of the first seed of every finished system."""
    summaries = {}
    for system in sorted((experiment / "runs").iterdir()):
        runs = sorted(run for run in system.glob("seed*") if results_path(run, "predict").is_file())
        if runs:
            summaries[system.name] = run_summary(runs[0])
    return summaries


def table(summaries: dict[str, dict]) -> str:
    lines = ["| system (run folder) | test loss | final training loss | selection changes (total) | logit range |",
             "|---|---:|---:|---:|---|"]
    for name, summary in summaries.items():
        low_high = summary["logit_range"]
        span = f"[{low_high[0]:.2f}, {low_high[1]:.2f}]" if low_high else "–"
        changes = summary["total_changes"] if summary["changes"] else "–"
        final_loss = f"{summary['loss'][-1][1]:.3f}" if summary["loss"] else "–"  # none logged in a short run
        lines.append(f"| {name} | {summary['test_loss']:.3f} | {final_loss} | {changes} | {span} |")
    return "\n".join(lines)


def plot(summaries: dict[str, dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    for name, summary in summaries.items():
        if summary["loss"]:
            left.plot(*zip(*summary["loss"]), label=name)
        if summary["changes"]:
            right.plot(*zip(*summary["changes"]), marker=".", label=name)
    left.set(xlabel="update", ylabel="training loss (label-smoothed)", title="training loss")
    right.set(xlabel="update", ylabel="choices changed since the last log", title="selection changes")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", type=Path, help="an experiment output folder (with runs/)")
    parser.add_argument("--output_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    summaries = collect(args.experiment)
    if not summaries:
        raise SystemExit(f"{args.experiment}: no finished run")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "curves.json").write_text(json.dumps(summaries, indent=1) + "\n")
    (args.output_dir / "curves.md").write_text(table(summaries) + "\n")
    plot(summaries, args.output_dir / "curves.png")
    print(table(summaries))


if __name__ == "__main__":
    main()
