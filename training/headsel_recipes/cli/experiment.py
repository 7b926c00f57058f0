# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`headsel-experiment`: train and score a table of systems x seeds with one recipe and print the paper's tables.

    headsel-experiment training/experiments/offline/table2_asr.yaml
    headsel-experiment EXPERIMENT.yaml --tables_only      # re-read finished runs, print the tables
    headsel-experiment EXPERIMENT.yaml --dry_run          # list the runs to do, train nothing
    headsel-experiment EXPERIMENT.yaml --systems Shared "Adapters"   # train only these (and their init_from)
    headsel-experiment EXPERIMENT.yaml --resolved         # print the file with what it `extends` merged in
    headsel-experiment EXPERIMENT.yaml --lanes 6          # six runs at a time (logs: OUTPUT_DIR/lane<i>.log)

Every system gets the experiment's data, budget and seeds; finished runs are skipped, so an interrupted experiment
resumes. `python training/run_experiment.py ...` runs the same. The file format and the layouts:
[`headsel_recipes.experiment`] and training/README.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ..experiment import Experiment, parse_experiment, run_experiment
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
    parser.add_argument("--lanes", type=int, default=1, metavar="N",
                        help="train N runs at a time: this process and N - 1 more of this command, each logging to "
                             "OUTPUT_DIR/lane<i>.log (the lanes of `train_all`: worth it where a run leaves the "
                             "machine idle, e.g. host-bound steps on a GPU); default 1")
    options = parser.parse_args(args)
    if options.lanes < 1:
        parser.error(f"--lanes must be at least 1, got {options.lanes}")
    if options.lanes > 1 and (options.tables_only or options.dry_run or options.resolved):
        parser.error("--lanes trains; it cannot be combined with --tables_only, --dry_run or --resolved")
    return options


def lane_args(options: argparse.Namespace) -> list[str]:
    """The command line of one more lane: this command's experiment, output folder and systems, without `--lanes`."""
    args = [options.experiment]
    if options.output_dir is not None:
        args += ["--output_dir", options.output_dir]
    if options.systems:
        args += ["--systems", *options.systems]
    return args


def start_lanes(count: int, args: list[str], output_dir: Path) -> list[tuple[subprocess.Popen, Path]]:
    """Start `count` more lanes, `headsel-experiment ARGS` in new processes (lanes 2, 3, ...), each writing its
    output to `output_dir/lane<i>.log`. Returns the processes with their logs."""
    output_dir.mkdir(parents=True, exist_ok=True)
    # The lanes import this very `headsel_recipes`, also when it runs from a checkout that is not installed
    # (`python training/run_experiment.py`, whose folder is on this process's path but not on theirs).
    package_parent = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    lanes = []
    for number in range(2, count + 2):
        log = output_dir / f"lane{number}.log"
        with open(log, "w", encoding="utf-8") as handle:
            command = [sys.executable, "-m", f"{__package__}.experiment", *args]
            lanes.append((subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env), log))
    return lanes


def train_in_lanes(experiment: Experiment, options: argparse.Namespace) -> dict:
    """Train in `options.lanes` lanes: this process is lane 1, the others run [`lane_args`]; once every lane has
    ended, the tables of all runs. A lane that fails is an error naming its log; stopping this process stops them."""
    lanes = start_lanes(options.lanes - 1, lane_args(options), experiment.output_dir)
    try:
        run_experiment(experiment, TASKS, run, systems=options.systems)
    except BaseException:
        for lane, _ in lanes:
            lane.terminate()
        raise
    finally:
        statuses = [(lane.wait(), log) for lane, log in lanes]
    failed = [f"{log} (exit status {status})" for status, log in statuses if status != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of {options.lanes} lanes failed; their logs: {', '.join(failed)}")
    return run_experiment(experiment, TASKS, run, tables_only=True)


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
    if options.lanes > 1:
        return train_in_lanes(experiment, options)
    return run_experiment(experiment, TASKS, run, tables_only=options.tables_only, dry_run=options.dry_run,
                          systems=options.systems)


console = console_script(main)

if __name__ == "__main__":
    main()
