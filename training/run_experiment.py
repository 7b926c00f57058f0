#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Train and score a table of systems x seeds with one recipe and print the paper's tables.

    python training/run_experiment.py training/experiments/offline_table2_asr.yaml
    python training/run_experiment.py EXPERIMENT.yaml --tables_only      # re-read finished runs, print the tables
    python training/run_experiment.py EXPERIMENT.yaml --dry_run          # list the runs to do, train nothing

Every system gets the experiment's data, budget and seeds; finished runs are skipped, so an interrupted experiment
resumes. The file format and the layouts: `headsel_recipes/experiment.py` and training/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from headsel_recipes import run  # noqa: E402
from headsel_recipes.experiment import load_experiment, run_experiment  # noqa: E402
from run_asr import TASK as ASR  # noqa: E402
from run_mt import TASK as MT  # noqa: E402
from run_st import TASK as ST  # noqa: E402

TASKS = {task.name: task for task in (ASR, ST, MT)}


def parse_args(args: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the experiment YAML file")
    parser.add_argument("--output_dir", help="the experiment folder (default: the file's output_dir)")
    parser.add_argument("--tables_only", action="store_true", help="train nothing; build the tables from the runs")
    parser.add_argument("--dry_run", action="store_true", help="write each run's config and list the runs to do")
    return parser.parse_args(args)


def main(args: list[str] | None = None) -> dict | None:
    """Run the experiment described by the command line `args` (default `sys.argv[1:]`); returns `results.json`'s
    content (`None` for a dry run)."""
    options = parse_args(args)
    experiment = load_experiment(options.experiment, options.output_dir)
    return run_experiment(experiment, TASKS, run, tables_only=options.tables_only, dry_run=options.dry_run)


if __name__ == "__main__":
    main()
