# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How far each head-selection run's selection moved: the (layer, slot) choices that differ between the first and
the last snapshot of its `head_selection_log.jsonl`, per component, out of all of them. Components with nothing to
choose (`H' = H` in the run's `config.json`: the adapters and the shared model log their fixed heads too) are left
out, and runs without any to choose.

With `--initial FOLDER` (the system folder of a run whose selection logits were frozen, learning rate 0: its saved
logits are the initial ones of every run of the same seed), a second table says why the choices moved as little as
they did: how far each group-strategy run's logits travelled from their initial values, against the initial margins
of its choices (per slot, the chosen candidate's logit minus the best other candidate's in its group): a choice
changes when its margin is travelled through.

    python benchmarks/results/quality/baselines/selection_changes.py outputs/benchmark/mt_why outputs/benchmark/mt_3000_updates
    python benchmarks/results/quality/baselines/selection_changes.py outputs/benchmark/mt_3000_updates \
        --initial group_no_sampling_noise_selection_frozen_ablation
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from safetensors import safe_open
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


def logged_runs(experiment: Path) -> list[Path]:
    """The run folders of an experiment with a selection log and a saved model (a run still training has no
    `config.json` yet)."""
    return [log_path.parent for log_path in sorted((experiment / "runs").glob(f"*/seed*/{SELECTION_LOG_NAME}"))
            if (log_path.parent / "config.json").is_file()]


def group_margins(logits: torch.Tensor, chosen: torch.LongTensor, heads: int) -> torch.Tensor:
    """Per slot (`[..., H]`), the logit of the group's `chosen` candidate (its index within the group) minus the best
    other candidate's of the group: negative once the group strategy would choose another. `logits` `[..., H']`."""
    groups = logits.unflatten(-1, (logits.shape[-1] // heads, heads))  # candidate g + j*H at [..., j, g]
    picked = groups.gather(-2, chosen.unsqueeze(-2)).squeeze(-2)
    others = groups.scatter(-2, chosen.unsqueeze(-2), float("-inf")).amax(dim=-2)
    return picked - others


def saved_logits(run: Path, component: str) -> torch.Tensor:
    """A saved model's selection logits of one component, read alone from its `model.safetensors`."""
    with safe_open(run / "model.safetensors", framework="pt") as weights:
        return weights.get_tensor(f"head_selection.{component}.logits").float()


def logit_travel(run: Path, initial_run: Path) -> dict[str, dict[str, float]]:
    """`{component: measures}` of how far a group-strategy run's selection logits moved from their initial values
    (the logits saved by `initial_run`, a frozen run of the same seed, checked against the run's first snapshot):
    the mean absolute change, the mean change (a shift of every candidate alike changes no choice), the mean initial
    margin, the mean change of the margins (positive: the initial choices entrenched) and its mean absolute value,
    and the choices whose margin went negative, of all."""
    config = AutoConfig.from_pretrained(run)
    if config.head_selection_strategy != "group":
        raise ValueError(f"{run}: logit travel is measured for the group strategy, not "
                         f"{config.head_selection_strategy!r}")
    first = read_selection_log(run / SELECTION_LOG_NAME).snapshots[0]
    travel = {}
    for component in sorted(components_with_a_choice(run)):
        start, end = (saved_logits(folder, component) for folder in (initial_run, run))
        heads = config.heads(component_side(component))
        chosen = start.unflatten(-1, (start.shape[-1] // heads, heads)).argmax(dim=-2)
        logged = torch.tensor(list(first.selections[component].values()))  # [tasks, layers, H], task order
        if not torch.equal(chosen * heads + torch.arange(heads), logged):
            raise ValueError(f"{run}: the initial logits of {initial_run} do not give the run's first logged "
                             f"selection of {component}; --initial must name a frozen run of the same seed and setup")
        margin_start, margin_end = group_margins(start, chosen, heads), group_margins(end, chosen, heads)
        travel[component] = {
            "abs_change": (end - start).abs().mean().item(), "mean_change": (end - start).mean().item(),
            "initial_margin": margin_start.mean().item(),
            "margin_change": (margin_end - margin_start).mean().item(),
            "abs_margin_change": (margin_end - margin_start).abs().mean().item(),
            "changed": int((margin_end < 0).sum()), "choices": margin_end.numel(),
        }
    return travel


def print_travel(experiments: list[Path], initial_system: str) -> None:
    """The logit-travel table of every group-strategy run with a frozen run of the same seed in `initial_system`."""
    print("\n| experiment | system | seed | component | mean abs change of phi | mean change | initial margin | "
          "mean change of the margin | mean abs change of the margin | choices changed |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for experiment in experiments:
        for run in logged_runs(experiment):
            initial_run = experiment / "runs" / initial_system / run.name
            if run.parent.name == initial_system or not initial_run.is_dir() or not components_with_a_choice(run):
                continue
            if AutoConfig.from_pretrained(run).head_selection_strategy != "group":
                continue
            for component, m in logit_travel(run, initial_run).items():
                print(f"| {experiment.name} | {run.parent.name} | {run.name[4:]} | {component} | "
                      f"{m['abs_change']:.3f} | {m['mean_change']:+.3f} | {m['initial_margin']:.3f} | "
                      f"{m['margin_change']:+.3f} | {m['abs_margin_change']:.3f} | {m['changed']} / {m['choices']} |")


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="+", type=Path, help="experiment output folders (runs/<system>/seed*/)")
    parser.add_argument("--initial", metavar="FOLDER",
                        help="the system folder of frozen-selection runs (their logits are the initial ones): also "
                             "print how far each group-strategy run's logits travelled")
    options = parser.parse_args(args)
    print("| experiment | system | seed | last step | choices changed (component: changed / all) |")
    print("|---|---|---:|---:|---|")
    for experiment in options.experiments:
        for seed_folder in logged_runs(experiment):
            if (moved := net_changes(seed_folder / SELECTION_LOG_NAME)) is None:
                continue
            step, counts = moved
            cells = ", ".join(f"{component}: {changed} / {total}" for component, (changed, total) in counts.items())
            print(f"| {experiment.name} | {seed_folder.parent.name} | {seed_folder.name[4:]} | {step} | {cells} |")
    if options.initial:
        print_travel(options.experiments, options.initial)


if __name__ == "__main__":
    main()
