# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment runner: systems x seeds trained and scored by one recipe, summarised in the paper's tables.

An experiment is one YAML file (see `training/experiments/` and `training/README.md`):

```yaml
name: table1_o2m
recipe: mt                       # asr | st | mt
output_dir: outputs/experiments/table1_o2m
seeds: [1, 2, 3]
split: predict                   # the scores the tables read: predict (test set, default) or eval
flags:                           # every run: data, model size, evaluation
  train_file: [data/wmt/train.jsonl]
  test_file: [data/wmt/test.jsonl]
budget:                          # every run: the shared training budget
  max_steps: 140000
  per_device_train_batch_size: 64
  learning_rate: 0.0007
groups:                          # metric groups (the `{metric}_{group}` keys of the results)
  high: [en-cs, en-de]
  low: [en-gu, en-kk]
  zero_shot: []                  # directions absent from training (Table 4)
systems:
  - name: Transformer
    flags: {shared_baseline: true, target_lang_token: true}
  - name: Adapter
    init_from: Transformer       # starts from that system's trained model (same seed)
    flags: {task_adapter_dim: 256, train_only_adapters: true, max_steps: 40000}
  - name: Group strategy
    labels: {strategy: group}    # coordinates for the pivot layouts (Table 6, Figure 2)
    flags: {head_selection_strategy: group}
tables:
  - layout: avg_high_low
```

Every run gets the same flags but its system's, the same budget and, per seed, the same `seed` / `data_seed`: the
systems see identical data in identical order. A run is `output_dir/runs/<system>/seed<seed>[/<part>]`; it is skipped
when its results file already exists, so an interrupted experiment resumes where it stopped. A system with `parts`
(e.g. the paper's "separate" models, one per domain) trains one run per part, each with the part's own flags; their
group scores are merged. The runner writes `results.json` (every score, every seed, the tables) and `results.md`
(the tables, plus the bootstrap intervals of each run) and prints the tables.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from tqdm.auto import tqdm

from .arguments import RecipeTask, parse_arguments
from .results_keys import group_scores, read_results, read_score, results_path, score_key

logger = logging.getLogger("headsel_recipes.experiment")

LAYOUTS = ("avg_high_low", "per_task", "per_domain", "train_zero_shot", "components", "sweep", "pivot")
LAYOUT_TITLES = {
    "avg_high_low": "AVG-A / High / Low (Table 1)",
    "per_task": "Per task (Table 2)",
    "per_domain": "Per domain, separate vs joint (Tables 3 and 5)",
    "train_zero_shot": "Training vs zero-shot directions (Table 4)",
    "components": "Head selection in the encoder, the decoder or both (Table 6)",
    "sweep": "The H' sweep (Figure 2)",
    "pivot": "Pivot",
}
# Pivot layouts that need no `rows` / `columns`: the system labels they read.
PIVOT_DEFAULTS = {"components": ("strategy", "components"), "sweep": ("strategy", "H'")}
VALUES = ("avg", "avg_t", "avg_z", "high", "low")
UNSUPPORTED = "unsupported"
MISSING = "missing"
RUN_KEYS = ("output_dir", "seed", "data_seed", "model_name_or_path")
EXPERIMENT_KEYS = {"name", "recipe", "output_dir", "seeds", "split", "flags", "budget", "groups", "systems", "tables",
                   "metric"}
SYSTEM_KEYS = {"name", "flags", "labels", "init_from", "parts", "zero_shot", "sweep"}


# --------------------------------------------------------------------------------------------------------------------
# The experiment description
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class System:
    """One row of a table: a set of recipe flags, trained once per seed (and per part).

    Attributes:
        name: the row label.
        flags: recipe flags of this system (on top of the experiment's flags and budget).
        labels: coordinates in the pivot layouts, e.g. `{"strategy": "group", "components": "encoder"}`.
        init_from: the system whose trained model (same seed, same part) this one starts from.
        parts: separately trained runs (part name -> extra flags), e.g. one model per domain.
        zero_shot: whether the system can translate directions it was not trained on; `None`: decided from the
            trained model's config ([`supports_zero_shot`]).
    """

    name: str
    flags: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    init_from: str | None = None
    parts: dict[str, dict] = field(default_factory=dict)
    zero_shot: bool | None = None

    @property
    def slug(self) -> str:
        """The system's folder name."""
        return slugify(self.name)


@dataclass
class TableSpec:
    """One table to print: a layout, its title, and for pivots the labels that make rows and columns."""

    layout: str
    title: str
    rows: str | None = None
    columns: str | None = None
    value: str = "avg"
    plot: bool = False


@dataclass
class Experiment:
    """A parsed experiment file (see the module docstring)."""

    name: str
    recipe: str
    output_dir: Path
    seeds: list[int]
    systems: list[System]
    tables: list[TableSpec]
    flags: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    split: str = "predict"
    metric: str | None = None

    def system(self, name: str) -> System:
        for system in self.systems:
            if system.name == name:
                return system
        raise ValueError(f"unknown system {name!r}; the systems are {[s.name for s in self.systems]}")


def slugify(name: str) -> str:
    """A folder name for a system name: `"Group strategy (H'=8)"` -> `"group_strategy_h_8"`."""
    slug = re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")
    if not slug:
        raise ValueError(f"system name {name!r} has no letter or digit to name its folder")
    return slug


def load_experiment(path: str | Path, output_dir: str | Path | None = None) -> Experiment:
    """Read and check an experiment YAML file. `output_dir` overrides the file's (relative paths in the file are
    taken as they are, from the working directory)."""
    values = yaml.safe_load(Path(path).read_text())
    if not isinstance(values, dict):
        raise ValueError(f"{path}: an experiment file is a YAML mapping")
    return parse_experiment(values, output_dir)


def parse_experiment(values: dict, output_dir: str | Path | None = None) -> Experiment:
    """An [`Experiment`] from the mapping of an experiment file; a `ValueError` names the rule a file breaks."""
    unknown = set(values) - EXPERIMENT_KEYS
    if unknown:
        raise ValueError(f"unknown experiment keys {sorted(unknown)}; the keys are {sorted(EXPERIMENT_KEYS)}")
    for key in ("recipe", "systems"):
        if key not in values:
            raise ValueError(f"an experiment needs `{key}`")
    output_dir = output_dir or values.get("output_dir")
    if output_dir is None:
        raise ValueError("an experiment needs `output_dir` (or --output_dir)")
    seeds = values.get("seeds", [42])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds) or len(set(seeds)) != len(
            seeds):
        raise ValueError(f"`seeds` must be a non-empty list of distinct integers, got {seeds!r}")
    split = values.get("split", "predict")
    if split not in ("predict", "eval"):
        raise ValueError(f"`split` must be 'predict' (the test set) or 'eval' (the validation set), got {split!r}")
    flags, budget = dict(values.get("flags") or {}), dict(values.get("budget") or {})
    for source, given in (("flags", flags), ("budget", budget)):
        reserved = sorted(set(given) & set(RUN_KEYS[:3]))
        if reserved:
            raise ValueError(f"`{source}` sets {reserved}: the runner sets output_dir, seed and data_seed per run")
    systems = [system for item in values["systems"] for system in parse_systems(item)]
    check_systems(systems)
    groups = {key: list(value) for key, value in (values.get("groups") or {}).items()}
    tables = [parse_table(item) for item in values.get("tables") or [{"layout": "per_task"}]]
    experiment = Experiment(
        name=str(values.get("name", Path(output_dir).name)), recipe=values["recipe"], output_dir=Path(output_dir),
        seeds=seeds, systems=systems, tables=tables, flags=flags, budget=budget, groups=groups, split=split,
        metric=values.get("metric"),
    )
    for table in tables:
        check_table(table, experiment)
    return experiment


def parse_systems(item: dict) -> list[System]:
    """One system of the file, or several for a `sweep`: `{label: "H'", values: [4, 8], flags: [flag, ...]}` sets
    every listed flag to each value and names the systems `"<name> (H'=4)"`, ..."""
    if not isinstance(item, dict) or "name" not in item:
        raise ValueError(f"every system needs a `name`, got {item!r}")
    unknown = set(item) - SYSTEM_KEYS
    if unknown:
        raise ValueError(f"system {item['name']!r}: unknown keys {sorted(unknown)}; the keys are {sorted(SYSTEM_KEYS)}")
    base = System(name=str(item["name"]), flags=dict(item.get("flags") or {}), labels=dict(item.get("labels") or {}),
                  init_from=item.get("init_from"), parts={str(k): dict(v or {}) for k, v in
                                                          (item.get("parts") or {}).items()},
                  zero_shot=item.get("zero_shot"))
    reserved = sorted(set(base.flags) & set(RUN_KEYS))
    if reserved:
        raise ValueError(f"system {base.name!r} sets {reserved}: the runner sets these per run (use `init_from` to "
                         "start from another system)")
    sweep = item.get("sweep")
    if sweep is None:
        return [base]
    if not isinstance(sweep, dict) or not {"label", "values", "flags"} <= set(sweep):
        raise ValueError(f"system {base.name!r}: a sweep is {{label: ..., values: [...], flags: [...]}}")
    return [
        System(name=f"{base.name} ({sweep['label']}={value})",
               flags={**base.flags, **{flag: value for flag in sweep["flags"]}},
               labels={**base.labels, sweep["label"]: value}, init_from=base.init_from, parts=base.parts,
               zero_shot=base.zero_shot)
        for value in sweep["values"]
    ]


def check_systems(systems: list[System]) -> None:
    """Names unique (also as folders), `init_from` names an earlier-trainable system, no cycles."""
    slugs: dict[str, str] = {}
    for system in systems:
        if system.slug in slugs:
            raise ValueError(f"systems {slugs[system.slug]!r} and {system.name!r} would share the folder "
                             f"{system.slug!r}: give them distinct names")
        slugs[system.slug] = system.name
    names = {system.name: system for system in systems}
    for system in systems:
        if system.init_from is None:
            continue
        source = names.get(system.init_from)
        if source is None:
            raise ValueError(f"system {system.name!r}: init_from {system.init_from!r} is not a system; the systems "
                             f"are {list(names)}")
        if source.parts and set(source.parts) != set(system.parts):
            raise ValueError(f"system {system.name!r} starts from {source.name!r}, trained in parts "
                             f"{sorted(source.parts)}: give it the same parts")
    training_order(systems)


def training_order(systems: list[System]) -> list[System]:
    """The systems with every `init_from` source before the systems that start from it."""
    done: list[System] = []
    pending = list(systems)
    while pending:
        ready = [s for s in pending if s.init_from is None or s.init_from in {d.name for d in done}]
        if not ready:
            raise ValueError(f"init_from makes a cycle among {[s.name for s in pending]}")
        done += ready
        pending = [s for s in pending if s not in ready]
    return done


def parse_table(item: dict | str) -> TableSpec:
    item = {"layout": item} if isinstance(item, str) else dict(item)
    layout = item.get("layout")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown table layout {layout!r}; the layouts are {list(LAYOUTS)}")
    rows, columns = PIVOT_DEFAULTS.get(layout, (None, None))
    value = item.get("value", "avg")
    if value not in VALUES and not str(value).startswith("task:"):
        raise ValueError(f"table value must be one of {list(VALUES)} or 'task:<group>', got {value!r}")
    return TableSpec(layout=layout, title=item.get("title", LAYOUT_TITLES[layout]), rows=item.get("rows", rows),
                     columns=item.get("columns", columns), value=value, plot=item.get("plot", layout == "sweep"))


def check_table(table: TableSpec, experiment: Experiment) -> None:
    """The groups a layout averages are declared; pivot labels exist on the systems."""
    needed = {"avg_high_low": ("high", "low"), "train_zero_shot": ("zero_shot",)}.get(table.layout, ())
    needed += {"high": ("high",), "low": ("low",), "avg_z": ("zero_shot",)}.get(table.value, ())
    for name in needed:
        if name not in experiment.groups:
            raise ValueError(f"the {table.layout} table needs the task group `groups.{name}`")
    if table.rows or table.columns or table.layout == "pivot":
        if not table.rows or not table.columns:
            raise ValueError(f"the {table.layout} table needs `rows` and `columns` (system labels)")
        labelled = [s for s in experiment.systems if table.rows in s.labels and table.columns in s.labels]
        if not labelled:
            raise ValueError(f"the {table.layout} table pivots on labels {table.rows!r} x {table.columns!r}, which "
                             "no system has (set `labels:` on the systems)")


# --------------------------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One training/evaluation run: a system, a seed and a part (`None`: the system is trained whole)."""

    system: System
    seed: int
    part: str | None
    output_dir: Path


def run_dir(experiment: Experiment, system: System, seed: int, part: str | None) -> Path:
    folder = experiment.output_dir / "runs" / system.slug / f"seed{seed}"
    return folder / slugify(part) if part is not None else folder


def plan_runs(experiment: Experiment) -> list[Run]:
    """Every run of the experiment, sources of `init_from` first, seed by seed."""
    return [
        Run(system, seed, part, run_dir(experiment, system, seed, part))
        for system in training_order(experiment.systems)
        for seed in experiment.seeds
        for part in (list(system.parts) or [None])
    ]


def run_flags(experiment: Experiment, run: Run) -> dict:
    """The recipe flags of a run: the experiment's flags, the budget, the system's, the part's, then the run's own
    output folder and seeds (and the source model of `init_from`)."""
    values = {
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
        try:
            with path.open("x") as file:
                file.write(f"{socket.gethostname()} {os.getpid()} {self.id}\n")
        except FileExistsError:
            return False
        return True

    def held_by_another(self, run: Run) -> bool:
        """Whether another live lane holds the run: a claim from another machine counts as live, one from this
        machine while its process runs, one being written (still empty) too."""
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
                return run
        if not any(lane.held_by_another(run) for run in left):
            return None
        time.sleep(poll_seconds)


def source_finished(experiment: Experiment, run: Run) -> bool:
    if run.system.init_from is None:
        return True
    source = experiment.system(run.system.init_from)
    return results_file(experiment, Run(source, run.seed, run.part,
                                        run_dir(experiment, source, run.seed, run.part))).exists()


def train_all(experiment: Experiment, task: RecipeTask, runner: RecipeRunner, dry_run: bool = False,
              poll_seconds: float = 30.0) -> list[Run]:
    """Run every run whose results file does not exist yet, in-process, one after the other. Each run's flags are
    written to `run_config.json` in its folder and the recipe reads that file, so
    `headsel-train <recipe> <run folder>/run_config.json` repeats a run exactly. A dry run writes the files,
    checks that the recipe parses them and lists the commands. Returns the runs this call trained.

    Lanes: the same experiment started N times (on one machine, or on machines sharing the folder) trains in N lanes.
    A lane claims a run before training it (`lane.claim` in the run folder, created exclusively), skips runs other
    live lanes hold, and waits (`poll_seconds`) for a run whose `init_from` source another lane is still training.
    A claim left by a stopped lane on this machine is taken over."""
    runs = plan_runs(experiment)
    todo = [run for run in runs if not results_file(experiment, run).exists()]
    logger.info("experiment %s: %d runs, %d done, %d to train", experiment.name, len(runs), len(runs) - len(todo),
                len(todo))
    if dry_run:
        for run in todo:
            config = run_config_path(experiment, run)
            parse_arguments([str(config)])  # unknown or ill-typed flags fail here, before any training
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
    """Write the run's flags to `run_config.json` in its folder; return the path."""
    run.output_dir.mkdir(parents=True, exist_ok=True)
    path = run.output_dir / "run_config.json"
    path.write_text(json.dumps(run_flags(experiment, run), indent=2, sort_keys=True) + "\n")
    return path


# --------------------------------------------------------------------------------------------------------------------
# Collecting scores
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class SeedScores:
    """The scores of one system and seed: per group, with bootstrap intervals where the run wrote them."""

    groups: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    mean_interval: tuple[float, float] | None = None


@dataclass
class SystemScores:
    """A system's scores over seeds and whether it can do zero-shot directions."""

    system: System
    seeds: dict[int, SeedScores] = field(default_factory=dict)
    zero_shot: bool = True


def supports_zero_shot(config: dict) -> bool:
    """Whether a trained model can translate a direction it never saw: not when a component is keyed by the
    direction (per-direction adapters, or cross-attention selection keyed by the pair of tasks), whose modules for an
    unseen direction were never trained (the paper's Table 4 reports the adapter model's zero-shot as unsupported;
    Blackwood et al.'s paired variant has no zero-shot either). A domain model's "directions" are its domains."""
    if config.get("task_type", "lang") == "domain":
        return True
    if config.get("task_adapter_dim") and config.get("task_adapter_key", "direction") == "direction":
        return False
    components = config.get("head_selection_components") or []
    return not ("decoder_cross" in components and config.get("cross_attention_task_key") == "pair")


def read_run_scores(run_folder: Path, split: str, metric: str) -> SeedScores:
    """The group scores of a run's `{split}_results.json`, with their intervals, and the interval of their mean; the
    mean and pooled scores themselves are left to the tables, which average groups themselves."""
    results = read_results(run_folder, split)
    scores = SeedScores()
    for group, score in group_scores(results, metric, split).items():
        scores.groups[group] = score.value
        if score.interval is not None:
            scores.intervals[group] = score.interval
    mean = read_score(results, score_key(metric, split=split))
    scores.mean_interval = mean.interval if mean is not None else None
    return scores


def merge_parts(parts: dict[str, SeedScores], system: str) -> SeedScores:
    """One system's scores from its separately trained parts (a group scored by two parts is an error)."""
    if len(parts) == 1:
        return next(iter(parts.values()))
    merged = SeedScores()
    for part, scores in parts.items():
        clash = sorted(set(scores.groups) & set(merged.groups))
        if clash:
            raise ValueError(f"system {system!r}: part {part!r} scores groups {clash} another part scores too")
        merged.groups.update(scores.groups)
        merged.intervals.update(scores.intervals)
    return merged


def read_model_config(run_folder: Path) -> dict:
    path = run_folder / "config.json"
    return json.loads(path.read_text()) if path.exists() else {}


def collect_scores(experiment: Experiment, metric: str) -> dict[str, SystemScores]:
    """Every system's scores from the runs' results files (runs without results are left out, with a warning)."""
    collected: dict[str, SystemScores] = {}
    for system in experiment.systems:
        entry = SystemScores(system)
        supported = []
        for seed in experiment.seeds:
            parts = {}
            for part in list(system.parts) or [None]:
                folder = run_dir(experiment, system, seed, part)
                path = results_path(folder, experiment.split)
                if not path.exists():
                    logger.warning("no results for %s, seed %s%s (%s)", system.name, seed,
                                   f", part {part}" if part else "", path)
                    continue
                parts[part] = read_run_scores(folder, experiment.split, metric)
                supported.append(supports_zero_shot(read_model_config(folder)))
            if parts and len(parts) == len(list(system.parts) or [None]):
                entry.seeds[seed] = merge_parts(parts, system.name)
        entry.zero_shot = system.zero_shot if system.zero_shot is not None else all(supported)
        collected[system.name] = entry
    return collected


# --------------------------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """A table cell: mean and standard deviation over seeds, or a note (`unsupported`, `missing`)."""

    mean: float | None = None
    std: float | None = None
    seeds: int = 0
    note: str | None = None

    def format(self, digits: int = 1) -> str:
        if self.note is not None:
            return self.note
        if self.seeds > 1:
            return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"
        return f"{self.mean:.{digits}f}"

    def to_json(self) -> dict:
        if self.note is not None:
            return {"note": self.note}
        return {"mean": self.mean, "std": self.std, "seeds": self.seeds}


def mean_std(values: Iterable[float]) -> Cell:
    """Mean and sample standard deviation (0 for one value) of a cell's per-seed values."""
    values = [float(v) for v in values]
    if not values:
        return Cell(note=MISSING)
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return Cell(mean=float(np.mean(values)), std=std, seeds=len(values))


def group_average(scores: dict[str, float], groups: list[str] | None) -> float | None:
    """The mean over `groups` (all scored groups when `None`); `None` when one is not scored."""
    names = sorted(scores) if groups is None else groups
    if not names or any(name not in scores for name in names):
        return None
    return float(np.mean([scores[name] for name in names]))


def value_groups(value: str, experiment: Experiment, scored: Iterable[str]) -> list[str]:
    """The groups a table value averages: all of them (`avg`, or `groups.all`), training (`avg_t`: `groups.training`,
    else all but the zero-shot ones), zero-shot (`avg_z`), `high`, `low`, or one group (`task:<group>`)."""
    every = experiment.groups.get("all") or sorted(scored)
    zero_shot = experiment.groups.get("zero_shot", [])
    if value == "avg":
        return list(every)
    if value == "avg_t":
        return experiment.groups.get("training") or [g for g in every if g not in zero_shot]
    if value == "avg_z":
        return list(zero_shot)
    if value in ("high", "low"):
        return list(experiment.groups[value])
    return [value.split(":", 1)[1]]


def value_cell(entry: SystemScores, value: str, experiment: Experiment) -> Cell:
    """A system's cell for a table value: the per-seed group averages, as mean ± std over seeds. A value that
    includes zero-shot directions is `unsupported` for a system without zero-shot."""
    scored = {group for seed in entry.seeds.values() for group in seed.groups}
    groups = value_groups(value, experiment, scored)
    zero_shot = set(experiment.groups.get("zero_shot", []))
    if not entry.zero_shot and zero_shot & set(groups):
        return Cell(note=UNSUPPORTED)
    averages = [group_average(seed.groups, groups) for seed in entry.seeds.values()]
    if not averages or any(average is None for average in averages):
        return Cell(note=MISSING)
    return mean_std(averages)


@dataclass
class Table:
    """A rendered table: a title, a header and rows of cells (the first column holds the row labels)."""

    title: str
    header: list[str]
    rows: list[tuple[str, list[Cell]]]
    higher_is_better: bool = True
    note: str = ""

    def best(self, column: int) -> float | None:
        means = [cells[column].mean for _, cells in self.rows if cells[column].mean is not None]
        if len(set(means)) < 2:  # nothing to tell apart
            return None
        return max(means) if self.higher_is_better else min(means)

    def markdown(self, digits: int = 1) -> str:
        """A Markdown table; the best mean of each column in bold."""
        best = [self.best(column) for column in range(len(self.header) - 1)]
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(self.header) - 1)) + "|"]
        for label, cells in self.rows:
            texts = [f"**{cell.format(digits)}**" if cell.mean is not None and best[i] is not None and math.isclose(
                cell.mean, best[i]) else cell.format(digits) for i, cell in enumerate(cells)]
            lines.append("| " + " | ".join([label] + texts) + " |")
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"title": self.title, "header": self.header,
                "rows": [{"label": label, "cells": [cell.to_json() for cell in cells]} for label, cells in self.rows]}


def scored_groups(scores: dict[str, SystemScores], experiment: Experiment) -> list[str]:
    """The column order of per-task tables: `groups.all`, else every scored group, sorted."""
    if experiment.groups.get("all"):
        return list(experiment.groups["all"])
    return sorted({group for entry in scores.values() for seed in entry.seeds.values() for group in seed.groups})


def columns_table(spec: TableSpec, scores: dict[str, SystemScores], experiment: Experiment,
                  columns: list[tuple[str, str]], higher: bool) -> Table:
    """Systems as rows, one column per `(header, value)`."""
    rows = [(name, [value_cell(entry, value, experiment) for _, value in columns]) for name, entry in scores.items()]
    return Table(spec.title, ["System"] + [header for header, _ in columns], rows, higher)


def build_table(spec: TableSpec, scores: dict[str, SystemScores], experiment: Experiment, metric: str) -> Table:
    """The table of one layout (see `LAYOUTS`)."""
    higher = metric != "wer"
    label = metric.upper()
    if spec.layout == "avg_high_low":
        return columns_table(spec, scores, experiment, [("AVG-A", "avg"), ("High", "high"), ("Low", "low")], higher)
    if spec.layout == "train_zero_shot":
        return columns_table(spec, scores, experiment, [("AVG-A", "avg"), ("AVG-T", "avg_t"), ("AVG-Z", "avg_z")],
                             higher)
    if spec.layout in ("per_task", "per_domain"):
        groups = scored_groups(scores, experiment)
        table = columns_table(spec, scores, experiment, [("AVG", "avg")] + [(g, f"task:{g}") for g in groups],
                              higher)
        table.note = f"{label} per {'domain' if spec.layout == 'per_domain' else 'task'}; AVG: their mean."
        return table
    return pivot_table(spec, scores, experiment, higher)


def pivot_table(spec: TableSpec, scores: dict[str, SystemScores], experiment: Experiment, higher: bool) -> Table:
    """Rows and columns from two system labels (e.g. strategy x components, strategy x H'), cells one value."""
    labelled = [entry for entry in scores.values()
                if spec.rows in entry.system.labels and spec.columns in entry.system.labels]
    row_keys = unique(entry.system.labels[spec.rows] for entry in labelled)
    column_keys = unique(entry.system.labels[spec.columns] for entry in labelled)
    if all(isinstance(key, (int, float)) for key in column_keys):
        column_keys = sorted(column_keys)
    lookup = {(e.system.labels[spec.rows], e.system.labels[spec.columns]): e for e in labelled}
    rows = []
    for row in row_keys:
        cells = [value_cell(lookup[(row, column)], spec.value, experiment) if (row, column) in lookup
                 else Cell(note="-") for column in column_keys]
        rows.append((str(row), cells))
    header = [f"{spec.rows} \\ {spec.columns}"] + [str(column) for column in column_keys]
    table = Table(spec.title, header, rows, higher)
    table.note = f"Cells: {spec.value}."
    return table


def unique(values: Iterable) -> list:
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def plot_pivot(table: Table, spec: TableSpec, path: Path, metric: str) -> Path:
    """A line plot of a pivot table (x: the columns, one line per row, error bars: std over seeds), as in the paper's
    Figure 2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 3.5))
    x_labels = table.header[1:]
    for label, cells in table.rows:
        points = [(x, cell) for x, cell in zip(x_labels, cells) if cell.mean is not None]
        if not points:
            continue
        xs = [float(x) if _is_number(x) else i for i, (x, _) in enumerate(points)]
        axes.errorbar(xs, [c.mean for _, c in points], yerr=[c.std or 0.0 for _, c in points], marker="o",
                      capsize=3, label=label)
    axes.set_xlabel(spec.columns)
    axes.set_ylabel(f"{metric.upper()} ({spec.value})")
    axes.set_title(table.title)
    if all(_is_number(x) for x in x_labels):
        axes.set_xticks([float(x) for x in x_labels])
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _is_number(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def interval_table(scores: dict[str, SystemScores], experiment: Experiment, metric: str) -> Table | None:
    """Every run's per-group score with its bootstrap 95% interval (one row per system and seed); `None` when the
    runs wrote no intervals."""
    groups = scored_groups(scores, experiment)
    zero_shot = set(experiment.groups.get("zero_shot", []))
    rows = []
    for name, entry in scores.items():
        for seed, seed_scores in entry.seeds.items():
            if not seed_scores.intervals:
                continue
            cells = [Cell(note=UNSUPPORTED) if group in zero_shot and not entry.zero_shot else
                     IntervalCell(seed_scores.groups.get(group), seed_scores.intervals.get(group)) for group in groups]
            rows.append((f"{name} (seed {seed})", cells))
    if not rows:
        return None
    return Table(f"Bootstrap 95% confidence intervals ({metric.upper()}, per run)", ["Run"] + groups, rows,
                 note="score [low, high]: percentile intervals over resamples of the scored sentences "
                      "(`--bootstrap_resamples`, default 1000).")


@dataclass(frozen=True)
class IntervalCell:
    """A cell showing one run's score and its bootstrap interval (never bolded: it has no `mean`)."""

    score: float | None
    interval: tuple[float, float] | None
    mean = None

    def format(self, digits: int = 1) -> str:
        if self.score is None:
            return MISSING
        if self.interval is None:
            return f"{self.score:.{digits}f}"
        return f"{self.score:.{digits}f} [{self.interval[0]:.{digits}f}, {self.interval[1]:.{digits}f}]"

    def to_json(self) -> dict:
        return {"score": self.score, "ci": list(self.interval) if self.interval else None}


# --------------------------------------------------------------------------------------------------------------------
# The whole experiment
# --------------------------------------------------------------------------------------------------------------------


def report(experiment: Experiment, task: RecipeTask, digits: int = 1) -> dict:
    """Collect every run's scores, build the tables, write `results.json`, `results.md` (and a PNG per plotted
    table) into the experiment folder, print the tables; returns the `results.json` content."""
    metric = experiment.metric or task.metric
    scores = collect_scores(experiment, metric)
    tables, sections = [], [f"# {experiment.name}", "",
                            f"{metric.upper()} on the {'test' if experiment.split == 'predict' else 'validation'} "
                            f"set; mean ± standard deviation over seeds {experiment.seeds}."]
    experiment.output_dir.mkdir(parents=True, exist_ok=True)
    for index, spec in enumerate(experiment.tables):
        table = build_table(spec, scores, experiment, metric)
        entry = {"layout": spec.layout, **table.to_json()}
        sections += ["", table.markdown(digits)]
        if spec.plot:
            path = plot_pivot(table, spec, experiment.output_dir / f"{spec.layout}_{index}.png", metric)
            entry["figure"] = path.name
            sections += ["", f"![{table.title}]({path.name})"]
        tables.append(entry)
    intervals = interval_table(scores, experiment, metric)
    if intervals is not None:
        sections += ["", intervals.markdown(digits)]
    markdown = "\n".join(sections) + "\n"
    results = {
        "experiment": experiment.name, "recipe": experiment.recipe, "metric": metric, "split": experiment.split,
        "seeds": experiment.seeds, "groups": experiment.groups,
        "systems": {name: system_json(entry) for name, entry in scores.items()},
        "tables": tables,
    }
    (experiment.output_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    (experiment.output_dir / "results.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return results


def system_json(entry: SystemScores) -> dict:
    return {
        "flags": entry.system.flags, "labels": entry.system.labels, "init_from": entry.system.init_from,
        "parts": sorted(entry.system.parts), "zero_shot": entry.zero_shot,
        "seeds": {str(seed): {"scores": s.groups, "ci": {g: list(ci) for g, ci in s.intervals.items()},
                              "mean_ci": list(s.mean_interval) if s.mean_interval else None}
                  for seed, s in entry.seeds.items()},
    }


def run_experiment(experiment: Experiment, tasks: dict[str, RecipeTask], runner: RecipeRunner,
                   tables_only: bool = False, dry_run: bool = False) -> dict | None:
    """Train what is missing (unless `tables_only`), then report (`None` while other lanes still train). `tasks`
    maps recipe names to their [`RecipeTask`]; `runner` is `headsel_recipes.recipe.run` (or a stand-in in tests)."""
    if experiment.recipe not in tasks:
        raise ValueError(f"unknown recipe {experiment.recipe!r}; the recipes are {sorted(tasks)}")
    task = tasks[experiment.recipe]
    if not tables_only:
        train_all(experiment, task, runner, dry_run)
    if dry_run:
        return None
    if not tables_only and any(Lane().held_by_another(run) for run in plan_runs(experiment)):
        logger.info("experiment %s: other lanes are still training; the last one to finish writes the tables",
                    experiment.name)
        return None
    return report(experiment, task)
