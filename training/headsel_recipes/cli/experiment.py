# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`headsel-experiment`: train and score a table of systems x seeds with one recipe and print the paper's tables.

    headsel-experiment training/experiments/offline/table2_asr.yaml
    headsel-experiment EXPERIMENT.yaml --tables_only      # re-read finished runs, print the tables
    headsel-experiment EXPERIMENT.yaml --dry_run          # list the runs to do, train nothing
    headsel-experiment EXPERIMENT.yaml --systems Shared "Adapters"   # train only these (and their init_from)
    headsel-experiment EXPERIMENT.yaml --resolved         # print the file with what it `extends` merged in

Every system gets the experiment's data, budget and seeds; finished runs are skipped, so an interrupted experiment
resumes. `python training/run_experiment.py ...` runs the same. The file format and the layouts:
[`headsel_recipes.experiment`] and training/README.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from ..experiment import parse_experiment, run_experiment
from ..experiment.spec import read_experiment_file
from ..recipe import run
from ..tasks import TASKS
from . import console_script


def parse_args(args: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="headsel-experiment", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the experiment YAML file")
    parser.add_argument("--output_dir", help="the experiment folder (default: the file's output_dir)")
    parser.add_argument("--tables_only", action="store_true", help="train nothing; build the tables from the runs")
    parser.add_argument("--dry_run", action="store_true", help="write each run's config and list the runs to do")
    parser.add_argument("--resolved", action="store_true",
                        help="print the experiment as YAML, the files it `extends` merged in, and stop")
    parser.add_argument("--systems", nargs="+", metavar="NAME",
                        help="train only these systems (and the systems they start from, `init_from`); the tables "
                             "still list every system, the ones without runs as missing")
    return parser.parse_args(args)


def main(args: list[str] | None = None) -> dict | None:
    """Run the experiment described by the command line `args` (default `sys.argv[1:]`); returns `results.json`'s
    content (`None` for a dry run, or while other lanes still train)."""
    options = parse_args(args)
    values = read_experiment_file(Path(options.experiment))  # the files it `extends` merged in
    experiment = parse_experiment(values, options.output_dir)  # checked, also for --resolved
    if options.resolved:
        if options.output_dir is not None:
            values["output_dir"] = options.output_dir
        print(yaml.safe_dump(values, sort_keys=False, allow_unicode=True, width=120), end="")
        return None
    return run_experiment(experiment, TASKS, run, tables_only=options.tables_only, dry_run=options.dry_run,
                          systems=options.systems)


console = console_script(main)

if __name__ == "__main__":
    main()
