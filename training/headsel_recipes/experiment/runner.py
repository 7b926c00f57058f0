# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Training an experiment: its runs (system x seed x part), their recipe flags, and the lanes that share them.

[`train_all`] trains every run without results, in-process, one after the other; [`run_experiment`] trains, then
reports ([`headsel_recipes.experiment.tables.report`]). The file format: [`headsel_recipes.experiment.spec`].
"""

from __future__ import annotations

import gc
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from ..arguments import RecipeTask, parse_arguments
from ..recipe import check_flags
from ..results_keys import results_path
from .spec import Experiment, System, run_dir, training_order
from .tables import report

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


CLAIM_FILE = "lane.claim"


@dataclass(frozen=True)
class Lane:
    """One `train_all` call among several training the same experiment; its claims read `host pid lane-id`."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def claim(self, run: Run) -> bool:
        """Create the run's claim file exclusively (taking over a stale one); whether this lane now holds the run."""
        run.output_dir.mkdir(parents=True, exist_ok=True)
        path = run.output_dir / CLAIM_FILE
        if path.exists() and not self.held_by_another(run):
            path.unlink(missing_ok=True)  # left by a lane that stopped
        # Written beside it, then linked into place: the claim appears whole or not at all (`os.link` refuses an
        # existing name), so no lane ever reads a half-written claim.
        draft = run.output_dir / f"{CLAIM_FILE}.{self.id}"
        draft.write_text(f"{socket.gethostname()} {os.getpid()} {self.id}\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            return False
        finally:
            draft.unlink(missing_ok=True)
        return True

    def held_by_another(self, run: Run) -> bool:
        """Whether another live lane holds the run: a claim from another machine counts as live, one from this
        machine while its process runs, one that does not read `host pid lane-id` too."""
        try:
            fields = (run.output_dir / CLAIM_FILE).read_text().split()
        except FileNotFoundError:
            return False
        if len(fields) != 3:
            return True
        host, pid, lane = fields
        if lane == self.id:
            return False
        if host != socket.gethostname():
            return True
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def release(self, run: Run) -> None:
        (run.output_dir / CLAIM_FILE).unlink(missing_ok=True)


def next_run(experiment: Experiment, runs: list[Run], lane: Lane, tried: list[Run], poll_seconds: float) -> Run | None:
    """The next run `lane` claims: unfinished, not tried by this lane, its `init_from` source finished. Waits while
    the only runs left are held by other lanes (or wait on a source they hold); `None` when nothing is left."""
    while True:
        left = [run for run in runs if not results_file(experiment, run).exists() and run not in tried]
        for run in left:
            if source_finished(experiment, run) and lane.claim(run):
                if results_file(experiment, run).exists():  # another lane finished it after `left` was listed
                    lane.release(run)
                    continue
                return run
        if not any(lane.held_by_another(run) for run in left):
            return None
        time.sleep(poll_seconds)


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

    Lanes: the same experiment started N times (on one machine, or on machines sharing the folder) trains in N lanes.
    A lane claims a run before training it (`lane.claim` in the run folder, created exclusively), skips runs other
    live lanes hold, and waits (`poll_seconds`) for a run whose `init_from` source another lane is still training.
    A claim left by a stopped lane on this machine is taken over. With `systems`, only those systems' runs (and
    their `init_from` sources') are trained."""
    runs = plan_runs(experiment, systems)
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
            try:
                if runner(task, [str(run_config_path(experiment, run))]) is not None:
                    gc.collect()  # the finished run's trainer and model: free them before the next run
            finally:
                lane.release(run)
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
    path = run.output_dir / "run_config.json"
    draft = run.output_dir / f"run_config.json.{uuid.uuid4().hex}"
    draft.write_text(json.dumps(run_flags(experiment, run), indent=2, sort_keys=True) + "\n")
    os.replace(draft, path)
    return path


def run_experiment(experiment: Experiment, tasks: dict[str, RecipeTask], runner: RecipeRunner,
                   tables_only: bool = False, dry_run: bool = False,
                   systems: Sequence[str] | None = None) -> dict | None:
    """Train what is missing (unless `tables_only`; with `systems`, only those systems and their `init_from`
    sources), then report every system, runs not trained as missing (`None` while other lanes still train).
    `tasks` maps recipe names to their [`RecipeTask`]; `runner` is `headsel_recipes.recipe.run` (or a stand-in in
    tests)."""
    if experiment.recipe not in tasks:
        raise ValueError(f"unknown recipe {experiment.recipe!r}; the recipes are {sorted(tasks)}")
    task = tasks[experiment.recipe]
    if not tables_only:
        train_all(experiment, task, runner, dry_run, systems=systems)
    if dry_run:
        return None
    if not tables_only and any(Lane().held_by_another(run) for run in plan_runs(experiment)):
        logger.info("experiment %s: other lanes are still training; the last one to finish writes the tables",
                    experiment.name)
        return None
    return report(experiment, task)
