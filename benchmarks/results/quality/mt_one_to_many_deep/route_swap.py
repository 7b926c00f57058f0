# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Does a trained MT run use its own task's heads (session 62)? For every run under a folder whose model routes one
side by task (the source languages of many-to-one, the target languages of one-to-many): the test cross-entropy
(teacher-forced, evaluation mode, every test pair of every direction, weighted by target token) with each direction
routed to its own task, then to the task `shift` places on in the side's task list, for every shift: a derangement
each, nothing else changed (the tags and tokens stay the direction's own). Per-task heads (or adapters) that are
interchangeable lose nothing when misrouted; per-task ones that the model relies on do. Plain cross-entropy: the
experiments' test-loss tables are label-smoothed (epsilon 0.1, the recipes' default) and read 0.3-0.5 nats higher.

    PYTHONPATH=training:benchmarks python benchmarks/results/quality/mt_one_to_many_deep/route_swap.py \
        outputs/benchmark/mt_many_to_one_deep

Prints one row per run (its own route, the mean over the shifts, their spread) and, per system, the misrouting's
cost over seeds. Runs without task routing (the shared model) are listed as such.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
from torch.nn.functional import cross_entropy

from collapse import batch, load
from quality_tables import mean_and_spread

SIDES = ("encoder", "decoder")


def routed_side(config) -> str | None:
    """The side whose task ids differ between the run's directions: the one with more than one task (`None`: no
    task routing). Both sides with several tasks (routed by pairs) is refused: a shift would need a rule per side."""
    sides = [side for side in SIDES if len(getattr(config, f"{side}_tasks", None) or ()) > 1]
    if len(sides) > 1:
        raise ValueError(f"both sides have several tasks ({sides}): route_swap shifts the tasks of one side only")
    return sides[0] if sides else None


@torch.no_grad()
def summed_cross_entropy(model, inputs: dict[str, torch.Tensor]) -> tuple[float, int]:
    """The cross-entropy summed over the labelled target tokens, and their count (no KL term, no loss scaling)."""
    logits = model(**inputs).logits
    labels = inputs["labels"]
    total = cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum")
    return total.item(), int((labels != -100).sum())


def routed_losses(model, batches: dict[str, dict[str, torch.Tensor]], side: str) -> dict[int, float]:
    """`{shift: cross-entropy per target token over every batch}`, each batch (`{task: model keywords}`, in the
    order of the side's task list) routed on `side` to the task `shift` places on (0: its own)."""
    tasks = list(getattr(model.config, f"{side}_tasks"))
    if sorted(batches) != sorted(tasks):
        raise ValueError(f"the batches' tasks {sorted(batches)} are not the {side} tasks {tasks}")
    model.eval()
    losses = {}
    for shift in range(len(tasks)):
        total = count = 0
        for index, task in enumerate(tasks):
            inputs = dict(batches[task])
            inputs[f"{side}_task_ids"] = torch.full((len(inputs["input_ids"]),), (index + shift) % len(tasks))
            summed, tokens = summed_cross_entropy(model, inputs)
            total, count = total + summed, count + tokens
        losses[shift] = total / count
    return losses


def run_row(run: Path) -> tuple[str, float | None]:
    """The run's table row, and its misrouting cost (the mean over the shifts minus its own route; `None`: the run
    has no task routing)."""
    model, tokenizer = load(run)
    side = routed_side(model.config)
    if side is None:
        return "no task routing | – | – | – |", None
    batches = {task: batch(run, tokenizer, model, task, pairs=None) for task in getattr(model.config, f"{side}_tasks")}
    losses = routed_losses(model, batches, side)
    shifted = [loss for shift, loss in losses.items() if shift]
    misrouted = statistics.mean(shifted)
    return (f"{side} ({len(losses)} tasks) | {losses[0]:.3f} | {misrouted:.3f} "
            f"[{min(shifted):.3f}, {max(shifted):.3f}] | {misrouted - losses[0]:+.3f} |"), misrouted - losses[0]


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    """Print the table of every run under the folder, then the cost per system; returns `{system: [cost per seed]}`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="an experiment's output folder (its runs/<system>/seed*/)")
    arguments = parser.parse_args(argv)
    runs = sorted(path.parent for path in arguments.runs.glob("runs/*/seed*/config.json"))
    if not runs:
        parser.error(f"no runs/<system>/seed*/config.json under {arguments.runs}")
    print("| run | routed side | test cross-entropy, own route | another task's route: mean over the shifts "
          "[lowest, highest] | misrouting cost |\n|---|---|---:|---:|---:|")
    costs: dict[str, list[float]] = {}
    for run in runs:
        cells, cost = run_row(run)
        print(f"| {run.relative_to(arguments.runs)} | {cells}")
        if cost is not None:
            costs.setdefault(run.parent.name, []).append(cost)
    print("\n| system | seeds | misrouting cost, mean ± std over seeds | seeds where misrouting costs |\n"
          "|---|---:|---:|---:|")
    for system, values in costs.items():
        mean, spread = mean_and_spread(values)
        print(f"| {system} | {len(values)} | {mean:+.3f} ± {spread:.3f} | "
              f"{sum(value > 0 for value in values)} of {len(values)} |")
    return costs


if __name__ == "__main__":
    main()
