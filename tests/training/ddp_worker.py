# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Run `training/run_mt.py` unchanged under torchrun, and save this rank's selector logits before and after
training (for the DDP test).

    torchrun --nproc_per_node 2 tests/training/ddp_worker.py OUT_DIR <run_mt.py flags...>
"""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))

import run_mt  # noqa: E402
from headsel_recipes import recipe  # noqa: E402


def selector_logits(model) -> dict[str, torch.Tensor]:
    return {name: parameter.detach().clone() for name, parameter in model.named_parameters()
            if name.startswith("head_selection.")}


def main() -> None:
    out_dir, args = Path(sys.argv[1]), sys.argv[2:]
    initial = {}
    build_model = recipe.build_model

    def recording_build_model(*build_args, **build_kwargs):
        model = build_model(*build_args, **build_kwargs)
        initial.update(selector_logits(model))
        return model

    recipe.build_model = recording_build_model
    result = run_mt.main(args)
    model = result.trainer.accelerator.unwrap_model(result.trainer.model)
    torch.save({"initial": initial, "final": selector_logits(model), "world_size": result.trainer.args.world_size,
                "log_history": result.trainer.state.log_history}, out_dir / f"rank{os.environ['RANK']}.pt")


if __name__ == "__main__":
    main()
