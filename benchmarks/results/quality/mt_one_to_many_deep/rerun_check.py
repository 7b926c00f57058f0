"""Session 63: are two trainings of one run the same, weight for weight? Compares the `model.safetensors` of run
folders with the first one's, tensor by tensor, as a Markdown table (a diagnostic of reruns, not a comparison of
systems). With `--config`, instead writes a short copy of a depth run's `run_config.json` for `rerun_check.sh`.

    python benchmarks/results/quality/mt_one_to_many_deep/rerun_check.py REFERENCE_RUN OTHER_RUN...
    python benchmarks/results/quality/mt_one_to_many_deep/rerun_check.py --config SOURCE.json OUTPUT_DIR STEPS
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file


def short_config(source: Path, output_dir: Path, steps: int) -> Path:
    """`source`'s run config, training only (`steps` updates, no test), into `output_dir`/run_config.json.

    The learning-rate schedule follows `steps`, so a short run is compared with short runs only."""
    config = json.loads(source.read_text())
    config.update(output_dir=str(output_dir), cache_dir=str(output_dir.parent / "cache"), max_steps=steps,
                  logging_steps=min(steps, 10), do_predict=False)
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / "run_config.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def differences(reference: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> tuple[int, float]:
    """How many of `reference`'s tensors `other` holds otherwise, and the largest absolute difference among them."""
    if reference.keys() != other.keys():
        raise ValueError(f"the runs hold other tensors: {sorted(reference.keys() ^ other.keys())[:5]}")
    changed = [name for name in reference if not torch.equal(reference[name], other[name])]
    largest = max(((reference[name] - other[name]).abs().max().item() for name in changed), default=0.0)
    return len(changed), largest


def main(argv: list[str] | None = None) -> list[tuple[int, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="store_true", help="write a short run config instead of comparing")
    parser.add_argument("paths", nargs="+", help="REFERENCE_RUN OTHER_RUN... (or SOURCE.json OUTPUT_DIR STEPS)")
    args = parser.parse_args(argv)
    if args.config:
        source, output_dir, steps = args.paths
        print(short_config(Path(source), Path(output_dir), int(steps)))
        return []
    if len(args.paths) < 2:
        parser.error("give a reference run and at least one run to compare with it")
    reference_run, *others = map(Path, args.paths)
    reference = load_file(reference_run / "model.safetensors")
    print(f"| run | tensors unlike `{reference_run.name}`'s (of {len(reference)}) | largest difference |")
    print("|---|---:|---:|")
    rows = []
    for run in others:
        changed, largest = differences(reference, load_file(run / "model.safetensors"))
        print(f"| {run.name} | {changed} | {largest:.2g} |")
        rows.append((changed, largest))
    return rows


if __name__ == "__main__":
    main()
