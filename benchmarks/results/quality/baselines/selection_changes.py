# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How far each head-selection run's selection moved: the (layer, slot) choices that differ between the first and
the last snapshot of its `head_selection_log.jsonl`, per component, out of all of them. Components with nothing to
choose (`H' = H` in the run's `config.json`: the adapters and the shared model log their fixed heads too) are left
out, and runs without any to choose.

    python benchmarks/results/quality/baselines/selection_changes.py outputs/benchmark/mt_why outputs/benchmark/mt_3000_updates
"""

from __future__ import annotations

import argparse
from pathlib import Path

from transformers import AutoConfig

from hf_headsel.analysis import SELECTION_LOG_NAME, read_selection_log, selection_stability
from hf_headsel.configuration_head_selection import component_side


def components_with_a_choice(run: Path) -> set[str]:
    """The components in which the run's saved model has more candidates than heads (`H' > H`)."""
    config = AutoConfig.from_pretrained(run)
    if not hasattr(config, "head_selection_components"):  # a stock model
        return set()
    return {component for component in config.head_selection_components
            if config.total_heads(component_side(component)) > config.heads(component_side(component))}


def net_changes(log_path: Path) -> tuple[int, dict[str, tuple[int, int]]] | None:
    """The last logged step and `{component: (choices changed since the first snapshot, choices)}` for the
    components with a choice; `None` when there is none."""
    choosing = components_with_a_choice(log_path.parent)
    snapshots = read_selection_log(log_path).snapshots
    first, last = snapshots[0], snapshots[-1]
    rows = {component: [row for layers in tasks.values() for row in layers]
            for component, tasks in first.selections.items() if component in choosing}
    if not rows:
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
