# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What a mixed-task generation batch laid out task by task would save in its decoding steps: the stock model and
head selection on overhead.py's mixed greedy batch as drawn (interleaved: each step's batched projection gathers
the examples into one block per task and scatters them back) and on the same examples reordered by decoder task
(the blocks are views: no gather, no scatter), timed in one process by overhead.py's method. The tokens of the two
orders are checked equal (one put back in the other's order) before timing. An upper bound on what reordering
inside `generate` could buy, before the cost of the reorder itself.

    PYTHONPATH=benchmarks python benchmarks/results/issue15/session31/sorted_batch_ab.py --family marian --repeats 30
"""

from __future__ import annotations

import argparse

import torch

import overhead  # benchmarks/ on PYTHONPATH


def main(argv: list[str] | None = None) -> overhead.Measurement:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurement", default="generate greedy", choices=["generate greedy", "generate beam"])
    overhead.add_ab_arguments(parser, threads=1, repeats=30)
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    torch.manual_seed(20 + True)  # measurement_calls' seed of the mixed generation batch
    inputs, routing = overhead.make_inputs(cfg, cfg.gen_batch_size, True, device, labels=False)
    inputs.pop("decoder_input_ids")
    order = torch.sort(routing["decoder_task_ids"], stable=True).indices
    sorted_inputs = {name: value[order] for name, value in inputs.items()}
    sorted_routing = {name: value[order] for name, value in routing.items()}
    beams = cfg.num_beams if args.measurement == "generate beam" else 1
    calls = overhead.generate_calls(models, inputs, routing, cfg, num_beams=beams)
    calls["headsel_sorted"] = overhead.generate_calls({"headsel": models["headsel"]}, sorted_inputs, sorted_routing,
                                                      cfg, num_beams=beams)["headsel"]
    if not torch.equal(calls["headsel"]()[order], calls["headsel_sorted"]()):
        raise AssertionError("the reordered batch generates other tokens")
    name = overhead.measurement_name(True, args.measurement, cfg)
    measurement = overhead.time_systems(name, calls, cfg, device)
    about = f"{name}; headsel_sorted: the same examples ordered by decoder task (tokens checked equal)"
    print(overhead.ab_report(measurement, cfg, args.threads, about,
                             [("headsel", "stock"), ("headsel_sorted", "stock"), ("headsel_sorted", "headsel")]))
    return measurement


if __name__ == "__main__":
    main()
