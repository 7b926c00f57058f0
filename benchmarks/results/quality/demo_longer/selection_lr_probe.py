"""Group-only probe: the demo's group run at 1000 updates with the selection logits' learning rate raised to 0.05."""
import json, sys
from pathlib import Path
from headsel_recipes.demo import run_recipe
seed = int(sys.argv[1])
flags = json.loads(Path(f"outputs/demo_longer/steps1000_seed{seed}/run_config.json").read_text())
flags.update(output_dir=f"outputs/demo_longer/steps1000_selection_lr005_seed{seed}", head_selection_learning_rate=0.05)
run_recipe(flags)
