"""Run `mt_why.yaml` (this folder) with the two Group ablations applied by system name. Labelled probes, not recipe
options: each patches one function for the duration of its own runs and restores it.

* "one decoder task": `headsel_recipes.preprocess.prepare_example` routes every usable example to decoder task 0.
* "no sampling noise": `hf_headsel.selection._gumbel_like` returns zeros, so `g1 - g2 = 0` and the training draw is
  argmax phi, with the straight-through gate `1 - y.detach() + y`, `y = sigmoid(phi / tau)`.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/results/quality/mt_why/ablation_probe.py   # resumable
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections import Counter
from pathlib import Path

import torch

import hf_headsel.selection
from headsel_recipes import preprocess
from headsel_recipes.experiment import load_experiment, report, train_all
from headsel_recipes.recipe import run
from headsel_recipes.tasks import TASKS

HERE = Path(__file__).resolve().parent
CALLS = Counter()  # how often each patch acted in the current run: printed after it, the check that it applied


@contextlib.contextmanager
def patched(module, name: str, replacement):
    original = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


def one_decoder_task(row, ctx):
    out = ORIGINAL_PREPARE(row, ctx)
    if out["decoder_task_ids"] >= 0:
        CALLS["examples routed to decoder task 0"] += 1
        out["decoder_task_ids"] = 0
    return out


def no_noise(tensor):
    CALLS["noise-free draws"] += 1
    return torch.zeros_like(tensor)


ORIGINAL_PREPARE = preprocess.prepare_example
ONE_TASK = lambda: patched(preprocess, "prepare_example", one_decoder_task)  # noqa: E731
NO_NOISE = lambda: patched(hf_headsel.selection, "_gumbel_like", no_noise)  # noqa: E731


# system folder -> the patch its runs get
ABLATIONS = {
    "group_one_decoder_task_ablation": ONE_TASK,
    "group_no_sampling_noise_ablation": NO_NOISE,
}


def runner(task, args):
    system = Path(args[0]).parent.parent.name  # runs/<system>/seed<N>/run_config.json
    ablation = ABLATIONS.get(system, contextlib.nullcontext)
    print(f"== {system} ({'patched' if system in ABLATIONS else 'as configured'}): {args[0]}", flush=True)
    CALLS.clear()
    with ablation():
        result = run(task, args)
    print(f"== {system}: patch calls {dict(CALLS)}", flush=True)
    return result


if __name__ == "__main__":
    experiment = load_experiment(str(HERE / "mt_why.yaml"))
    if "--tables_only" not in sys.argv:
        for seed in experiment.seeds:  # seed by seed: every system of seed 1 first, so a cut run still pairs
            train_all(dataclasses.replace(experiment, seeds=[seed]), TASKS[experiment.recipe], runner)
    report(experiment, TASKS[experiment.recipe])
