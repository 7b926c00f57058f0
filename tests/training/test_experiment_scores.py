# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The scores of an experiment's runs (`headsel_recipes.experiment.scores`): zero-shot support from the trained
model's config (the end-to-end reading of results files: test_experiment_runner.py)."""

from __future__ import annotations

from headsel_recipes.experiment.scores import supports_zero_shot


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
