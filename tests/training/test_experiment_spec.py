# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment file (`headsel_recipes.experiment.spec`): the rules a file must follow, sweeps, and the shipped
experiment files."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers.training_args
import yaml

from headsel_recipes.cli.experiment import main as run_experiment_command
from headsel_recipes.experiment.runner import plan_runs
from headsel_recipes.experiment.spec import parse_experiment


@pytest.mark.parametrize(
    "change, rule",
    [
        ({"tables": ["table_7"]}, "unknown table layout"),
        ({"systems": [{"name": "A", "init_from": "B"}]}, "init_from 'B' is not a system"),
        ({"systems": [{"name": "A", "init_from": "B"}, {"name": "B", "init_from": "A"}]}, "cycle"),
        ({"systems": [{"name": "Group (H'=8)"}, {"name": "group h 8"}]}, "share the folder"),
        ({"tables": ["avg_high_low"]}, "groups.high"),
        ({"tables": ["components"]}, "no system has"),
        ({"seeds": []}, "seeds"),
        ({"budget": {"seed": 3}}, "sets output_dir, seed and data_seed"),
        ({"systems": [{"name": "A", "flags": {"model_name_or_path": "x"}}]}, "init_from"),
    ],
)
def test_invalid_experiments_name_the_rule(change, rule, tmp_path):
    values = {"recipe": "mt", "output_dir": str(tmp_path), "systems": [{"name": "A"}], **change}
    with pytest.raises(ValueError, match=rule):
        parse_experiment(values)


def test_sweep_expands_into_labelled_systems(tmp_path):
    experiment = parse_experiment({
        "recipe": "asr", "output_dir": str(tmp_path), "systems": [{
            "name": "Group", "labels": {"strategy": "group"}, "flags": {"head_selection_strategy": "group"},
            "sweep": {"label": "H'", "values": [4, 8],
                      "flags": ["total_encoder_attention_heads", "total_decoder_attention_heads"]}}],
        "tables": ["sweep"]})
    assert [s.name for s in experiment.systems] == ["Group (H'=4)", "Group (H'=8)"]
    assert experiment.systems[1].flags == {"head_selection_strategy": "group", "total_encoder_attention_heads": 8,
                                           "total_decoder_attention_heads": 8}
    assert experiment.systems[1].labels == {"strategy": "group", "H'": 8}


EXPERIMENTS_DIR = Path(__file__).resolve().parents[2] / "training" / "experiments"


@pytest.mark.parametrize("path", sorted(EXPERIMENTS_DIR.glob("*/*.yaml")),
                         ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_shipped_experiments_parse_and_their_run_flags_are_recipe_flags(path, tmp_path, capsys, monkeypatch):
    if path.parent.name == "benchmark_gpu":  # bf16 files: check their flags here, where no GPU says bf16 works
        monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    assert run_experiment_command([str(path), "--dry_run", "--output_dir", str(tmp_path)]) is None  # parses every run
    listed = capsys.readouterr().out.splitlines()
    experiment = parse_experiment(yaml.safe_load(path.read_text()), tmp_path)
    assert len(listed) == len(plan_runs(experiment)) >= 4
