"""Parameters per system, from each run's saved model (seed 1): the total, how many more than the shared model of
the same experiment, and the same in use. The head-selection logits and adapters are counted in the total.

In use: adapters keyed by direction are built for every encoder task x decoder task pair, and an experiment trains
only some (ASR: the 8 `x -> x` of 64). An adapter set counts as in use when its up-projection has left zero: it
starts at zero, and only a set that sees examples gets a gradient (with AdamW, weight decay keeps zero at zero).

    python benchmarks/results/quality/baselines/param_counts.py outputs/benchmark/{asr_noise,st_noise,mt_why}
"""

import math
import sys
from pathlib import Path

from safetensors import safe_open

ADAPTER = "task_adapter."
ADAPTER_UP = ADAPTER + "up_weight"


def parameter_counts(model_file: Path) -> tuple[int, int]:
    """The model's parameters, and those in use (the adapter sets never trained left out)."""
    with safe_open(str(model_file), "pt") as tensors:
        shapes = {name: tensors.get_slice(name).get_shape() for name in tensors.keys()}
        used_sets = {name[: -len(ADAPTER_UP)]: (tensors.get_tensor(name).flatten(1) != 0).any(1).sum().item()
                     for name in shapes if name.endswith(ADAPTER_UP)}
    total = sum(math.prod(shape) for shape in shapes.values())
    unused = sum(math.prod(shape[1:]) * (shape[0] - used_sets[name.split(ADAPTER)[0]])
                 for name, shape in shapes.items() if ADAPTER in name)
    return total, total - unused


for folder in map(Path, sys.argv[1:]):
    counts = {run.parent.name: parameter_counts(run / "model.safetensors")
              for run in sorted(folder.glob("runs/*/seed1")) if (run / "model.safetensors").exists()}
    shared = counts["shared"][0]
    print(f"\n{folder.name}\n\n| system (run folder) | parameters | over shared | in use | in use over shared |\n"
          "|---|---:|---:|---:|---:|")
    for system, (total, in_use) in counts.items():
        print(f"| {system} | {total:,} | {total / shared:.2f}x | {in_use:,} | {in_use / shared:.2f}x |")
