# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How many kernels head selection adds: ATen compute ops per call, the stock model against head selection.

On a GPU at small and medium sizes a model is launch-bound: its time is the number of kernels it launches (and the
host synchronisations between them), not their arithmetic. Counting the ATen operations that do work gives that
number without a GPU and without timing noise: the same models and inputs as `benchmarks/overhead.py`, one call of
each measurement under `torch.profiler`, counting the *leaf* ATen operations (those that call no other ATen
operation that counts) except the ones that launch no kernel (views, allocations, metadata). On CUDA each counted
operation is about one kernel launch (a few, such as fused attention, launch more). The counts are deterministic, so
a change that adds or removes kernels shows here exactly.

The training row counts the forward and backward passes, without the optimizer: on the CPU AdamW launches a few
kernels per parameter (about 2,000 here, the same for both systems), on CUDA a fixed handful (its default
multi-tensor implementation); counted in, the CPU's would hide the ratio a GPU sees.

Beside the kernels, the host work around them: the Python function calls of the same call (builtins included, as
`cProfile` counts them; deterministic too). Where kernels are small (a decoding step, a GPU, the tiny `--quick`
model) a step's time is its kernels plus this Python, and a change to the per-layer code shows here first.

The measurements: eval forward, greedy and beam-search generation (`num_beams` of overhead.py) and a training step
(forward and backward), single-task and mixed-task, a mixed-task batch in each `mixed_batch_projection` mode
(`auto` as on this CPU: grouped full passes, batched decoding steps). `--family` and `--components` are
overhead.py's (its presets included: `paper`, `all`, `cross`).

    python benchmarks/op_count.py                # the standard configuration of overhead.py (Marian)
    python benchmarks/op_count.py --quick        # the tiny one (same counts per layer, fewer layers)
    python benchmarks/op_count.py --tasks 2 4 8 16   # how the count grows with the tasks in a mixed batch
    python benchmarks/op_count.py --family speech_to_text --components all
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
from dataclasses import replace

import torch
from torch.profiler import ProfilerActivity, profile

from overhead import (  # beside this script (its folder comes first on the module path)
    QUICK,
    BenchConfig,
    config_from_flags,
    add_model_arguments,
    build_models,
    measurement_calls,
    measurement_label,
    model_overrides,
    model_summary,
    positive_int,
)

from hf_headsel.attention import MIXED_BATCH_PROJECTIONS, HeadSelectionAttentionMixin  # noqa: E402

SYSTEMS = ("stock", "headsel")
TRAIN_ROW = "train forward + backward"  # overhead.py's training step without the optimizer (see above)
#: Leaf ATen operations that launch no kernel: views, allocations and metadata.
NO_KERNEL = frozenset(
    f"aten::{name}"
    for name in (
        "view", "_unsafe_view", "_reshape_alias", "as_strided", "alias", "detach", "lift_fresh", "t", "transpose",
        "permute", "expand", "unsqueeze", "squeeze", "slice", "select", "narrow", "split", "split_with_sizes", "unbind",
        "unflatten", "flatten", "reshape", "chunk", "empty", "empty_strided", "empty_like", "new_empty",
        "new_empty_strided", "resize_", "set_", "result_type", "is_nonzero", "_local_scalar_dense", "item",
        "resolve_conj", "resolve_neg", "_has_compatible_shallow_copy_type", "is_same_size", "_to_copy", "to",
        # no kernel either: a dropout that is off (evaluation, p = 0) returns its input, the rest are views or
        # metadata (counted before session 49: 12-19 % of the counts)
        "dropout", "feature_dropout", "detach_", "view_as", "expand_as", "broadcast_to", "type_as", "contiguous",
    )
)  # fmt: skip


def count_ops(run) -> collections.Counter:
    """The kernel-launching ATen operations of one call of `run` (after one untimed call): an operation counts when
    it launches kernels itself, that is when it is not a view or allocation and none of the ATen operations it
    calls counts (so `linear` counts as its `addmm`, and `gather`, which only allocates through ATen, as itself)."""
    run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    counted = collections.Counter()

    def visit(event) -> bool:  # whether `event` or an ATen operation below it counts
        below = [visit(child) for child in event.cpu_children]  # visit every child: they may count themselves
        if any(below):
            return True
        if event.name.startswith("aten::") and event.name not in NO_KERNEL:
            counted[event.name] += 1
            return True
        return False

    for event in prof.events():
        if event.cpu_parent is None:
            visit(event)
    return counted


def count_python_calls(run) -> int:
    """The Python function calls (builtins included, as `cProfile` counts them) of one call of `run`, after one
    untimed call."""
    run()
    profiler = cProfile.Profile()
    profiler.runcall(run)
    return pstats.Stats(profiler).total_calls


def saved_bytes(model: torch.nn.Module, run) -> int:
    """Bytes autograd keeps for the backward pass during one call of `run` (a training forward pass of `model`):
    the distinct storages of the saved tensors, `model`'s parameters left out (alive anyway)."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()  # saved tensors stay alive: their storages cannot share an address
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return sum(storages.values())


def measurements(cfg: BenchConfig, models: dict, train_models: dict, mixed: bool) -> dict:
    """`{name: {system: run}}` for one batch kind: overhead.py's measurements, generation named with its tokens."""
    calls = measurement_calls(cfg, models, train_models, mixed, torch.device("cpu"), optimizer_step=False)
    return {(f"{measurement_label(name, cfg)} ({cfg.max_new_tokens} tokens)" if name.startswith("generate")
             else TRAIN_ROW if name == "train step" else name): run for name, run in calls.items()}


def count_table(cfg: BenchConfig, verbose: bool = False) -> list[str]:
    """Markdown rows `| measurement | batch | projection | stock | head selection | ratio |` (kernels), then the
    same three columns for Python calls, for one configuration."""
    models = build_models(cfg, torch.device("cpu"), torch.float32)
    train_models = build_models(cfg, torch.device("cpu"), torch.float32)
    rows = []
    for mixed in (False, True):
        for mode in MIXED_BATCH_PROJECTIONS if mixed else ("auto",):
            HeadSelectionAttentionMixin.mixed_batch_projection = mode
            for name, calls in measurements(cfg, models, train_models, mixed).items():
                counts = {system: count_ops(calls[system]) for system in SYSTEMS}
                stock, headsel = (sum(counts[system].values()) for system in SYSTEMS)
                python = {system: count_python_calls(calls[system]) for system in SYSTEMS}
                kind = "mixed" if mixed else "single"
                projection = ("auto (CPU)" if mode == "auto" else mode) if mixed else "-"
                rows.append(f"| {name} | {kind} | {projection} | {stock} | {headsel} | {headsel / stock:.2f} | "
                            f"{python['stock']} | {python['headsel']} | {python['headsel'] / python['stock']:.2f} |")
                if verbose:
                    delta = counts["headsel"].copy()
                    delta.subtract(counts["stock"])
                    changes = ", ".join(f"{op[6:]} {n:+d}" for op, n in delta.most_common() if n)
                    rows.append(f"|  |  |  |  | {changes} |  |  |  |  |")
    HeadSelectionAttentionMixin.mixed_batch_projection = "auto"
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny configuration of overhead.py --quick")
    add_model_arguments(parser, tasks=False)
    parser.add_argument("--tasks", type=positive_int, nargs="+", metavar="T", dest="task_sweep",
                        help="count at each number of tasks per side (a mixed batch holds min(T, batch size) tasks)")
    parser.add_argument("--verbose", action="store_true", help="list the operations head selection adds or removes")
    args = parser.parse_args(argv)
    model = model_overrides(parser, args)
    base = config_from_flags(**{**(QUICK if args.quick else {}), **model})
    torch.set_num_threads(1)
    print(f"{model_summary(base)}. Kernel-launching ATen ops and Python function calls per call (training: forward "
          "and backward, without the optimizer).")  # fmt: skip
    for tasks in args.task_sweep or [None]:
        cfg = base if tasks is None else replace(base, encoder_tasks=tasks, decoder_tasks=tasks)
        print(f"\n{cfg.encoder_tasks} + {cfg.decoder_tasks} tasks\n")
        print("| measurement | batch | projection | stock | head selection | ratio | Python calls, stock "
              "| head selection | ratio |\n|---|---|---|---:|---:|---:|---:|---:|---:|")
        print("\n".join(count_table(cfg, args.verbose)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
