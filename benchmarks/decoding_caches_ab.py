# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What the host-validated caches of compiled decoding steps buy: compiled greedy generation of the stock model,
of head selection as it is (`generate` hands every decoding step the selecting decoder layers' caches,
`head_selection_eval_weights`), and of the same model preparing its steps as the stock `GenerationMixin` does
(the compiled step then gathers the selected weight rows in its graph at every step). Timed in one process by
`overhead.py`'s method (interleaved rounds, the order rotating) on its "generate greedy" rows, every component
selecting, `--compile`'s settings.

    python benchmarks/decoding_caches_ab.py --family marian --threads 2 --repeats 10
"""

from __future__ import annotations

import argparse
import copy
import types

import torch
from transformers import GenerationMixin

import overhead

SYSTEMS = ("stock", "headsel", "headsel_uncached")


def without_decoding_caches(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model` whose generation steps are prepared by the stock `GenerationMixin` (no validated caches)."""
    model = copy.deepcopy(model)
    model.prepare_inputs_for_generation = types.MethodType(GenerationMixin.prepare_inputs_for_generation, model)
    return model


def main(argv: list[str] | None = None) -> list[overhead.Measurement]:
    """Time compiled greedy generation of the three systems, single-task then mixed-task; print and return them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    overhead.add_ab_arguments(parser, threads=2, repeats=10)
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend (eager: tracing only)")
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args, compile=True, compile_backend=args.compile_backend)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, overhead.COMPILED_SYSTEMS)
    models["headsel_uncached"] = without_decoding_caches(models["headsel"])
    measurements = []
    with torch._dynamo.config.patch(**overhead.RECOMPILES):
        for mixed in (False, True):
            calls = overhead.measurement_calls(cfg, models, models, mixed, device)["generate greedy"]
            name = overhead.measurement_name(mixed, "generate greedy", cfg)
            measurements.append(overhead.time_systems(name, {s: calls[s] for s in SYSTEMS}, cfg, device))
    print(f"{overhead.model_summary(cfg)}, compiled, {args.threads} thread(s), {cfg.repeats} interleaved rounds")
    for measurement in measurements:
        print(measurement.name)
        print("\n".join(overhead.ratio_lines(measurement)))
    return measurements


if __name__ == "__main__":
    main()
