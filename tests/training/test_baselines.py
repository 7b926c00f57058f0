# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The baselines of the papers through the recipes: Blackwood et al.'s task-specific cross-attention with its three
keys, and per-task adapters in the multi-domain setting."""

from __future__ import annotations

import json

import pytest
from recipe_testkit import tiny_flags
from transformers import AutoModelForSeq2SeqLM

from headsel_recipes import run
from headsel_recipes.tasks import MT
from headsel_recipes.experiment.scores import supports_zero_shot

HEADS = 2  # the tiny model's H


@pytest.mark.parametrize(
    "key, keyed_tasks, zero_shot",
    [("decoder", 3, True), ("encoder", 2, True), ("pair", 2 * 3, False)],  # target-, source-specific, paired
)
def test_task_specific_cross_attention_keys(text_corpus, tmp_path, key, keyed_tasks, zero_shot):
    out = tmp_path / key
    run(MT, tiny_flags(out, speech=False, max_steps=2) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--test_file", str(text_corpus / "test.jsonl"),
        "--head_selection_strategy", "task_specific", "--head_selection_components", "decoder_cross",
        "--cross_attention_task_key", key, "--do_train", "--do_predict"])
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    config = model.config
    assert (config.encoder_tasks, config.decoder_tasks) == (["de", "en"], ["de", "en", "fr"])
    # H' = T x H; task t owns candidates t*H .. t*H+H-1 in every layer; the self-attentions stay shared
    assert config.total_decoder_attention_heads == keyed_tasks * HEADS
    heads = model.selected_heads()
    assert list(heads) == ["decoder_cross"]
    assert heads["decoder_cross"][:, 0].tolist() == [[t * HEADS, t * HEADS + 1] for t in range(keyed_tasks)]
    predict = json.loads((out / "predict_results.json").read_text())
    assert {"predict_bleu_en-de", "predict_bleu_en-fr", "predict_bleu_de-en"} <= set(predict)
    assert supports_zero_shot(config.to_dict()) is zero_shot


def test_domain_adapters_on_a_shared_model(text_corpus, tmp_path):
    shared = tmp_path / "shared"
    common = ["--train_file", str(text_corpus / "train.jsonl"), "--task_type", "domain", "--do_train"]
    run(MT, tiny_flags(shared, speech=False, max_steps=2) + common + [
        "--total_encoder_attention_heads", "2", "--total_decoder_attention_heads", "2"])
    flags = tiny_flags(tmp_path / "adapters", speech=False, max_steps=2)
    flags = flags[:flags.index("--config_overrides")] + flags[flags.index("--config_overrides") + 2:]
    run(MT, flags + common + ["--model_name_or_path", str(shared), "--task_adapter_dim", "8",
                                  "--task_adapter_key", "task", "--train_only_adapters"])
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "adapters")
    assert model.config.task_type == "domain" and model.config.encoder_tasks == ["news", "web"]
    adapter = model.model.encoder.layers[0].task_adapter
    assert adapter.down_weight.shape[0] == 2 and adapter.up_weight.abs().sum() > 0  # one adapter per domain, trained
    before = AutoModelForSeq2SeqLM.from_pretrained(shared)
    fresh = AutoModelForSeq2SeqLM.from_pretrained(shared, task_adapter_dim=8, task_adapter_key="task")
    fresh_adapter = fresh.model.encoder.layers[0].task_adapter
    assert fresh_adapter.up_weight.abs().sum() == 0 and fresh_adapter.down_weight.isfinite().all()
    assert (model.model.encoder.layers[0].fc1.weight == before.model.encoder.layers[0].fc1.weight).all()  # frozen
