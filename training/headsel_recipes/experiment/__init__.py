# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Experiments: systems x seeds trained and scored by one recipe, summarised in the paper's tables.

* [`spec`]: the experiment file (YAML) — systems, budget, seeds, groups, tables — read and checked;
* [`runner`]: the runs, their flags, training ([`train_all`], [`run_experiment`]); [`lanes`]: the claims by which
  several lanes share the runs;
* [`scores`]: the finished runs' scores; [`tables`]: the layouts, the plots, `results.json` / `results.md`.

The command line: `headsel-experiment` ([`headsel_recipes.cli.experiment`]).
"""

from .lanes import CLAIM_FILE, Lane
from .runner import Run, plan_runs, run_experiment, run_flags, train_all
from .scores import SeedScores, SystemScores, collect_scores, supports_zero_shot
from .spec import Experiment, System, TableSpec, load_experiment, parse_experiment, run_dir
from .tables import Cell, Table, build_table, report

__all__ = [
    "CLAIM_FILE", "Cell", "Experiment", "Lane", "Run", "SeedScores", "System", "SystemScores", "Table", "TableSpec",
    "build_table", "collect_scores", "load_experiment", "parse_experiment", "plan_runs", "report", "run_dir",
    "run_experiment", "run_flags", "supports_zero_shot", "train_all",
]
