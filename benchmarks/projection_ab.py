# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How to project a mixed-task batch: the stock model and head selection with each `mixed_batch_projection` mode
(`grouped`, `gathered`, `batched`, `auto`) timed in one process by `overhead.py`'s method (interleaved rounds, the
order rotating) on the mixed-task batch of one of its measurements, every component selecting. Besides the ratios
of medians, each mode's per-round ratio to the stock model and to the first mode, with a 95% bootstrap interval.

    python benchmarks/projection_ab.py --family marian --measurement "generate beam" --modes gathered batched
"""

from __future__ import annotations

import argparse

import torch

import overhead
from hf_headsel.attention import MIXED_BATCH_PROJECTIONS, HeadSelectionAttentionMixin


def in_mode(call, mode: str):
    """`call` with every head-selection attention layer projecting mixed batches `mode`."""
    def run():
        HeadSelectionAttentionMixin.mixed_batch_projection = mode
        try:
            return call()
        finally:
            HeadSelectionAttentionMixin.mixed_batch_projection = "auto"
    return run


def main(argv: list[str] | None = None) -> overhead.Measurement:
    """Time the stock model and head selection in each mode on one mixed-task measurement; print and return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurement", default="generate greedy", choices=overhead.MEASUREMENTS)
    parser.add_argument("--modes", nargs="+", default=["gathered", "batched"], choices=MIXED_BATCH_PROJECTIONS)
    overhead.add_ab_arguments(parser, threads=1, repeats=20)
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    _, calls = overhead.ab_calls(cfg, args.measurement, device)
    systems = {"stock": calls["stock"], **{mode: in_mode(calls["headsel"], mode) for mode in args.modes}}
    name = overhead.measurement_name(True, args.measurement, cfg)
    measurement = overhead.time_systems(name, systems, cfg, device)
    pairs = [(mode, "stock") for mode in args.modes] + [(mode, args.modes[0]) for mode in args.modes[1:]]
    print(overhead.ab_report(measurement, cfg, args.threads, name, pairs))
    return measurement


if __name__ == "__main__":
    main()
