# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What serving costs with head selection and with per-task adapters of as many parameters, against the stock model.

The quality benchmark's strongest baseline is per-task bottleneck adapters with as many parameters as head selection
(`benchmarks/RESULTS.md`). The two differ in what they cost at inference: head selection computes `H` of its `H'`
heads, as many as the stock model, while every adapter adds a layer norm and two projections after every encoder
and decoder layer; in a batch mixing tasks both route each example to its task's heads or adapter. Three systems on `overhead.py`'s models and
batches (every component selecting), timed by its method (interleaved rounds, the order rotating):

* **stock**: the stock model (the shared model);
* **headsel**: head selection, `H` of `H'` candidates (group);
* **adapters**: the stock model plus per-task adapters: the head-selection class with no selecting layer (its
  attention is the stock one) and adapters keyed by direction (the multilingual setting; `--adapter_key task`: by
  each side's task) whose bottleneck gives it as many parameters as headsel (`--bottleneck` another),
  up-projections drawn at random (a trained adapter's arithmetic, not the zeros of a fresh one).

Each measurement (`--measurements`, keys of `overhead.measurement_calls`) is timed on a single-task and a mixed-task
batch; ratios to the stock model, of the medians and paired.

    python benchmarks/adapters_ab.py --family marian --repeats 20
"""

from __future__ import annotations

import argparse
import copy

import torch

import overhead


def parameter_count(model: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())


def adapter_model(headsel: torch.nn.Module, cfg: overhead.BenchConfig, bottleneck: int,
                  key: str = "direction") -> torch.nn.Module:
    """The head-selection class with no selecting layer (the stock attention) and adapters of `bottleneck` keyed by
    `key`, up-projections random."""
    values = {**headsel.config.to_dict(), "head_selection_components": [], "total_encoder_attention_heads": cfg.heads,
              "total_decoder_attention_heads": cfg.heads, "task_adapter_dim": bottleneck, "task_adapter_key": key}
    torch.manual_seed(0)
    model = type(headsel)(type(headsel.config).from_dict(values))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("task_adapter.up_weight"):
                parameter.normal_(std=0.02)
    return model.eval()


def matching_bottleneck(headsel: torch.nn.Module, cfg: overhead.BenchConfig, key: str = "direction") -> int:
    """The bottleneck whose adapter model holds as many parameters as `headsel` (linear in the bottleneck)."""
    with torch.device("meta"):
        one, two = (parameter_count(adapter_model(headsel, cfg, b, key)) for b in (1, 2))
    return 1 + round((parameter_count(headsel) - one) / (two - one))


def main(argv: list[str] | None = None) -> list[overhead.Measurement]:
    """Time stock, head selection and adapters on each measurement, single- and mixed-task; print and return them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurements", nargs="+", default=["eval forward", "generate greedy"],
                        choices=overhead.MEASUREMENTS)
    parser.add_argument("--bottleneck", type=overhead.positive_int, help="the adapters' bottleneck (default: as many parameters)")
    parser.add_argument("--adapter_key", default="direction", choices=["direction", "task"],
                        help="what keys the adapters: each example's direction, or each side's task")
    overhead.add_ab_arguments(parser, threads=1, repeats=20)
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    bottleneck = args.bottleneck or matching_bottleneck(models["headsel"], cfg, args.adapter_key)
    models["adapters"] = adapter_model(models["headsel"], cfg, bottleneck, args.adapter_key)
    counts = {system: parameter_count(model) for system, model in models.items()}
    about = ("parameters over stock: " + ", ".join(f"{s} {counts[s] / counts['stock']:.3f}x" for s in models)
             + f"; adapters keyed by {args.adapter_key}, bottleneck {bottleneck}")
    train_models = {name: copy.deepcopy(model) for name, model in models.items()}
    results = []
    for mixed in (False, True):
        calls = overhead.measurement_calls(cfg, models, train_models, mixed, device)
        for measurement in args.measurements:
            name = overhead.measurement_name(mixed, measurement, cfg)
            result = overhead.time_systems(name, calls[measurement], cfg, device)
            print(overhead.ab_report(result, cfg, args.threads, f"{name}; {about}",
                                     [("headsel", "stock"), ("adapters", "stock"), ("adapters", "headsel")]), "\n",
                  flush=True)
            results.append(result)
    return results


if __name__ == "__main__":
    main()
