# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The mechanism benchmark (`benchmarks/mechanism.py`, seeds 1-5) at each noise scale, one row a scale: head
selection's exact-match accuracy per seed, and how many of its head choices agreeing / conflicting task pairs share.

    python benchmarks/results/quality/noise_scale/mechanism_by_scale.py    # writes mechanism_by_scale.md beside it

Scale 1 is the recorded run at five seeds in `benchmarks/results/mechanism/`, 0 the one in
`benchmarks/results/mechanism_no_noise/` (same settings); 0.5 and 0.25 are run.sh's, in this folder.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
RESULTS = HERE.parents[1]
FOLDERS = {1.0: RESULTS / "mechanism", 0.5: HERE / "mechanism_0.5", 0.25: HERE / "mechanism_0.25",
           0.0: RESULTS / "mechanism_no_noise"}


def row(scale: float, folder: Path) -> str:
    seeds = json.loads((folder / "mechanism.json").read_text())["seeds"]
    runs = [seeds[seed]["head_selection"] for seed in sorted(seeds, key=int)]
    accuracy = [run["mean_accuracy"] for run in runs]
    cells = [", ".join(f"{value:.3f}" for value in accuracy), f"{statistics.mean(accuracy):.3f}",
             f"{sum(value >= 0.95 for value in accuracy)} of {len(accuracy)}",
             f"{statistics.mean(run['agreeing'] for run in runs):.2f}",
             f"{statistics.mean(run['conflicting'] for run in runs):.2f}"]
    return f"| {scale:g} | " + " | ".join(cells) + " |"


def main() -> None:
    lines = ["| noise scale | accuracy, seeds 1-5 | mean | seeds >= 0.95 | agreeing pairs share | "
             "conflicting pairs share |", "|---:|---|---:|---:|---:|---:|"]
    lines += [row(scale, folder) for scale, folder in FOLDERS.items() if (folder / "mechanism.json").exists()]
    table = "\n".join(lines) + "\n"
    print(table, end="")
    (HERE / "mechanism_by_scale.md").write_text(table)


if __name__ == "__main__":
    main()
