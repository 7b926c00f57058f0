# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Run the MT recipe's command line (`headsel-train mt`) unchanged under torchrun, and save this rank's selector logits
before and after training (for the DDP test).

    torchrun --nproc_per_node 2 tests/training/ddp_worker.py OUT_DIR <headsel-train mt flags...>
"""

import os
import sys
from pathlib import Path

import torch

from headsel_recipes import recipe
from headsel_recipes.cli.train import main as train


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
    result = train(["mt", *args])
    model = result.trainer.accelerator.unwrap_model(result.trainer.model)
    torch.save({"initial": initial, "final": selector_logits(model), "world_size": result.trainer.args.world_size,
                "log_history": result.trainer.state.log_history,
                "vocab": result.trainer.processing_class.get_vocab()}, out_dir / f"rank{os.environ['RANK']}.pt")


if __name__ == "__main__":
    main()
