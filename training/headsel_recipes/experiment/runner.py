# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Training an experiment: its runs (system x seed x part), their recipe flags, and the lanes that share them
([`headsel_recipes.experiment.lanes`]).

[`train_all`] trains every run without results, in-process, one after the other; [`run_experiment`] trains, then
reports ([`headsel_recipes.experiment.tables.report`]). The file format: [`headsel_recipes.experiment.spec`].
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from ..arguments import RecipeTask, parse_arguments
from ..recipe import check_flags
from ..results_keys import RUN_CONFIG_FILE, results_path
from .lanes import CLAIM_FILE, Lane
from .spec import Experiment, System, run_dir, training_order
from .tables import report

__all__ = ["CLAIM_FILE", "Lane", "Run", "check_unchanged", "plan_runs", "run_experiment", "run_flags", "train_all"]

logger = logging.getLogger("headsel_recipes.experiment")


@dataclass(frozen=True)
class Run:
    """One training/evaluation run: a system, a seed and a part (`None`: the system is trained whole)."""

    system: System
    seed: int
    part: str | None
    output_dir: Path


def plan_runs(experiment: Experiment, systems: Sequence[str] | None = None) -> list[Run]:
    """Every run of the experiment, sources of `init_from` first, seed by seed; with `systems`, only the runs of
    those systems and of the systems they start from (`init_from`, followed to the end)."""
    chosen = {system.name for system in experiment.systems} if systems is None else with_sources(experiment, systems)
    return [
        Run(system, seed, part, run_dir(experiment, system, seed, part))
        for system in training_order(experiment.systems) if system.name in chosen
        for seed in experiment.seeds
        for part in (list(system.parts) or [None])
    ]


def with_sources(experiment: Experiment, systems: Sequence[str]) -> set[str]:
    """The named systems and every system they start from; an unknown name is a `ValueError` listing the systems."""
    chosen: set[str] = set()
    for name in systems:
        system = experiment.system(name)
        while system is not None and system.name not in chosen:
            chosen.add(system.name)
            system = experiment.system(system.init_from) if system.init_from is not None else None
    return chosen


def run_flags(experiment: Experiment, run: Run) -> dict:
    """The recipe flags of a run: the experiment's flags, the budget, the system's, the part's, then the run's own
    output folder and seeds (and the source model of `init_from`)."""
    values = {
        "resume_from_checkpoint": "last",  # an interrupted run resumes from its last checkpoint
        "do_train": True,
        "do_eval": experiment.split == "eval",
        "do_predict": experiment.split == "predict",
        **experiment.flags, **experiment.budget, **run.system.flags,
        **(run.system.parts.get(run.part, {}) if run.part is not None else {}),
        "output_dir": str(run.output_dir), "seed": run.seed, "data_seed": run.seed,
    }
    if run.system.init_from is not None:
        source = experiment.system(run.system.init_from)
        values["model_name_or_path"] = str(run_dir(experiment, source, run.seed, run.part))
    return values


def results_file(experiment: Experiment, run: Run) -> Path:
    """The results file whose presence marks the run finished."""
    return results_path(run.output_dir, experiment.split)


RecipeRunner = Callable[[RecipeTask, list[str]], object]

# The keys of a run's flags that say where it lies and how it restarts, not what it trains: a moved experiment folder
# (`--output_dir`) or another resume setting leaves its trained runs valid.
PLACE_KEYS = ("output_dir", "resume_from_checkpoint")


class Unset:
    """A flag a run's stored flags, or the experiment's flags for it, leave out."""

    def __repr__(self) -> str:
        return "unset"


UNSET = Unset()


def trained_any(experiment: Experiment, run: Run) -> bool:
    """Whether the run trained: its results file or a checkpoint exists (its `run_config.json` alone is a plan: a dry
    run, or a lane that stopped before training, wrote it)."""
    return results_file(experiment, run).exists() or any(run.output_dir.glob("checkpoint-*"))


def changed_flags(experiment: Experiment, run: Run) -> dict[str, tuple]:
    """The flags the run's stored `run_config.json` holds that the experiment now gives it otherwise: flag -> (then,
    now); `{}` without a stored file. Paths inside the experiment folder are compared as moved with it."""
    path = run.output_dir / RUN_CONFIG_FILE
    if not path.exists():
        return {}
    then = moved_into(json.loads(path.read_text()), experiment, run)
    now = json.loads(json.dumps(run_flags(experiment, run)))  # as stored: tuples as lists
    keys = sorted((set(then) | set(now)) - set(PLACE_KEYS))
    return {key: (then.get(key, UNSET), now.get(key, UNSET)) for key in keys
            if then.get(key, UNSET) != now.get(key, UNSET)}


def moved_into(stored: dict, experiment: Experiment, run: Run) -> dict:
    """A run's stored flags with its `init_from` source path moved from the experiment folder they were written in
    (read off their `output_dir`) to the experiment's folder now."""
    depth = len(run.output_dir.relative_to(experiment.output_dir).parts)
    written_in = Path(str(stored.get("output_dir", "")))
    source = stored.get("model_name_or_path")
    if len(written_in.parts) <= depth or not isinstance(source, str):
        return stored
    try:
        inside = Path(source).relative_to(written_in.parents[depth - 1])
    except ValueError:  # a model outside the experiment folder (a hub name, a stock checkpoint)
        return stored
    return {**stored, "model_name_or_path": str(experiment.output_dir / inside)}


def check_unchanged(experiment: Experiment, runs: Sequence[Run]) -> None:
    """Before anything trains: a run that trained (finished, or with a checkpoint to resume from) with other flags
    than the experiment now gives it is an error naming the changed flags. Skipping or resuming it would put runs of
    two settings in one table."""
    changed = {run.output_dir: diff for run in runs if trained_any(experiment, run)
               and (diff := changed_flags(experiment, run))}
    if not changed:
        return
    lines = [f"{folder}: " + ", ".join(f"{key} {then!r} -> {now!r}" for key, (then, now) in diff.items())
             for folder, diff in changed.items()]
    raise ValueError(
        f"experiment {experiment.name}: {len(changed)} run(s) trained with other flags than the experiment file now "
        "gives them (their run_config.json), so skipping or resuming them would mix two settings in one table:\n  "
        + "\n  ".join(lines[:10]) + (f"\n  ... and {len(lines) - 10} more" if len(lines) > 10 else "")
        + "\nTrain the changed experiment into its own folder (`output_dir:` in the file, or --output_dir), or "
        "delete those run folders to train them again with the new flags.")


def next_run(experiment: Experiment, runs: list[Run], lane: Lane, tried: list[Run], poll_seconds: float) -> Run | None:
    """The next run `lane` claims: unfinished, not tried by this lane, its `init_from` source finished. Waits while
    the only runs left are held by other lanes (or wait on a source they hold), logging them when they change; `None`
    when nothing is left (the runs left waiting on a source that never finished are logged)."""
    logged: list[Path] = []
    while True:
        left = [run for run in runs if not results_file(experiment, run).exists() and run not in tried]
        for run in left:
            if source_finished(experiment, run) and lane.claim(run):
                if results_file(experiment, run).exists():  # another lane finished it after `left` was listed
                    lane.release(run)
                    continue
                return run
        held = {run.output_dir: claim for run in left if (claim := lane.holder(run)) is not None}
        if not held:
            log_unstarted(experiment, left)
            return None
        if list(held) != logged:  # the held runs changed: say which, and who holds them
            logger.info("experiment %s: waiting for %d run(s) other lanes hold (a claim is taken over once stale, see "
                        "headsel_recipes.experiment.lanes): %s", experiment.name, len(held),
                        "; ".join(f"{folder} ({claim.describe()})" for folder, claim in held.items()))
            logged = list(held)
        time.sleep(poll_seconds)


def log_unstarted(experiment: Experiment, left: list[Run]) -> None:
    """Warn of the runs this lane leaves unstarted because their `init_from` source never finished."""
    waiting = [run for run in left if not source_finished(experiment, run)]
    if waiting:
        logger.warning("experiment %s: %d run(s) not started, their init_from source never finished (it failed, or "
                       "was not trained): %s", experiment.name, len(waiting),
                       "; ".join(f"{run.output_dir} (from {run.system.init_from})" for run in waiting))


def source_finished(experiment: Experiment, run: Run) -> bool:
    if run.system.init_from is None:
        return True
    source = experiment.system(run.system.init_from)
    return results_path(run_dir(experiment, source, run.seed, run.part), experiment.split).exists()


def train_all(experiment: Experiment, task: RecipeTask, runner: RecipeRunner, dry_run: bool = False,
              poll_seconds: float = 30.0, systems: Sequence[str] | None = None) -> list[Run]:
    """Run every run whose results file does not exist yet, in-process, one after the other. Each run's flags are
    written to `run_config.json` in its folder and the recipe reads that file, so
    `headsel-train <recipe> <run folder>/run_config.json` repeats a run exactly. Every run's file is parsed and its
    flags checked ([`check_flags`]) before the first run trains; a dry run stops there and lists the commands.
    Returns the runs this call trained.

    A run that already trained with other flags than the experiment now gives it is an error before anything trains
    ([`check_unchanged`]).

    Lanes: the same experiment started N times (on one machine, or on machines sharing the folder) trains in N lanes.
    A lane claims a run before training it (`lane.claim` in the run folder, created exclusively), skips runs other
    live lanes hold, and waits (`poll_seconds`) for a run whose `init_from` source another lane is still training.
    A stale claim (its lane stopped: [`headsel_recipes.experiment.lanes`]) is taken over. With `systems`, only those
    systems' runs (and their `init_from` sources') are trained."""
    runs = plan_runs(experiment, systems)
    check_unchanged(experiment, runs)
    todo = [run for run in runs if not results_file(experiment, run).exists()]
    logger.info("experiment %s: %d runs, %d done, %d to train", experiment.name, len(runs), len(runs) - len(todo),
                len(todo))
    configs = [(run, run_config_path(experiment, run)) for run in todo]
    for _, config in configs:  # unknown or ill-typed flags, and flags that break a rule, fail before any training
        check_flags(task, *parse_arguments([str(config)]))
    if dry_run:
        for run, config in configs:
            print(f"headsel-train {task.name} {config}  # {run.system.name}, seed {run.seed}"
                  + (f", part {run.part}" if run.part else ""))
        return todo
    lane, trained = Lane(), []
    with tqdm(total=len(todo), desc=f"{experiment.name}: runs", unit="run", disable=not todo) as progress:
        while (run := next_run(experiment, runs, lane, trained, poll_seconds)) is not None:
            trained.append(run)
            with lane.holding(run):
                if runner(task, [str(run_config_path(experiment, run))]) is not None:
                    gc.collect()  # the finished run's trainer and model: free them before the next run
            if not results_file(experiment, run).exists():
                logger.warning("run %s ended without %s; not retried by this lane", run.output_dir,
                               results_file(experiment, run).name)
            progress.n = sum(results_file(experiment, r).exists() for r in todo)
            progress.refresh()
    return trained


def run_config_path(experiment: Experiment, run: Run) -> Path:
    """Write the run's flags to `run_config.json` in its folder; return the path.

    Every lane writes it, at once when they start together: written beside and renamed over (atomically), so a lane
    reading it never reads another's half-written file."""
    run.output_dir.mkdir(parents=True, exist_ok=True)
    path = run.output_dir / RUN_CONFIG_FILE
    draft = run.output_dir / f"{RUN_CONFIG_FILE}.{uuid.uuid4().hex}"
    draft.write_text(json.dumps(run_flags(experiment, run), indent=2, sort_keys=True) + "\n")
    os.replace(draft, path)
    return path


def run_experiment(experiment: Experiment, tasks: dict[str, RecipeTask], runner: RecipeRunner,
                   tables_only: bool = False, dry_run: bool = False,
                   systems: Sequence[str] | None = None) -> dict | None:
    """Train what is missing (unless `tables_only`; with `systems`, only those systems and their `init_from`
    sources), then report every system, runs not trained as missing (`None` while other lanes still train). A run
    trained with other flags than the experiment now gives it is an error first ([`check_unchanged`]). `tasks` maps recipe names to their [`RecipeTask`]; `runner` is `headsel_recipes.recipe.run` (or a stand-in in
    tests)."""
    if experiment.recipe not in tasks:
        raise ValueError(f"unknown recipe {experiment.recipe!r}; the recipes are {sorted(tasks)}")
    task = tasks[experiment.recipe]
    check_unchanged(experiment, plan_runs(experiment))  # every run the tables read, also those `systems` leaves out
    if not tables_only:
        train_all(experiment, task, runner, dry_run, systems=systems)
    if dry_run:
        return None
    if not tables_only and any(Lane().held_by_another(run) for run in plan_runs(experiment)):
        logger.info("experiment %s: other lanes are still training; the last one to finish writes the tables",
                    experiment.name)
        return None
    return report(experiment, task)
