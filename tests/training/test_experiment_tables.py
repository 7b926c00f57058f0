# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment tables (`headsel_recipes.experiment.tables`): cells, the paper's layouts and pivots, on given
numbers."""

from __future__ import annotations

import numpy as np
import pytest

from headsel_recipes.experiment.scores import SeedScores, SystemScores
from headsel_recipes.experiment.spec import System, TableSpec, parse_experiment
from headsel_recipes.experiment.tables import (
    MISSING,
    UNSUPPORTED,
    Cell,
    build_table,
    interval_table,
    mean_std,
    plot_pivot,
)


def scored(name: str, per_seed: list[dict[str, float]], zero_shot: bool = True, labels: dict | None = None,
           seeds: list[int] | None = None):
    """A system's scores, per seed (seeds 1, 2, ... unless `seeds` names them)."""
    entry = SystemScores(System(name, labels=labels or {}), zero_shot=zero_shot)
    seeds = seeds or list(range(1, len(per_seed) + 1))
    entry.seeds = {seed: SeedScores(groups=dict(groups)) for seed, groups in zip(seeds, per_seed)}
    return entry


def test_mean_std_and_cell_format():
    assert mean_std([20.0, 22.0]) == Cell(mean=21.0, std=pytest.approx(2 ** 0.5), seeds=2)
    assert mean_std([20.0]).format() == "20.0"
    assert mean_std([20.0, 22.0]).format(2) == "21.00 ± 1.41"
    assert Cell(note=UNSUPPORTED).format() == UNSUPPORTED
    assert mean_std([]).note == "missing"


def test_avg_high_low_and_unsupported_zero_shot_tables():
    experiment = parse_experiment({
        "recipe": "mt", "output_dir": "unused", "systems": [{"name": "x"}],
        "groups": {"high": ["en-de", "en-fr"], "low": ["en-gu"], "zero_shot": ["de-fr"]}})
    scores = {
        "Transformer": scored("Transformer", [{"en-de": 30, "en-fr": 34, "en-gu": 5, "de-fr": 10},
                                              {"en-de": 32, "en-fr": 36, "en-gu": 7, "de-fr": 12}]),
        "Adapter": scored("Adapter", [{"en-de": 33, "en-fr": 35, "en-gu": 8, "de-fr": 1}] * 2, zero_shot=False),
    }  # both over seeds 1 and 2: cells over different seeds are not ranked
    spec = experiment.tables[0].__class__("avg_high_low", "Table 1")
    table = build_table(spec, scores, experiment, "bleu")
    transformer, adapter = (dict(zip(table.header[1:], cells)) for _, cells in table.rows)
    assert transformer["High"] == Cell(mean=33.0, std=pytest.approx(np.std([32, 34], ddof=1)), seeds=2)
    assert transformer["Low"].mean == 6.0 and transformer["AVG-A"].mean == pytest.approx(np.mean([19.75, 21.75]))
    assert adapter["AVG-A"].note == UNSUPPORTED and adapter["High"].mean == 34.0

    spec4 = spec.__class__("train_zero_shot", "Table 4")
    rows = dict(build_table(spec4, scores, experiment, "bleu").rows)
    assert [c.format() for c in rows["Adapter"]] == [UNSUPPORTED, "25.3 ± 0.0", UNSUPPORTED]
    assert rows["Transformer"][2] == Cell(mean=11.0, std=pytest.approx(2 ** 0.5), seeds=2)

    markdown = build_table(spec.__class__("per_task", "Table 2"), scores, experiment, "bleu").markdown()
    # en-fr: a tie
    assert "| Adapter | unsupported | unsupported | **33.0 ± 0.0** | 35.0 ± 0.0 | **8.0 ± 0.0** |" in markdown
    assert "| Transformer | 20.8 ± 1.4 | 11.0 ± 1.4 | 31.0 ± 1.4 | 35.0 ± 1.4 | 6.0 ± 1.4 |" in markdown
    assert markdown.splitlines()[2] == "| System | AVG | de-fr | en-de | en-fr | en-gu |"


def test_pivot_tables_and_lower_is_better():
    experiment = parse_experiment({"recipe": "asr", "output_dir": "unused", "systems": [
        {"name": "x", "labels": {"strategy": "group", "components": "encoder"}}]})
    scores = {}
    for strategy, values in (("group", {"encoder": 42.2, "decoder": 46.2, "both": 40.0}),
                             ("subset", {"encoder": 45.4, "both": 44.7})):
        for components, wer in values.items():
            name = f"{strategy} {components}"
            scores[name] = scored(name, [{"es": wer}], labels={"strategy": strategy, "components": components})
    spec = experiment.tables[0].__class__("components", "Table 6", rows="strategy", columns="components")
    table = build_table(spec, scores, experiment, "wer")
    assert table.header == ["strategy \\ components", "encoder", "decoder", "both"]
    assert [c.format() for c in dict(table.rows)["subset"]] == ["45.4", "-", "44.7"]
    assert "| group | **42.2** | 46.2 | **40.0** |" in table.markdown()  # lower WER is better


def test_cells_over_fewer_seeds_say_so_and_averages_need_every_group():
    experiment = parse_experiment({"recipe": "mt", "output_dir": "unused", "systems": [{"name": "x"}],
                                   "seeds": [1, 2, 3]})
    scores = {"A": scored("A", [{"de": 30, "fr": 34, "ru": 10}] * 3),
              "B": scored("B", [{"de": 30, "fr": 34}, {"de": 31, "fr": 35}])}  # seed 3 unfinished, no ru
    rows = dict(build_table(experiment.tables[0].__class__("per_task", "T"), scores, experiment, "bleu").rows)
    assert rows["A"][0].format() == "24.7 ± 0.0"
    assert rows["B"][0].format() == "missing"  # not a mean over de and fr beside A's mean over three groups
    assert rows["B"][1].format() == "30.5 ± 0.7 (seeds 1, 2 of 1-3)"


def test_a_pivot_cell_two_systems_label_is_refused():
    with pytest.raises(ValueError, match="systems 'a' and 'b' both label the components table's cell"):
        parse_experiment({"recipe": "asr", "output_dir": "unused", "systems": [
            {"name": name, "labels": {"strategy": "group", "components": "encoder"}} for name in ("a", "b")],
            "tables": [{"layout": "components", "title": "T", "rows": "strategy", "columns": "components"}]})


def test_cells_over_different_seeds_are_not_ranked_and_name_their_seeds():
    """A seed can move every system's score more than the systems differ: A over seeds 1 and 2 and B over seeds 2 and
    3 do not compare (B is behind on seed 2, yet its mean is ahead), so no cell of such a column is bold and the note
    says why. A partial cell names its seeds."""
    experiment = parse_experiment({"recipe": "mt", "output_dir": "unused", "systems": [{"name": "x"}],
                                   "seeds": [1, 2, 3]})
    spec = experiment.tables[0].__class__("per_task", "T")
    scores = {"A": scored("A", [{"de": 10}, {"de": 12}], seeds=[1, 2]),
              "B": scored("B", [{"de": 11}, {"de": 19}], seeds=[2, 3])}
    table = build_table(spec, scores, experiment, "bleu")
    assert [c.format() for c in dict(table.rows)["B"]] == ["15.0 ± 5.7 (seeds 2, 3 of 1-3)"] * 2
    assert dict(table.rows)["A"][1].to_json()["seed_ids"] == [1, 2]
    markdown = table.markdown()
    assert "**" not in markdown
    assert "No bold in AVG, de: the cells average different seeds" in markdown
    # over the same seeds, the best is bold again; a cell over one seed names it
    scores["A"] = scored("A", [{"de": 12}, {"de": 20}], seeds=[2, 3])
    markdown = build_table(spec, scores, experiment, "bleu").markdown()
    assert "| A | **16.0 ± 5.7 (seeds 2, 3 of 1-3)** | **16.0 ± 5.7 (seeds 2, 3 of 1-3)** |" in markdown
    assert "No bold" not in markdown
    one = build_table(spec, {"C": scored("C", [{"de": 5}], seeds=[2])}, experiment, "bleu")
    assert one.rows[0][1][0].format() == "5.0 (seed 2 of 1-3)"


def experiment_of(seeds: list[int] | None = None, recipe: str = "mt", **groups: list[str]):
    """An experiment for tables alone (one placeholder system, nothing trained), with these `groups`."""
    values = {"recipe": recipe, "output_dir": "unused", "systems": [{"name": "x"}], "groups": groups}
    return parse_experiment({**values, "seeds": seeds} if seeds else values)


# Every reported cell is "mean ± std over seeds": a median would hide an outlying seed.
def test_cells_are_means_over_seeds_not_medians():
    cell = mean_std([10.0, 11.0, 30.0])
    assert cell == Cell(mean=17.0, std=pytest.approx(np.std([10, 11, 30], ddof=1)), seeds=3)


# An AVG over fewer seeds than the cell names would be a different figure than the one reported.
def test_a_seed_lacking_a_group_makes_the_average_missing_not_a_mean_over_other_seeds():
    """Every seed's average needs every group: a seed that lacks one is not dropped from the cell (that would be a
    mean over fewer seeds than the cell names)."""
    experiment = experiment_of([1, 2, 3])
    scores = {"B": scored("B", [{"de": 10, "ru": 30}, {"de": 11}, {"de": 12, "ru": 30}])}
    rows = dict(build_table(TableSpec("per_task", "T"), scores, experiment, "bleu").rows)
    assert [c.format() for c in rows["B"]] == [MISSING, "11.0 ± 1.0", MISSING]


# Table 4's AVG-T and AVG-Z columns must average the groups the experiment file names.
def test_training_and_zero_shot_averages_follow_the_named_groups():
    """`avg_t` averages `groups.training` when the file names it; `avg_z` with no zero-shot groups is missing, not
    the mean over every group."""
    scores = {"A": scored("A", [{"de": 10, "fr": 20, "ru": 40}])}
    named = experiment_of(training=["de"], zero_shot=["ru"])
    rows = dict(build_table(TableSpec("train_zero_shot", "T"), scores, named, "bleu").rows)
    assert [c.format() for c in rows["A"]] == ["23.3", "10.0", "40.0"]
    rows = dict(build_table(TableSpec("train_zero_shot", "T"), scores, experiment_of(), "bleu").rows)
    assert [c.format() for c in rows["A"]] == ["23.3", "23.3", MISSING]


# The bold cell marks the best system: for WER and CER that is the lowest.
@pytest.mark.parametrize("metric", ["wer", "cer"])
@pytest.mark.parametrize("layout", ["per_task", "avg_high_low", "train_zero_shot"])
def test_error_rate_columns_bold_the_lowest(metric, layout):
    """Lower is better for every error rate (WER and CER), in the systems-as-rows layouts as in the pivots."""
    experiment = experiment_of(recipe="asr", high=["es"], low=["fr"])
    scores = {"A": scored("A", [{"es": 10.0, "fr": 30.0}]), "B": scored("B", [{"es": 20.0, "fr": 40.0}])}
    rows = {line.split(" | ")[0]: line for line in
            build_table(TableSpec(layout, "T"), scores, experiment, metric).markdown().splitlines()}
    assert "**" in rows["| A"] and "**" not in rows["| B"]


# Figure 2's table: columns H' = 4, 8, 16 in that order, cells the value the file asks for.
def test_sweep_columns_are_in_numeric_order_and_cells_show_the_table_s_value():
    """A pivot over a numeric label (H') orders its columns by value, whatever the systems' order; its cells are the
    spec's `value` (here `high`), not the overall average."""
    experiment = experiment_of(high=["de"], low=["fr"])
    scores = {f"g{h}": scored(f"g{h}", [{"de": 10.0 + h, "fr": 1.0}], labels={"strategy": "group", "H'": h})
              for h in (16, 4, 8)}
    table = build_table(TableSpec("sweep", "T", rows="strategy", columns="H'", value="high"), scores, experiment,
                        "bleu")
    assert table.header[1:] == ["4", "8", "16"]
    assert [c.format() for c in dict(table.rows)["group"]] == ["14.0", "18.0", "26.0"]


# The report's interval table reads "score [low, high]"; only a zero-shot group of a system without zero-shot is
# unsupported.
def test_interval_table_cells_read_low_then_high_and_only_zero_shot_is_unsupported():
    experiment = experiment_of(zero_shot=["fr"])
    scores = {"A": scored("A", [{"de": 10.0, "fr": 5.0}]), "N": scored("N", [{"de": 10.0, "fr": 5.0}], zero_shot=False)}
    for entry in scores.values():
        entry.seeds[1].intervals.update({"de": (9.0, 11.5), "fr": (4.0, 6.0)})
    rows = {label: [c.format() for c in cells] for label, cells in interval_table(scores, experiment, "bleu").rows}
    assert rows == {"A (seed 1)": ["10.0 [9.0, 11.5]", "5.0 [4.0, 6.0]"],
                    "N (seed 1)": ["10.0 [9.0, 11.5]", UNSUPPORTED]}


def test_interval_table_columns_follow_groups_all_and_show_what_a_run_lacks():
    """`groups.all` orders the columns (a group no run scored still has one); a score without an interval shows
    alone, a group a run did not score shows as missing, and the JSON record keeps both as they are."""
    experiment = experiment_of(all=["fr", "de", "it"])
    scores = {"A": scored("A", [{"de": 10.0, "fr": 5.0}])}
    scores["A"].seeds[1].intervals.update({"de": (9.0, 11.5)})
    table = interval_table(scores, experiment, "bleu")
    assert table.header == ["Run", "fr", "de", "it"]
    assert [(label, [c.format() for c in cells]) for label, cells in table.rows] == [
        ("A (seed 1)", ["5.0", "10.0 [9.0, 11.5]", MISSING])]
    assert table.to_json()["rows"] == [{"label": "A (seed 1)", "cells": [
        {"score": 5.0, "ci": None}, {"score": 10.0, "ci": [9.0, 11.5]}, {"score": None, "ci": None}]}]


# Figure 2: each point at its H' with its mean over seeds, the error bar its standard deviation.
def test_sweep_plot_places_points_at_their_values_with_the_std_as_error_bars(tmp_path, monkeypatch):
    """x is the numeric column value (H'), y the cell mean, the error bar mean ± std over seeds (read off the figure
    as saved)."""
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    saved, savefig = [], Figure.savefig

    def keep(self, *args, **kwargs):
        saved.append(self)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    scores = {f"g{h}": scored(f"g{h}", [{"de": 10.0 + h}, {"de": 12.0 + h}], labels={"strategy": "group", "H'": h})
              for h in (4, 16)}
    spec = TableSpec("sweep", "T", rows="strategy", columns="H'")
    plot_pivot(build_table(spec, scores, experiment_of([1, 2]), "bleu"), spec, tmp_path / "sweep.png", "bleu")
    assert (tmp_path / "sweep.png").stat().st_size > 0
    (axes,) = saved[0].axes
    handles, labels = axes.get_legend_handles_labels()
    series = dict(zip(labels, handles))["group"]  # the row's series, as the legend names it
    line = series[0] if isinstance(series, tuple) else series  # an error-bar container's first part: its data line
    np.testing.assert_allclose(line.get_xydata(), [[4.0, 15.0], [16.0, 27.0]])
    (bars,) = [c for c in axes.collections if isinstance(c, LineCollection)]
    std = 2 ** 0.5
    np.testing.assert_allclose([segment.tolist() for segment in bars.get_segments()],
                               [[[4.0, 15.0 - std], [4.0, 15.0 + std]], [[16.0, 27.0 - std], [16.0, 27.0 + std]]])


def test_pivot_plot_places_categories_at_their_columns_and_leaves_out_rows_without_scores(tmp_path, monkeypatch):
    """Columns that are no numbers (components) are categories, each at its column's position; a row no run scored
    draws no series (an empty series would still take a legend entry)."""
    from matplotlib.figure import Figure

    saved, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (saved.append(self), savefig(self, *a, **k))[1])
    scores = {f"{strategy}-{components}": scored(f"{strategy}-{components}", [{"de": score}],
                                                 labels={"strategy": strategy, "components": components})
              for strategy, components, score in (("group", "encoder", 10.0), ("group", "decoder", 12.0))}
    scores["subset-decoder"] = scored("subset-decoder", [{}], labels={"strategy": "subset", "components": "decoder"})
    spec = TableSpec("components", "T", rows="strategy", columns="components")
    table = build_table(spec, scores, experiment_of(), "bleu")
    plot_pivot(table, spec, tmp_path / "components.png", "bleu")
    (axes,) = saved[0].axes
    assert axes.get_legend_handles_labels()[1] == ["group"]
    assert [tick.get_text() for tick in axes.get_xticklabels()] == table.header[1:]
    line = axes.get_lines()[0]
    np.testing.assert_allclose(line.get_xydata(), [[i, 10.0 if c == "encoder" else 12.0]
                                                   for i, c in enumerate(table.header[1:])])

