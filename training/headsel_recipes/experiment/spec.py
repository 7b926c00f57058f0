# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment file: systems x seeds trained and scored by one recipe, summarised in the paper's tables.

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

A file may start from another: `extends: mt.yaml` (a path relative to the file's folder) takes that file's
experiment and changes it. `flags`, `budget` and `groups` are merged key by key (a `null` removes the base's key);
`systems` lists the systems, each either the name of a system of the base file (taken as that file defines it) or a
system of its own; every other key given replaces the base's. A file that changes the base's `recipe`, `split`,
`flags` or `budget`, or redefines one of its systems (other flags, `init_from` or `parts` in the same folder), sets its
own `output_dir`, so that runs trained with different settings never share a folder:

```yaml
extends: mt.yaml
name: "MT at three times the updates"
output_dir: outputs/benchmark/mt_3000_updates
budget: {max_steps: 3000}
systems: [Shared, Group]
```

Every run gets the same flags but its system's, the same budget and, per seed, the same `seed` / `data_seed`: the
systems see identical data in identical order. A run is `output_dir/runs/<system>/seed<seed>[/<part>]`; it is skipped
when its results file already exists, so an interrupted experiment resumes where it stopped (a run trained with other
flags than the file now gives it is an error: [`headsel_recipes.experiment.runner.check_unchanged`]). A system with `parts`
(e.g. the paper's "separate" models, one per domain) trains one run per part, each with the part's own flags; their
group scores are merged. A system and the system it starts from (`init_from`) have the same parts, or none.

This module reads and checks the file ([`load_experiment`]) and names the run folders ([`run_dir`]); the runner
([`headsel_recipes.experiment.runner`]) trains, and the tables ([`headsel_recipes.experiment.tables`]) write
`results.json` (every score, every seed, the tables) and `results.md` (the tables, plus the bootstrap intervals of
each run) and print the tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..tasks import TASKS

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
TABLE_KEYS = {"layout", "title", "rows", "columns", "value", "plot"}
# The scores a results file holds (`{split}_{metric}_{group}`): the metrics the recipes score.
METRICS = sorted({task.metric for task in TASKS.values()})
RUN_KEYS = ("output_dir", "seed", "data_seed", "model_name_or_path")
EXPERIMENT_KEYS = {"name", "recipe", "output_dir", "seeds", "split", "flags", "budget", "groups", "systems", "tables",
                   "metric"}
SYSTEM_KEYS = {"name", "flags", "labels", "init_from", "parts", "zero_shot", "sweep"}
# The keys a file that `extends` another merges key by key into the base's instead of replacing them.
MERGED_KEYS = ("flags", "budget", "groups")
# The keys (besides the systems) that decide what a run folder holds: a file that changes one needs its own output_dir.
RUN_SETTINGS = (("recipe", None), ("split", "predict"), ("flags", {}), ("budget", {}))


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
    """Read and check an experiment YAML file, the file it `extends` resolved. `output_dir` overrides the file's
    (relative paths in the file are taken as they are, from the working directory; `extends` from the file's
    folder)."""
    return parse_experiment(read_experiment_file(Path(path)), output_dir)


def read_experiment_file(path: Path, extended_by: tuple[Path, ...] = ()) -> dict:
    """The mapping of an experiment file, with the chain of files it `extends` resolved ([`extend`])."""
    if path.resolve() in extended_by:
        chain = " -> ".join(str(p) for p in (*extended_by, path.resolve()))
        raise ValueError(f"`extends` makes a cycle: {chain}")
    values = yaml.safe_load(path.read_text())
    if not isinstance(values, dict):
        raise ValueError(f"{path}: an experiment file is a YAML mapping")
    base_name = values.pop("extends", None)
    if base_name is None:
        return values
    base_path = path.parent / str(base_name)
    if not base_path.is_file():
        raise ValueError(f"{path}: `extends: {base_name}` is not a file (the path is taken from {path.parent})")
    try:
        return extend(read_experiment_file(base_path, (*extended_by, path.resolve())), values)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def extend(base: dict, changes: dict) -> dict:
    """The mapping of an experiment file `base`, changed by the mapping of a file that extends it: `flags`,
    `budget` and `groups` merged key by key (`null` removes a key), `systems` picked by name from the base or given
    whole, every other key replaced."""
    values = {**base, **{key: value for key, value in changes.items() if key not in MERGED_KEYS + ("systems",)}}
    for key in MERGED_KEYS:
        if key in changes:
            if not isinstance(changes[key] or {}, dict) or not isinstance(base.get(key) or {}, dict):
                raise ValueError(f"`{key}` is merged key by key into the file it extends: it must be a mapping "
                                 "in both files")
            values[key] = merge_mapping(base.get(key) or {}, changes[key] or {})
    if "systems" in changes:
        values["systems"] = [base_system(base, item) if isinstance(item, str) else item
                             for item in as_list(changes["systems"], "systems")]
    changed = changed_settings(base, values)
    if changed and base.get("output_dir") is not None and values.get("output_dir") == base.get("output_dir"):
        raise ValueError(f"it changes the {and_list(changed)} of the file it extends but keeps its output_dir "
                         f"{base.get('output_dir')!r}: runs with different settings would share run folders (and "
                         "finished ones be skipped); give it its own `output_dir`")
    return values


def changed_settings(base: dict, values: dict) -> list[str]:
    """What a file that extends `base` changes of the runs they share: the recipe, split, flags or budget, and the
    systems it redefines (other flags, `init_from` or `parts` in a folder of the base's), e.g. `["budget", "systems
    ['Group']"]`."""
    # a key left out, `null` and its empty value are alike (`flags: {}` changes nothing)
    changed = [key for key, default in RUN_SETTINGS if (values.get(key) or default) != (base.get(key) or default)]
    before, after = system_runs(base), system_runs(values)
    redefined = [after[slug][0] for slug in after if slug in before and after[slug][1:] != before[slug][1:]]
    return changed + ([f"systems {redefined}"] if redefined else [])


def system_runs(values: dict) -> dict[str, tuple]:
    """Each system's folder -> its name and what its runs train (flags, `init_from`, parts), sweeps expanded."""
    systems = [system for item in as_list(values.get("systems"), "systems") for system in parse_systems(item)]
    return {system.slug: (system.name, system.flags, system.init_from, system.parts) for system in systems}


def and_list(items: list[str]) -> str:
    """`["a", "b", "c"]` -> `"a, b and c"`."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def as_mapping(value: object, where: str) -> dict:
    """`value` as a mapping (`None`: empty); anything else is a `ValueError` naming `where`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"`{where}` must be a mapping (key: value), got {value!r}")
    return dict(value)


def as_list(value: object, where: str) -> list:
    """`value` as a list (`None`: empty); anything else (a mapping, or a string, which would be split into its
    characters) is a `ValueError` naming `where`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"`{where}` must be a list, got {value!r}")
    return value


def merge_mapping(base: dict, changes: dict) -> dict:
    """`base` with the keys of `changes` set, those set to `None` removed."""
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def base_system(base: dict, name: str) -> dict:
    """The system named `name` in the base file's `systems` (a sweep by its own name, before it is expanded)."""
    for item in base.get("systems") or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    names = [item.get("name") for item in base.get("systems") or [] if isinstance(item, dict)]
    raise ValueError(f"system {name!r} is not a system of the file it extends; its systems are {names}")


def parse_experiment(values: dict, output_dir: str | Path | None = None) -> Experiment:
    """An [`Experiment`] from the mapping of an experiment file; a `ValueError` names the rule a file breaks."""
    if "extends" in values:
        raise ValueError("`extends` names a file from the extending file's folder: read the file with "
                         "load_experiment(path)")
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
    flags, budget = as_mapping(values.get("flags"), "flags"), as_mapping(values.get("budget"), "budget")
    for source, given in (("flags", flags), ("budget", budget)):
        reserved = sorted(set(given) & set(RUN_KEYS[:3]))
        if reserved:
            raise ValueError(f"`{source}` sets {reserved}: the runner sets output_dir, seed and data_seed per run")
    systems = [system for item in as_list(values["systems"], "systems") for system in parse_systems(item)]
    check_systems(systems)
    groups = parse_groups(values.get("groups"))
    tables = [parse_table(item) for item in as_list(values.get("tables"), "tables") or [{"layout": "per_task"}]]
    metric = values.get("metric")
    if metric is not None and metric not in METRICS:
        raise ValueError(f"`metric` must be a metric the recipes score, one of {METRICS}, got {metric!r} (every "
                         "cell would be missing)")
    experiment = Experiment(
        name=str(values.get("name", Path(output_dir).name)), recipe=values["recipe"], output_dir=Path(output_dir),
        seeds=seeds, systems=systems, tables=tables, flags=flags, budget=budget, groups=groups, split=split,
        metric=metric,
    )
    for table in tables:
        check_table(table, experiment)
    return experiment


def parse_groups(values: object) -> dict[str, list[str]]:
    """The `groups` mapping: each a list of group names (a string would be split into its characters)."""
    groups = as_mapping(values, "groups")
    for name, members in groups.items():
        if not isinstance(members, list) or not all(isinstance(member, str) for member in members):
            raise ValueError(f"`groups.{name}` must be a list of group names, e.g. [en-de, en-fr], got {members!r}")
    return {str(name): list(members) for name, members in groups.items()}


def parse_systems(item: dict) -> list[System]:
    """One system of the file, or several for a `sweep`: `{label: "H'", values: [4, 8], flags: [flag, ...]}` sets
    every listed flag to each value and names the systems `"<name> (H'=4)"`, ..."""
    if not isinstance(item, dict) or "name" not in item:
        raise ValueError(f"every system is a mapping with a `name`, got {item!r}")
    name = str(item["name"])
    unknown = set(item) - SYSTEM_KEYS
    if unknown:
        raise ValueError(f"system {name!r}: unknown keys {sorted(unknown)}; the keys are {sorted(SYSTEM_KEYS)}")
    flags = as_mapping(item.get("flags"), f"systems[{name}].flags")
    parts = {str(part): as_mapping(part_flags, f"systems[{name}].parts.{part}")
             for part, part_flags in as_mapping(item.get("parts"), f"systems[{name}].parts").items()}
    check_run_keys(flags, f"system {name!r}")
    for part, part_flags in parts.items():
        check_run_keys(part_flags, f"system {name!r}, part {part!r},")
    refuse_shared_folders(list(parts), f"system {name!r}: parts")
    if not isinstance(item.get("init_from"), (str, type(None))):
        raise ValueError(f"system {name!r}: `init_from` names a system, got {item['init_from']!r}")
    if not isinstance(item.get("zero_shot"), (bool, type(None))):
        raise ValueError(f"system {name!r}: `zero_shot` must be true or false (or left out: read off the trained "
                         f"model), got {item['zero_shot']!r}")
    base = System(name=name, flags=flags,
                  labels=as_mapping(item.get("labels"), f"systems[{name}].labels"), init_from=item.get("init_from"),
                  parts=parts, zero_shot=item.get("zero_shot"))
    return [base] if item.get("sweep") is None else expand_sweep(base, item["sweep"])


def check_run_keys(flags: dict, owner: str) -> None:
    """A system's (or part's, or sweep's) flags leave the keys the runner sets per run alone."""
    reserved = sorted(set(flags) & set(RUN_KEYS))
    if reserved:
        raise ValueError(f"{owner} sets {reserved}: the runner sets these per run (use `init_from` to start from "
                         "another system)")


def expand_sweep(base: System, sweep: object) -> list[System]:
    """The systems of a sweep `{label: "H'", values: [4, 8], flags: [flag, ...]}` (see [`parse_systems`])."""
    if not isinstance(sweep, dict) or set(sweep) != {"label", "values", "flags"}:
        raise ValueError(f"system {base.name!r}: a sweep is {{label: ..., values: [...], flags: [...]}}, got {sweep!r}")
    values, flags = as_list(sweep["values"], f"systems[{base.name}].sweep.values"), sweep["flags"]
    if not values:
        raise ValueError(f"system {base.name!r}: the sweep has no `values`")
    if not isinstance(flags, list) or not flags or not all(isinstance(flag, str) for flag in flags):
        raise ValueError(f"system {base.name!r}: the sweep's `flags` must be a non-empty list of flag names, "
                         f"got {flags!r}")
    check_run_keys(dict.fromkeys(flags), f"system {base.name!r}'s sweep")
    return [
        System(name=f"{base.name} ({sweep['label']}={value})", flags={**base.flags, **dict.fromkeys(flags, value)},
               labels={**base.labels, sweep["label"]: value}, init_from=base.init_from, parts=base.parts,
               zero_shot=base.zero_shot)
        for value in values
    ]


def refuse_shared_folders(names: list[str], what: str) -> None:
    """A `ValueError` where two of `names` (systems, or a system's parts) get one run folder: the second's runs would
    be skipped as finished, reporting the first's scores."""
    folders: dict[str, str] = {}
    for name in names:
        folder = slugify(name)
        if folder in folders:
            raise ValueError(f"{what} {folders[folder]!r} and {name!r} would share the folder {folder!r}: give them "
                             "distinct names")
        folders[folder] = name


def check_systems(systems: list[System]) -> None:
    """Names unique (also as folders), `init_from` names an earlier-trainable system, no cycles."""
    refuse_shared_folders([system.name for system in systems], "systems")
    names = {system.name: system for system in systems}
    for system in systems:
        if system.init_from is None:
            continue
        source = names.get(system.init_from)
        if source is None:
            raise ValueError(f"system {system.name!r}: init_from {system.init_from!r} is not a system; the systems "
                             f"are {list(names)}")
        if set(source.parts) != set(system.parts):  # each run starts from the source's run of its seed and part
            raise ValueError(f"system {system.name!r} (parts {sorted(system.parts)}) starts from {source.name!r} "
                             f"(parts {sorted(source.parts)}): a system starts from the run of its own part, so both "
                             "need the same parts (or none)")
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
    item = {"layout": item} if isinstance(item, str) else as_mapping(item, "tables[]")
    layout = item.get("layout")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown table layout {layout!r}; the layouts are {list(LAYOUTS)}")
    unknown = set(item) - TABLE_KEYS
    if unknown:
        raise ValueError(f"the {layout} table: unknown keys {sorted(unknown)}; the keys are {sorted(TABLE_KEYS)}")
    rows, columns = PIVOT_DEFAULTS.get(layout, (None, None))
    value = item.get("value", "avg")
    if value not in VALUES and not str(value).startswith("task:"):
        raise ValueError(f"table value must be one of {list(VALUES)} or 'task:<group>', got {value!r}")
    if not isinstance(item.get("plot", False), bool):
        raise ValueError(f"the {layout} table: `plot` must be true or false, got {item['plot']!r}")
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
        cells: dict[tuple, str] = {}
        for system in labelled:
            cell = (system.labels[table.rows], system.labels[table.columns])
            if cell in cells:  # one cell shows one system: the other would be left out
                raise ValueError(f"systems {cells[cell]!r} and {system.name!r} both label the {table.layout} table's "
                                 f"cell {table.rows}={cell[0]!r}, {table.columns}={cell[1]!r}: give them other labels")
            cells[cell] = system.name


def run_dir(experiment: Experiment, system: System, seed: int, part: str | None) -> Path:
    """The folder of one run: `output_dir/runs/<system>/seed<seed>[/<part>]`."""
    folder = experiment.output_dir / "runs" / system.slug / f"seed{seed}"
    return folder / slugify(part) if part is not None else folder
