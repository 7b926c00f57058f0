# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What grouping a mixed batch by task buys in a training step: the stock model, head selection with
`group_mixed_batches` on, and the same model with it off, timed in one process with interleaved repeats (the
configuration and mixed batch of `overhead.py`'s "train step, mixed-task" row, every component selecting).

    python benchmarks/grouping_ab.py --family marian --threads 1 --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

import overhead


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    """Time the three systems; print and return `{system: seconds of every repeat}`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="marian", choices=sorted(overhead.FAMILIES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="the tiny configuration of overhead.py --quick")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = overhead.BenchConfig(family=args.family, components=("encoder_self", "decoder_self", "decoder_cross"))
    if args.quick:
        cfg = replace(cfg, **overhead.QUICK)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32)
    calls = overhead.measurement_calls(cfg, models, models, True, device)["train step"]
    headsel = models["headsel"]

    def with_grouping(flag: bool):
        def run():
            headsel.group_mixed_batches = flag
            return calls["headsel"]()
        return run

    systems = {"stock": calls["stock"], "grouped": with_grouping(True), "ungrouped": with_grouping(False)}
    for run in systems.values():  # warm-up
        run(), run()
    times = {name: [] for name in systems}
    for _ in range(args.repeats):
        for name, run in systems.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    print(f"{args.family}, train step, mixed-task, {args.threads} thread(s), {args.repeats} interleaved repeats")
    stock_median, stock_min = statistics.median(times["stock"]), min(times["stock"])
    for name, measured in times.items():
        print(f"{name:10s} median {statistics.median(measured) * 1000:7.1f} ms (min {min(measured) * 1000:7.1f}); "
              f"vs stock {statistics.median(measured) / stock_median:.3f} (min {min(measured) / stock_min:.3f})")
    return times


if __name__ == "__main__":
    main()
