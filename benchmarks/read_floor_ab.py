# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What reading the q/k/v rows of every candidate head costs the stock model: the floor under a mixed-task batch.

A decoding step whose batch mixes tasks must read the query/key/value weight rows of every candidate head that some
task present selects: with a few tasks choosing `H` of `H' = 2H`, nearly all of them, `H'/H` times the stock model's
q/k/v bytes. The *wide stock* model reads exactly that much and does nothing else: each q/k/v projection of every
attention layer holds `H' * head_dim` rows (the stock rows first), projects onto all of them and keeps the stock
rows, so its outputs are the stock model's (checked before timing) and its only extra work is the extra rows, with
none of head selection's routing, caches or gathers. Timed beside the stock model and head selection (`auto`) by
`overhead.py`'s method (interleaved rounds, the order rotating) on the mixed-task batch of one of its
measurements, every component selecting. Head selection / wide stock near 1 means that what a mixed batch costs
over the stock model is the weights it has to read, not the code around them.

    python benchmarks/read_floor_ab.py --family marian --measurement "generate greedy" --repeats 30
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

import overhead

from hf_headsel.attention import PROJECTIONS


class WideLinear(nn.Module):
    """`linear` reading `factor` times its rows: the stock rows, then `(factor - 1) * out_features` more (random,
    zero bias; `factor` need not be whole: `H' / H`); projects onto all of them and returns the stock rows'
    outputs."""

    def __init__(self, linear: nn.Linear, factor: float):
        super().__init__()
        extra = round((factor - 1) * linear.out_features)
        if extra < 0:
            raise ValueError(f"factor must be >= 1, got {factor}")
        weight = linear.weight.detach()
        more = torch.randn(extra, linear.in_features, dtype=weight.dtype, device=weight.device) * 0.02
        self.weight = nn.Parameter(torch.cat([weight, more]))
        self.bias = None if linear.bias is None else nn.Parameter(
            torch.cat([linear.bias.detach(), linear.bias.new_zeros(extra)]))
        self.out_features = linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)[..., : self.out_features]


def widened(model: nn.Module, factor: float) -> nn.Module:
    """A copy of the stock `model` whose attention layers' q/k/v projections are [`WideLinear`]s."""
    wide = copy.deepcopy(model)
    for module in list(wide.modules()):
        if all(isinstance(getattr(module, name, None), nn.Linear) for name in PROJECTIONS):
            for name in PROJECTIONS:
                setattr(module, name, WideLinear(getattr(module, name), factor))
    return wide


def same_output(a, b) -> bool:
    """Token ids equal, or floating-point outputs (logits, a loss) equal up to the kernels' rounding."""
    return torch.equal(a, b) if not a.is_floating_point() else torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def main(argv: list[str] | None = None) -> overhead.Measurement:
    """Time the stock model, the wide stock model and head selection on one mixed-task measurement; print and
    return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurement", default="generate greedy", choices=overhead.MEASUREMENTS)
    overhead.add_ab_arguments(parser, threads=1, repeats=30)
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models, calls = overhead.ab_calls(cfg, args.measurement, device)
    # the wide model takes the stock model's inputs (no task ids): its calls are built as the stock system's
    wide = widened(models["stock"], cfg.total_heads / cfg.heads)
    calls["stock_wide"] = overhead.measurement_calls(
        cfg, {"stock": wide}, {"stock": copy.deepcopy(wide)}, True, device)[args.measurement]["stock"]
    # (a training step updates the weights: its outputs are not compared, its first call would change them)
    if args.measurement != "train step" and not same_output(calls["stock"](), calls["stock_wide"]()):
        raise AssertionError("the wide stock model's outputs differ from the stock model's")
    systems = {system: calls[system] for system in ("stock", "stock_wide", "headsel")}
    name = overhead.measurement_name(True, args.measurement, cfg)
    measurement = overhead.time_systems(name, systems, cfg, device)
    about = f"{name}; stock_wide reads {cfg.total_heads / cfg.heads:g}x the stock q/k/v rows (outputs checked equal)"
    print(overhead.ab_report(measurement, cfg, args.threads, about,
                             [("stock_wide", "stock"), ("headsel", "stock"), ("headsel", "stock_wide")]))
    return measurement


if __name__ == "__main__":
    main()
