# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How far each head-selection run's selection moved: the (layer, slot) choices that differ between the first and
the last snapshot of its `head_selection_log.jsonl`, per component, out of all of them. Runs with nothing to choose
(`H' = H`: the adapters and the shared model log their fixed heads too) are left out.

    python benchmarks/results/quality/baselines/selection_changes.py outputs/benchmark/mt_why outputs/benchmark/mt_3000_updates
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_headsel.analysis import SELECTION_LOG_NAME, read_selection_log, selection_stability


def net_changes(log_path: Path) -> tuple[int, dict[str, tuple[int, int]]] | None:
    """The last logged step and `{component: (choices changed since the first snapshot, choices)}`; `None` when no
    component has more candidates than heads."""
    snapshots = read_selection_log(log_path).snapshots
    first, last = snapshots[0], snapshots[-1]
    rows = {component: [row for layers in tasks.values() for row in layers]
            for component, tasks in first.selections.items()}
    if all(max(row) < len(row) for component_rows in rows.values() for row in component_rows):
        return None
    changed = selection_stability([first, last])["changes"][0]["components"]  # one snapshot: first is last, 0
    return last.step, {component: (changed[component], sum(map(len, component_rows)))
                       for component, component_rows in rows.items()}


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="+", type=Path, help="experiment output folders (runs/<system>/seed*/)")
    options = parser.parse_args(args)
    print("| experiment | system | seed | last step | choices changed (component: changed / all) |")
    print("|---|---|---:|---:|---|")
    for experiment in options.experiments:
        for log_path in sorted((experiment / "runs").glob(f"*/seed*/{SELECTION_LOG_NAME}")):
            if (moved := net_changes(log_path)) is None:
                continue
            step, counts = moved
            cells = ", ".join(f"{component}: {changed} / {total}" for component, (changed, total) in counts.items())
            seed_folder = log_path.parent
            print(f"| {experiment.name} | {seed_folder.parent.name} | {seed_folder.name[4:]} | {step} | {cells} |")


if __name__ == "__main__":
    main()
