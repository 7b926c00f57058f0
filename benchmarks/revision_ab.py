# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What a change buys, measured in one process: the stock model, head selection as an earlier git revision has it,
and head selection as checked out, timed by `overhead.py`'s method (interleaved rounds, the order rotating) on one
of its measurements, every component selecting. On a host whose speed drifts by more than the change, two separate
runs cannot tell a few per cent apart; three systems side by side in one process can. Besides the ratios of
medians, each system's per-round ratio to the others (`overhead.paired`) with a 95% bootstrap interval.

The earlier revision's `src/hf_headsel` is extracted with `git archive` into a temporary folder and imported under
another name (its modules import each other relatively); both models get the same weights.

    python benchmarks/revision_ab.py --rev bc0cd9a --family marian --measurement "generate greedy" --mixed
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

import hf_headsel
import overhead

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE = "src/hf_headsel"
EARLIER = "hf_headsel_earlier"  # the import name of the earlier revision's package


def import_revision(revision: str, folder: Path):
    """The package `src/hf_headsel` of `revision`, imported as [`EARLIER`] from a copy in `folder`."""
    found = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                           capture_output=True, text=True)  # fmt: skip
    if found.returncode:
        raise SystemExit(f"--rev {revision!r}: no such commit in {REPOSITORY}")
    archive = folder / "package.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(REPOSITORY), "archive", revision, PACKAGE], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    (folder / PACKAGE).rename(folder / EARLIER)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(EARLIER)
    finally:
        sys.path.remove(str(folder))
        for family in hf_headsel.FAMILIES:  # the Auto classes map to the checkout's classes again
            family.register()


def earlier_twin(model: torch.nn.Module, family: str) -> torch.nn.Module:
    """`model` rebuilt with the earlier revision's classes, with its weights, in evaluation mode."""
    modeling = importlib.import_module(f"{EARLIER}.modeling_headsel_{family}")
    configuration = importlib.import_module(f"{EARLIER}.configuration_headsel_{family}")
    model_class = getattr(modeling, type(model).__name__)
    config_class = getattr(configuration, type(model.config).__name__)
    twin = model_class(config_class.from_dict(model.config.to_dict()))
    twin.load_state_dict(model.state_dict())
    return twin.eval()


def main(argv: list[str] | None = None) -> overhead.Measurement:
    """Time the three systems on one measurement; print and return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", required=True, help="the earlier git revision (commit, tag, branch)")
    parser.add_argument("--measurement", default="generate greedy", choices=overhead.MEASUREMENTS)
    parser.add_argument("--mixed", action="store_true", help="a mixed-task batch (default: single-task)")
    overhead.add_ab_arguments(parser, threads=1, repeats=40)
    args = parser.parse_args(argv)
    cfg = overhead.ab_config(args)
    with tempfile.TemporaryDirectory() as folder:  # kept while the earlier package runs
        import_revision(args.rev, Path(folder))
        return measure(cfg, args)


def measure(cfg: overhead.BenchConfig, args: argparse.Namespace) -> overhead.Measurement:
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    models["earlier"] = earlier_twin(models["headsel"], args.family)
    # every system called as overhead.py calls head selection (with the task ids), except the stock model
    systems = overhead.measurement_calls(cfg, models, models, args.mixed, device)[args.measurement]
    systems = {name: systems[name] for name in ("stock", "earlier", "headsel")}
    name = overhead.measurement_name(args.mixed, args.measurement, cfg)
    measurement = overhead.time_systems(name, systems, cfg, device)
    print(overhead.ab_report(measurement, cfg, args.threads, f"{name}; earlier = {args.rev}, headsel = the checkout",
                             [("earlier", "stock"), ("headsel", "stock"), ("headsel", "earlier")]))
    return measurement


if __name__ == "__main__":
    main()
