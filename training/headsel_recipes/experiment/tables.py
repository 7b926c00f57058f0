# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The tables of an experiment: the paper's layouts from the runs' scores, the plots, and the written report.

Cells are the mean ± sample standard deviation over seeds of each seed's group average ([`value_cell`]); a value
that includes zero-shot directions is `unsupported` for a system without zero-shot. A cell over fewer seeds than the
experiment's names them, and a column whose cells cover different seeds has no best cell: where the seed moves the
score more than the system does, means over other seeds do not compare. [`report`] writes `results.json`
and `results.md` (and a PNG per plotted table) into the experiment folder and prints the tables.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hf_headsel.card_metrics import ERROR_RATES

from ..arguments import RecipeTask
from ..metrics import is_noise_dependent, is_unlearned
from .environments import environments_section
from .scores import SystemScores, collect_scores
from .spec import Experiment, TableSpec

logger = logging.getLogger("headsel_recipes.experiment")

UNSUPPORTED = "unsupported"
MISSING = "missing"


@dataclass(frozen=True)
class Cell:
    """A table cell: mean and standard deviation over seeds, or a note (`unsupported`, `missing`)."""

    mean: float | None = None
    std: float | None = None
    seeds: int = 0
    note: str | None = None
    seed_ids: tuple[int, ...] = field(default=(), compare=False)  # the seeds averaged
    of_seeds: tuple[int, ...] | None = field(default=None, compare=False)  # the experiment's seeds: fewer are named

    def format(self, digits: int = 1) -> str:
        if self.note is not None:
            return self.note
        text = f"{self.mean:.{digits}f} ± {self.std:.{digits}f}" if self.seeds > 1 else f"{self.mean:.{digits}f}"
        if self.of_seeds is not None and self.seeds < len(self.of_seeds):
            text += f" (seed{'s' if self.seeds > 1 else ''} {seed_text(self.seed_ids)} of {seed_text(self.of_seeds)})"
        return text

    def to_json(self) -> dict:
        if self.note is not None:
            return {"note": self.note}
        return {"mean": self.mean, "std": self.std, "seeds": self.seeds, "seed_ids": list(self.seed_ids)}


def seed_text(seeds: Iterable[int]) -> str:
    """Seeds as a cell names them: `[1, 2, 3]` -> `"1-3"`, `[2, 3]` -> `"2, 3"`."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds)


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


def value_cell(entry: SystemScores, value: str, experiment: Experiment, scored: Iterable[str]) -> Cell:
    """A system's cell for a table value: the per-seed group averages, as mean ± std over seeds (a cell over fewer
    seeds than the experiment's names them). `scored`: the groups any compared system scored, so that an average a
    system lacks a group of is `missing`, not a mean over other groups. A value that includes zero-shot directions
    is `unsupported` for a system without zero-shot."""
    groups = value_groups(value, experiment, scored)
    zero_shot = set(experiment.groups.get("zero_shot", []))
    if not entry.zero_shot and zero_shot & set(groups):
        return Cell(note=UNSUPPORTED)
    averages = [group_average(seed.groups, groups) for seed in entry.seeds.values()]
    if not averages or any(average is None for average in averages):
        return Cell(note=MISSING)
    return replace(mean_std(averages), seed_ids=tuple(entry.seeds), of_seeds=tuple(experiment.seeds))


@dataclass
class Table:
    """A rendered table: a title, a header and rows of cells (the first column holds the row labels)."""

    title: str
    header: list[str]
    rows: list[tuple[str, list[Cell]]]
    higher_is_better: bool = True
    note: str = ""

    def scored(self, column: int) -> list[Cell]:
        """The cells of a column that have a mean."""
        return [cells[column] for _, cells in self.rows if cells[column].mean is not None]

    def mixes_seeds(self, column: int) -> bool:
        """Whether the column's means average different seeds (e.g. seeds 1, 2 beside seeds 2, 3)."""
        return len({tuple(sorted(cell.seed_ids)) for cell in self.scored(column)}) > 1

    def best(self, column: int) -> float | None:
        """The column's best mean; `None` when nothing tells apart, or its means average different seeds."""
        means = [cell.mean for cell in self.scored(column)]
        if len(set(means)) < 2 or self.mixes_seeds(column):
            return None
        return max(means) if self.higher_is_better else min(means)

    def markdown(self, digits: int = 1) -> str:
        """A Markdown table; the best mean of each column in bold (none where the cells cover different seeds, which
        the table's note then names)."""
        columns = range(len(self.header) - 1)
        best = [self.best(column) for column in columns]
        mixed = [self.header[column + 1] for column in columns if self.mixes_seeds(column)]
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(self.header) - 1)) + "|"]
        for label, cells in self.rows:
            texts = [f"**{cell.format(digits)}**" if cell.mean is not None and best[i] is not None and math.isclose(
                cell.mean, best[i]) else cell.format(digits) for i, cell in enumerate(cells)]
            lines.append("| " + " | ".join([label] + texts) + " |")
        notes = [self.note] if self.note else []
        if mixed:
            notes.append(f"No bold in {', '.join(mixed)}: the cells average different seeds, so their means do not "
                         "compare (the per-seed scores: results.json).")
        if notes:
            lines += ["", " ".join(notes)]
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
    scored = scored_groups(scores, experiment)
    rows = [(name, [value_cell(entry, value, experiment, scored) for _, value in columns])
            for name, entry in scores.items()]
    return Table(spec.title, ["System"] + [header for header, _ in columns], rows, higher)


def build_table(spec: TableSpec, scores: dict[str, SystemScores], experiment: Experiment, metric: str) -> Table:
    """The table of one layout (see `LAYOUTS`)."""
    higher = metric not in ERROR_RATES
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
    scored = scored_groups(scores, experiment)
    rows = []
    for row in row_keys:
        cells = [value_cell(lookup[(row, column)], spec.value, experiment, scored) if (row, column) in lookup
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
        points = [(i, x, cell) for i, (x, cell) in enumerate(zip(x_labels, cells)) if cell.mean is not None]
        if not points:
            continue
        xs = [float(x) if _is_number(x) else i for i, x, _ in points]  # a category at its column's position
        axes.errorbar(xs, [c.mean for _, _, c in points], yerr=[c.std or 0.0 for _, _, c in points], marker="o",
                      capsize=3, label=label)
    axes.set_xlabel(spec.columns)
    axes.set_ylabel(f"{metric.upper()} ({spec.value})")
    axes.set_title(table.title)
    if all(_is_number(x) for x in x_labels):
        axes.set_xticks([float(x) for x in x_labels])
    else:
        axes.set_xticks(range(len(x_labels)), x_labels)
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


def unlearned_runs(scores: dict[str, SystemScores]) -> list[str]:
    """The runs, `"System (seed N): ..."`, whose hypotheses are mostly empty or looping ([`is_unlearned`]) or whose
    model works only with its training-time noise ([`is_noise_dependent`])."""
    runs = []
    for name, entry in scores.items():
        for seed, seed_scores in entry.seeds.items():
            reasons = []
            if is_unlearned(seed_scores.unusable):
                reasons.append(f"{100 * seed_scores.unusable:.0f}% of the hypotheses empty or looping")
            if seed_scores.mode_losses is not None and is_noise_dependent(*seed_scores.mode_losses):
                reasons.append("works only with its training-time noise (loss on training examples {:.2f} in "
                               "evaluation mode, {:.2f} in training mode)".format(*seed_scores.mode_losses))
            if reasons:
                runs.append(f"{name} (seed {seed}): " + "; ".join(reasons))
    return runs


def unlearned_section(scores: dict[str, SystemScores]) -> list[str]:
    """The report's warning about [`unlearned_runs`] (logged too), as markdown lines; none when every run learned."""
    runs = unlearned_runs(scores)
    if not runs:
        return []
    logger.warning("%d run(s) did not learn their task; their BLEU or WER compares nothing: %s", len(runs),
                   "; ".join(runs))
    return ["", "**Runs that did not learn their task** (a recipe that does not suit the model, or too few updates: "
                "their BLEU or WER compares nothing, their test loss still can):", ""] + [f"- {run}" for run in runs]


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


def report(experiment: Experiment, task: RecipeTask, digits: int = 1) -> dict:
    """Collect every run's scores, build the tables, write `results.json`, `results.md` (and a PNG per plotted
    table) into the experiment folder, print the tables; returns the `results.json` content."""
    metric = experiment.metric or task.metric
    scores = collect_scores(experiment, metric)
    tables, sections = [], [f"# {experiment.name}", "",
                            f"{metric.upper()} on the {'test' if experiment.split == 'predict' else 'validation'} "
                            f"set; mean ± standard deviation over seeds {experiment.seeds} (a cell over fewer seeds "
                            "names them).",
                            *unlearned_section(scores), *environments_section(experiment)]
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
    (experiment.output_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    (experiment.output_dir / "results.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return results


def system_json(entry: SystemScores) -> dict:
    return {
        "flags": entry.system.flags, "labels": entry.system.labels, "init_from": entry.system.init_from,
        "parts": sorted(entry.system.parts), "zero_shot": entry.zero_shot,
        "seeds": {str(seed): {"scores": s.groups, "ci": {g: list(ci) for g, ci in s.intervals.items()},
                              "mean_ci": list(s.mean_interval) if s.mean_interval else None, "unusable": s.unusable,
                              "mode_losses": list(s.mode_losses) if s.mode_losses else None}
                  for seed, s in entry.seeds.items()},
    }
