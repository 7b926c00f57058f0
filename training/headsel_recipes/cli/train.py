# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`headsel-train asr|st|mt ...`: train and score one recipe (the tasks: [`headsel_recipes.tasks`]).

    headsel-train mt --train_file data/train.jsonl --validation_file data/dev.jsonl --output_dir outputs/mt \
        --do_train --do_eval --config_overrides "d_model=512,encoder_layers=6,decoder_layers=6" ...
    headsel-train asr asr.yaml                     # the same flags as keys of one YAML/JSON file
    torchrun --nproc_per_node 8 -m headsel_recipes.cli.train asr asr.yaml
    headsel-train mt --help                        # every flag of a recipe

`python training/run_<recipe>.py ...` runs the same. All flags: training/README.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..tasks import TASKS
from . import console_script

if TYPE_CHECKING:
    from ..recipe import RecipeResult


def usage() -> str:
    lines = ["usage: headsel-train {" + ",".join(TASKS) + "} [recipe flags | run_config.json | run.yaml]", "",
             __doc__.split("\n\n")[0], "", "recipes:"]
    lines += [f"  {name:<4} {'speech' if task.speech else 'text'} -> {task.target_field}, scored by "
              f"{task.metric.upper()}" for name, task in TASKS.items()]
    lines += ["", "`headsel-train <recipe> --help` lists the recipe's flags."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> RecipeResult:
    """Run the recipe named by `argv[0]` on the rest of `argv` (default `sys.argv[1:]`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        raise SystemExit(0 if argv else 2)
    if argv[0] not in TASKS:
        print(usage(), file=sys.stderr)
        raise SystemExit(f"headsel-train: unknown recipe {argv[0]!r}; the recipes are {list(TASKS)}")
    from ..recipe import run  # here, not above: `headsel-train --help` answers without loading torch

    return run(TASKS[argv[0]], argv[1:])


console = console_script(main)

if __name__ == "__main__":
    main()
