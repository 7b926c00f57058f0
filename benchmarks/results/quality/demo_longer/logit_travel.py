"""How far the selection logits of finished demo runs moved: rebuild each run's initial model (the recipe's seed, then
its model-building code, as `headsel_recipes.recipe.run` does), check that its selection equals the run's logged
step-0 selection, and compare its logits with the final model's.

    python benchmarks/results/quality/demo_longer/logit_travel.py outputs/demo_longer/steps1000_seed1 [...]
"""
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import set_seed

from hf_headsel.analysis import SELECTION_LOG_NAME, read_selection_log, selection_snapshot
from headsel_recipes.arguments import parse_arguments
from headsel_recipes.modeling import build_model
from headsel_recipes.tasks import MT

for run in map(Path, sys.argv[1:]):
    model_args, head_args, data_args, training_args = parse_arguments([str(run / "run_config.json")])
    set_seed(training_args.seed)
    logged = read_selection_log(run / SELECTION_LOG_NAME).snapshots[0]  # step 0, before any update
    head_args.task_type = "lang"
    model = build_model(MT, model_args, head_args, None, ["en"], sorted(logged.selections["decoder_self"]))
    same = selection_snapshot(model, 0)["selections"] == logged.selections
    final = load_file(str(run / "model.safetensors"))
    travel, gaps = [], []
    for component, selector in model.head_selection.items():
        start = selector.logits.detach()
        end = final[f"head_selection.{component}.logits"]
        travel.append((end - start).abs().flatten())
        pairs = start.unflatten(-1, (2, selector.heads))  # group: slot g chooses between g and g + H
        gaps.append((pairs[..., 0, :] - pairs[..., 1, :]).abs().flatten())
    travel, gaps = torch.cat(travel), torch.cat(gaps)
    print(f"{run}: initial selection equals the logged step 0: {same}; logits {travel.numel()}, |final - initial| "
          f"max {travel.max():.4f}, median {travel.median():.4f}; initial gap between a slot's two candidates "
          f"median {gaps.median():.3f}, min {gaps.min():.4f}, under the max travel x2: "
          f"{int((gaps < 2 * travel.max()).sum())} of {gaps.numel()}")
