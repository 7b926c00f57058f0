# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What grouping a mixed batch by task buys in a training step: the stock model, head selection with
`group_mixed_batches` on, and the same model with it off, timed in one process by `overhead.py`'s method
(interleaved rounds, the order rotating) on the configuration and mixed batch of its "train step, mixed-task" row,
every component selecting.

    python benchmarks/grouping_ab.py --family marian --threads 1 --repeats 20
"""

from __future__ import annotations

import argparse

import torch

import overhead

GROUPING = {"grouped": True, "ungrouped": False}  # system name -> `group_mixed_batches`


def main(argv: list[str] | None = None) -> overhead.Measurement:
    """Time the stock model and head selection with and without grouping; print and return the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    overhead.add_ab_arguments(parser, threads=1, repeats=20)
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32)
    calls = overhead.measurement_calls(cfg, models, models, True, device)["train step"]
    headsel = models["headsel"]

    def with_grouping(flag: bool):
        def run():
            headsel.group_mixed_batches = flag
            return calls["headsel"]()
        return run

    systems = {"stock": calls["stock"], **{name: with_grouping(flag) for name, flag in GROUPING.items()}}
    measurement = overhead.time_systems("train step, mixed-task", systems, cfg, device)
    print(f"{args.family}, train step, mixed-task, {args.threads} thread(s), {cfg.repeats} interleaved rounds")
    print("\n".join(overhead.ratio_lines(measurement)))
    return measurement


if __name__ == "__main__":
    main()
