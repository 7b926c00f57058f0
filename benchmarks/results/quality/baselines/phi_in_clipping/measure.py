"""How much the selector logits of the adapter baseline's H' = H layers weigh in gradient clipping (session 27).

The recipes' adapter systems (`total_*_attention_heads` = H, default components) keep selecting layers with one
candidate per slot: their `phi` changes no output but gets gradients through the straight-through gate, and those
enter the global gradient norm that `max_grad_norm` (1.0) clips. This runs the MT adapter system of
`mt_3000_updates.yaml` (seed 1, its flags from the run's `run_config.json`) for its first N updates and records, at
every update, the total gradient norm and `phi`'s part of it: where the total exceeds 1 the clip scales every update
by 1 / total, so `phi` shrinks the others' steps by total / total_without_phi.

    python benchmarks/results/quality/baselines/phi_in_clipping/measure.py --max_steps 600
"""

import argparse
import json
import math
import sys
from pathlib import Path

import torch

import headsel_recipes.recipe as recipe
from headsel_recipes.tasks import MT

RUN = "outputs/benchmark/mt_3000_updates/runs/adapters_as_many_parameters_as_group_trained_with_the_model_ablation/seed1"
OUT = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_steps", type=int, default=600)
    args = parser.parse_args()
    config = json.loads((Path(RUN) / "run_config.json").read_text())
    config.update(output_dir="outputs/phi_in_clipping", do_predict=False, logging_steps=50)
    # the schedule of the full run (3,000 updates), stopped early: the first `max_steps` updates are the full run's
    flags = []
    for key, value in config.items():
        if key == "max_steps" or value is None:
            continue
        for item in (value if isinstance(value, list) else [value]):
            flags += [f"--{key}", str(item)] if not isinstance(item, bool) else [f"--{key}", str(item).lower()]
    flags += ["--max_steps", str(config["max_steps"])]

    captured, rows = {}, []
    build = recipe.build_model

    def build_and_keep(*a, **k):
        captured["model"] = build(*a, **k)
        return captured["model"]

    recipe.build_model = build_and_keep
    clip = torch.nn.utils.clip_grad_norm_

    def recording_clip(parameters, max_norm, *a, **k):
        parameters = list(parameters)
        phi = {id(p) for p in captured["model"].head_selection.parameters()}
        phi_sq = sum(float(p.grad.pow(2).sum()) for p in parameters if id(p) in phi and p.grad is not None)
        total = clip(parameters, max_norm, *a, **k)
        rows.append({"total": float(total), "phi": math.sqrt(phi_sq)})
        if len(rows) >= args.max_steps:
            raise KeyboardInterrupt  # the first `max_steps` updates of the full schedule are measured
        return total

    torch.nn.utils.clip_grad_norm_ = recording_clip
    try:
        recipe.run(MT, flags)
    except KeyboardInterrupt:
        pass
    clipped = [r for r in rows if r["total"] > 1.0]
    shrink = [r["total"] / math.sqrt(max(r["total"] ** 2 - r["phi"] ** 2, 0.0)) for r in clipped]
    summary = {
        "updates": len(rows),
        "updates_clipped": len(clipped),
        "phi_share_of_norm_max": max(r["phi"] / r["total"] for r in rows),
        "phi_share_of_norm_median": sorted(r["phi"] / r["total"] for r in rows)[len(rows) // 2],
        "largest_extra_shrink_of_a_clipped_update": max(shrink) if shrink else 1.0,
    }
    (OUT / "grad_norms.json").write_text(json.dumps({"summary": summary, "per_update": rows}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    sys.exit(main())
