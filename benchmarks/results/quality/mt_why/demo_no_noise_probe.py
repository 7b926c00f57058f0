"""The demo's group run (its own flags, from `outputs/demo_longer/steps<N>_seed<S>/run_config.json`) trained without
the Gumbel sampling noise (the patch of `ablation_probe.py`: the training draw is argmax phi, the straight-through
gate still carries the gradient). A labelled probe, group only, paired with the shared runs of those folders:

    python benchmarks/results/quality/mt_why/demo_no_noise_probe.py SEED [STEPS]   # STEPS: 150 (make demo)
    python benchmarks/demo_seeds.py outputs/demo_longer/steps150_seed{1,2,3} \
        --group outputs/demo_longer/steps150_no_noise_seed{1,2,3}
"""
import json
import sys
from pathlib import Path

from ablation_probe import CALLS, NO_NOISE  # this script's folder is on the path

from headsel_recipes.demo import run_recipe

seed = int(sys.argv[1])
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 150
flags = json.loads(Path(f"outputs/demo_longer/steps{steps}_seed{seed}/run_config.json").read_text())
flags.update(output_dir=f"outputs/demo_longer/steps{steps}_no_noise_seed{seed}")
with NO_NOISE():
    run_recipe(flags)
print(f"patch calls {dict(CALLS)}", flush=True)
