# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The scores of an experiment's runs (`headsel_recipes.experiment.scores`): zero-shot support from the trained
model's config, a run's results files, a system's parts and seeds (end to end: test_experiment_runner.py)."""

from __future__ import annotations

import json

import pytest

from hf_headsel import HeadSelMarianConfig
from headsel_recipes.experiment.scores import (
    SeedScores,
    collect_scores,
    merge_parts,
    read_run_scores,
    supports_zero_shot,
)
from headsel_recipes.experiment.spec import parse_experiment, run_dir
from headsel_recipes.results_keys import (
    TRAIN_LOSS_EVAL_MODE,
    interval_keys,
    results_path,
    score_key,
    unusable_key,
)


def test_zero_shot_support_follows_the_model_config():
    assert supports_zero_shot({"model_type": "marian"})
    assert supports_zero_shot({"head_selection_components": ["encoder_self", "decoder_self"]})
    assert not supports_zero_shot({"task_adapter_dim": 256, "task_adapter_key": "direction"})
    assert supports_zero_shot({"task_adapter_dim": 256, "task_adapter_key": "task"})
    assert not supports_zero_shot({"head_selection_strategy": "task_specific", "cross_attention_task_key": "pair",
                                   "head_selection_components": ["decoder_cross"]})
    assert supports_zero_shot({"head_selection_strategy": "task_specific", "cross_attention_task_key": "decoder",
                               "head_selection_components": ["decoder_cross"]})
    assert supports_zero_shot({"task_type": "domain", "task_adapter_dim": 8, "task_adapter_key": "direction"})


def write_run(folder, results: dict, train: dict | None = None, config: dict | None = None) -> None:
    """A finished run as the recipe leaves it: `predict_results.json`, and `train_results.json` / `config.json` when
    given."""
    folder.mkdir(parents=True, exist_ok=True)
    results_path(folder, "predict").write_text(json.dumps(results))
    if train is not None:
        results_path(folder, "train").write_text(json.dumps(train))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))


def with_interval(key: str, value: float, low: float, high: float) -> dict:
    """A score and its bootstrap interval bounds, keyed as the recipe writes them."""
    return dict(zip((key, *interval_keys(key)), (value, low, high)))


# A saved config may leave out a key at its default: misreading it would mark adapter rows unsupported (or not) in
# Table 4.
def test_a_config_without_the_adapter_key_reads_as_the_config_default():
    default = HeadSelMarianConfig().task_adapter_key
    assert supports_zero_shot({"task_adapter_dim": 8}) == supports_zero_shot(
        {"task_adapter_dim": 8, "task_adapter_key": default})
    assert not supports_zero_shot({"task_adapter_dim": 8})  # the default keys adapters by direction


# The per-run interval table and results.json show these bounds; the mean's interval is not the pooled score's.
def test_run_scores_keep_interval_bounds_and_the_mean_s_interval(tmp_path):
    """A group's interval is (low, high) as written; `mean_interval` is the interval of the mean over groups
    (`{split}_{metric}`), not of the pooled score; a train file with only one mode loss records none."""
    mean, pooled, group = (score_key("bleu", g, split="predict") for g in (None, "pooled", "de"))
    write_run(tmp_path, {**with_interval(mean, 20.0, 19.0, 21.0), **with_interval(pooled, 22.0, 21.5, 22.5),
                         **with_interval(group, 18.0, 17.0, 19.5), unusable_key("predict"): 0.25},
              train={TRAIN_LOSS_EVAL_MODE: 3.0})
    scores = read_run_scores(tmp_path, "predict", "bleu")
    assert scores.groups == {"de": 18.0}  # neither the mean nor the pooled score is a group
    assert scores.intervals == {"de": (17.0, 19.5)}
    assert scores.mean_interval == (19.0, 21.0)
    assert scores.unusable == 0.25
    assert scores.mode_losses is None  # not both recorded: not recorded


# A system trained in parts is one row of Tables 3 and 5: its warnings must name it when any part did not learn.
def test_merged_parts_keep_every_interval_and_the_worst_part_s_warnings():
    """A system trained in parts: every part's intervals; the unusable share of the part that learned least and the
    mode losses of the most noise-dependent part (so the report names a system one of whose parts did not learn)."""
    tedx = SeedScores(groups={"tedx": 1.0}, intervals={"tedx": (0.5, 1.5)}, unusable=0.1, mode_losses=(3.0, 2.0))
    covost = SeedScores(groups={"covost": 2.0}, intervals={"covost": (1.5, 2.5)}, unusable=0.6,
                        mode_losses=(2.0, 2.5))
    for parts in ({"tedx": tedx, "covost": covost}, {"covost": covost, "tedx": tedx}):
        merged = merge_parts(parts, "Separate")
        assert merged.groups == {"tedx": 1.0, "covost": 2.0}
        assert merged.intervals == {"tedx": (0.5, 1.5), "covost": (1.5, 2.5)}
        assert merged.unusable == 0.6
        assert merged.mode_losses == (3.0, 2.0)  # eval-mode loss 1.0 above the training-mode loss
    with pytest.raises(ValueError, match="tedx"):
        merge_parts({"a": tedx, "b": SeedScores(groups={"tedx": 3.0})}, "Separate")


# A cell averages whole seeds: a seed with an unfinished part would put a partial system beside complete ones; the
# zero-shot flag decides which cells read `unsupported`.
def test_collected_seeds_need_every_part_and_zero_shot_follows_every_part_or_the_file(tmp_path):
    """A seed one part of which has no results is left out (not a system scored on some of its groups); a system
    supports zero-shot only when every part's model does, unless the experiment file says so itself."""
    experiment = parse_experiment({
        "recipe": "st", "output_dir": str(tmp_path / "exp"), "seeds": [1, 2],
        "systems": [{"name": "Separate", "parts": {"tedx": {}, "covost": {}}},
                    {"name": "Mixed", "parts": {"a": {}, "b": {}}},
                    {"name": "Forced", "zero_shot": True}]})
    systems = {system.name: system for system in experiment.systems}
    per_direction = {"task_adapter_dim": 8, "task_adapter_key": "direction"}

    def finished(system: str, seed: int, part: str | None, group: str, score: float, config: dict) -> None:
        write_run(run_dir(experiment, systems[system], seed, part), {score_key("bleu", group, split="predict"): score},
                  config=config)

    for seed in (1, 2):
        finished("Separate", seed, "tedx", "tedx", 10.0 + seed, {})
        finished("Mixed", seed, "a", "a", 1.0, per_direction)
        finished("Mixed", seed, "b", "b", 1.0, {})
        finished("Forced", seed, None, "a", 1.0, per_direction)
    finished("Separate", 1, "covost", "covost", 20.0, {})  # seed 2's covost part unfinished
    collected = collect_scores(experiment, "bleu")
    assert list(collected["Separate"].seeds) == [1]
    assert collected["Separate"].seeds[1].groups == {"tedx": 11.0, "covost": 20.0}
    assert collected["Mixed"].zero_shot is False  # part a's adapters are per direction
    assert collected["Forced"].zero_shot is True  # the file's word beats the config
