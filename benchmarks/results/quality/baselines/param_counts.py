"""Parameters per system, from each run's saved model (seed 1): the total, and how many more than the shared model
of the same experiment. The head-selection logits and adapters are counted in the total.

    python benchmarks/results/quality/baselines/param_counts.py outputs/benchmark/{asr_noise,st_noise,mt_why}
"""

import math
import sys
from pathlib import Path

from safetensors import safe_open


def parameter_count(model_file: Path) -> int:
    with safe_open(str(model_file), "pt") as tensors:
        return sum(math.prod(tensors.get_slice(name).get_shape()) for name in tensors.keys())


for folder in map(Path, sys.argv[1:]):
    counts = {run.parent.name: parameter_count(run / "model.safetensors")
              for run in sorted(folder.glob("runs/*/seed1")) if (run / "model.safetensors").exists()}
    print(f"\n{folder.name}\n\n| system (run folder) | parameters | over shared |\n|---|---:|---:|")
    for system, count in counts.items():
        print(f"| {system} | {count:,} | {count / counts['shared']:.2f}x |")
