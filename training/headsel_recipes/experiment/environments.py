# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Did an experiment's runs train in one environment? Read from each run's `environment.jsonl`.

A seeded run repeats bit for bit only on one machine with one version of the libraries and of this code; elsewhere
its training drifts after a few hundred updates, by up to the seed spread ([`headsel_recipes.environment`]). The
report names the environments when an experiment's runs trained in more than one, so a table that pairs them is
read with that in mind.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path

from ..environment import ENVIRONMENT_LOG_NAME, ROUNDING_KEYS
from .spec import Experiment, run_dir

logger = logging.getLogger("headsel_recipes.experiment")

#: What names an environment that has no other to be told apart from.
SUMMARY_KEYS = ("hf_headsel_commit", "torch", "transformers", "cpu_capability")
#: How a run without records is listed.
UNRECORDED = "no record (trained before runs said where they ran)"


def training_environments(folder: Path) -> list[dict]:
    """The rounding-relevant part ([`ROUNDING_KEYS`]) of each training invocation's record in `folder`, without
    repeats, oldest first (a run resumed elsewhere has several); empty when the folder has no records."""
    path = folder / ENVIRONMENT_LOG_NAME
    if not path.is_file():
        return []
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line) if line.strip() else {}
        except json.JSONDecodeError:  # a line cut short (a full disk, a killed run): the others still say
            logger.warning("%s line %d is not JSON; skipped", path, number)
            continue
        if isinstance(record, dict) and record.get("do_train"):
            environment = {key: record.get(key) for key in ROUNDING_KEYS}
            if environment not in found:
                found.append(environment)
    return found


def describe_difference(environment: dict, others: list[dict]) -> str:
    """`environment`'s values of the keys (and packages) that vary among it and `others`, so every environment of a
    report is named by the same keys; with no others, its [`SUMMARY_KEYS`]."""
    flat = [flatten(entry) for entry in [environment, *others]]
    keys = [key for key in flat[0] if len({json.dumps(entry.get(key)) for entry in flat}) > 1] if others else [
        key for key in SUMMARY_KEYS if key in flat[0]]
    return ", ".join(f"{key} {flat[0][key]}" for key in keys)


def flatten(environment: dict) -> dict:
    """`environment` with its packages as keys of their own (`torch`, `transformers`, ...)."""
    packages = environment.get("packages") or {}
    return {**{key: value for key, value in environment.items() if key != "packages"}, **packages}


def environments_section(experiment: Experiment) -> list[str]:
    """[`environments_note`] of the experiment's trained runs, named by system, seed and part."""
    return environments_note([
        (f"{system.name} (seed {seed}{f', {part}' if part else ''})", folder)
        for system in experiment.systems for seed in experiment.seeds for part in list(system.parts) or [None]
        if ((folder := run_dir(experiment, system, seed, part)) / "config.json").is_file()  # trained (so far)
    ])


def environments_note(named_runs: list[tuple[str, Path]]) -> list[str]:
    """A report's note when the runs (`(name, run folder)`) trained in more than one environment, or some say where
    and some do not (logged too), as markdown lines; none when they agree or none says. Read by the experiment
    runner's report, `benchmarks/quality_tables.py` and `benchmarks/quality_plot.py`."""
    runs: dict[str, list[str]] = defaultdict(list)
    environments: dict[str, list[dict]] = {}
    for name, folder in named_runs:
        found = training_environments(folder)
        key = json.dumps(found, sort_keys=True) if found else UNRECORDED
        environments[key] = found
        runs[key].append(name)
    if len(runs) < 2:
        return []
    lines = []
    for key, names in runs.items():
        label = UNRECORDED
        if key != UNRECORDED:  # told apart by its last training's environment
            others = [found[-1] for other, found in environments.items() if other not in (key, UNRECORDED)]
            label = describe_difference(environments[key][-1], others) or "the same as another's"
            if len(environments[key]) > 1:
                label += f" (resumed in {len(environments[key])} environments)"
        lines.append(f"- {label}: {', '.join(names)}")
    logger.warning("the runs trained in %d environments; rounding differs between them: %s", len(runs),
                   "; ".join(lines))
    return ["", f"**Runs trained in {len(runs)} environments** (code, library versions or CPU: `environment.jsonl`; "
                "a seeded run repeats bit for bit only in one, and rounding differences grow over training, up to "
                "the seed spread, so pairs across them differ by that much more):", "", *lines]
