# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`headsel-demo` (and `make demo`, `python training/demo.py`): the command line of [`headsel_recipes.demo`].

    headsel-demo --output_dir outputs/demo
    headsel-demo --make_checkpoint        # retrain the shipped checkpoint (about 2 h 15 min on 2 cores)
    headsel-demo --ship_checkpoint outputs/o2m_shared/checkpoint-8000
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

# OpenMP threads that spin while they wait make every step 10-50x slower when another process holds a core (measured
# on the 2-core machine); waiting threads that sleep cost nothing on a quiet machine. Read when torch loads, so set
# before the demo module imports it (`headsel_recipes` itself imports nothing heavy).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .. import demo  # noqa: E402
from . import console_script  # noqa: E402


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, demo.DemoSettings]:
    defaults = demo.DemoSettings()
    parser = argparse.ArgumentParser(prog="headsel-demo", description=demo.__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=defaults.output_dir)
    parser.add_argument("--corpus_dir", type=Path, default=defaults.corpus_dir)
    parser.add_argument("--checkpoint", type=Path, default=defaults.checkpoint,
                        help="the trained shared Marian model both systems start from")
    parser.add_argument("--max_steps", type=int, default=defaults.max_steps,
                        help="fine-tuning steps of each system")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--bootstrap_resamples", type=int, default=defaults.bootstrap_resamples)
    parser.add_argument("--no_progress", action="store_true", help="no progress bars")
    checkpoint_commands = parser.add_mutually_exclusive_group()
    checkpoint_commands.add_argument(
        "--make_checkpoint", action="store_true",
        help="instead of the demo, retrain the shared checkpoint into --checkpoint with the recipe flags of "
             "training/demo_checkpoint/o2m_shared.json (its data paths relative to the current folder: run it from the "
             "repository)")
    checkpoint_commands.add_argument(
        "--ship_checkpoint", type=Path, default=None,
        help="instead of the demo, ship this trained shared model (a run of the checkpoint recipe, or one of its "
             "checkpoint-* folders) into --checkpoint, with its record and test scores")
    args = parser.parse_args(argv)
    if args.max_steps < 1:
        parser.error(f"--max_steps must be >= 1, got {args.max_steps}")
    if args.bootstrap_resamples < 0:
        parser.error(f"--bootstrap_resamples must be >= 0 (0: no intervals), got {args.bootstrap_resamples}")
    if args.make_checkpoint or args.ship_checkpoint:
        # the checkpoint recipe's flags are fixed in its json (a record of how the shipped model was made)
        ignored = [f"--{name}" for name in ("output_dir", "max_steps", "seed", "corpus_dir", "bootstrap_resamples")
                   if getattr(args, name) != parser.get_default(name)]
        if ignored:
            parser.error(f"{' and '.join(ignored)} set the demo's run; --make_checkpoint / --ship_checkpoint "
                         "use the flags of training/demo_checkpoint/o2m_shared.json (data under "
                         "data/offline_corpus/ of the current folder) and write into --checkpoint")
    return args, demo.DemoSettings(
        output_dir=args.output_dir, corpus_dir=args.corpus_dir, checkpoint=args.checkpoint, max_steps=args.max_steps,
        seed=args.seed, bootstrap_resamples=args.bootstrap_resamples, progress=not args.no_progress)


def main(argv: list[str] | None = None) -> dict:
    """Run the demo (or, with `--make_checkpoint`, retrain its checkpoint) with command-line `argv` (default
    `sys.argv[1:]`)."""
    args, settings = parse_args(argv)
    if args.make_checkpoint:
        demo.ensure_corpus(settings)
        return demo.make_checkpoint(destination=settings.checkpoint)
    if args.ship_checkpoint:
        demo.ensure_corpus(settings)
        flags = json.loads(demo.CHECKPOINT_RECIPE.read_text(encoding="utf-8"))
        return demo.ship_checkpoint(args.ship_checkpoint, flags, settings.checkpoint)
    return demo.run_demo(settings)


console = console_script(main)

if __name__ == "__main__":
    main()
