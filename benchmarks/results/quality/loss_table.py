# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Print the test cross-entropy of every system of finished experiments as a Markdown table.

    python benchmarks/results/quality/loss_table.py outputs/benchmark/mt_one_to_many [...]

The runner's tables hold BLEU / WER only; on a budget where every system still emits (near) empty hypotheses those
sit at the floor, while the test loss (`predict_loss`, nats per target token; label smoothing and the KL weight
are 0 in the benchmark files, so it is plain cross-entropy) still orders the systems. Cells: mean ± sample standard
deviation over the seeds found in `runs/<system>/seed*/predict_results.json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def seed_losses(system_folder: Path) -> list[float]:
    """The `predict_loss` of every finished seed of one system."""
    files = sorted(system_folder.glob("seed*/predict_results.json"))
    return [json.loads(path.read_text())["predict_loss"] for path in files]


def loss_table(experiment_folder: Path) -> str:
    """A Markdown table: one row per system folder under `experiment_folder/runs`."""
    rows = [f"**{experiment_folder.name}**", "", "| System (run folder) | test loss, mean ± std | seeds |",
            "|---|---:|---:|"]
    for system_folder in sorted((experiment_folder / "runs").iterdir()):
        losses = seed_losses(system_folder)
        if not losses:
            continue
        spread = statistics.stdev(losses) if len(losses) > 1 else 0.0
        rows.append(f"| {system_folder.name} | {statistics.mean(losses):.2f} ± {spread:.2f} | {len(losses)} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="+", type=Path, help="experiment output folders")
    for folder in parser.parse_args().experiments:
        print(loss_table(folder), end="\n\n")


if __name__ == "__main__":
    main()
