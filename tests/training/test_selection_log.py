# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The Trainer's selection log: one snapshot when training starts and one per logging step, readable by
`hf_headsel.analysis`, whose change counts agree with the `head_selection_changes` the Trainer logs."""

from __future__ import annotations

import json

import torch
from transformers import Seq2SeqTrainingArguments, default_data_collator

from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel
from hf_headsel.analysis import SELECTION_LOG_NAME, read_selection_log, selection_stability
from headsel_recipes.trainer import HeadSelSeq2SeqTrainer

VOCAB, LAYERS, HEADS = 24, 2, 2


def tiny_model() -> HeadSelMarianMTModel:
    config = HeadSelMarianConfig(
        vocab_size=VOCAB, d_model=8, encoder_layers=LAYERS, decoder_layers=LAYERS, encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS, encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=16,
        pad_token_id=VOCAB - 1, eos_token_id=0, decoder_start_token_id=VOCAB - 1,
        encoder_tasks=["en", "de"], decoder_tasks=["fr", "it"],
    )
    torch.manual_seed(0)
    return HeadSelMarianMTModel(config)


def tiny_dataset(size: int = 16) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    return [
        {
            "input_ids": torch.randint(1, VOCAB - 1, (6,), generator=generator),
            "labels": torch.randint(1, VOCAB - 1, (5,), generator=generator),
            "encoder_task_ids": index % 2,
            "decoder_task_ids": (index // 2) % 2,
        }
        for index in range(size)
    ]


def test_trainer_appends_selections_at_start_and_every_logging_step(tmp_path):
    model = tiny_model()
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), max_steps=6, logging_steps=2, per_device_train_batch_size=4,
        learning_rate=0.5,  # large enough for the selection to move in a few steps
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, seed=0,
    )
    trainer = HeadSelSeq2SeqTrainer(model=model, args=args, train_dataset=tiny_dataset(),
                                    data_collator=default_data_collator)
    trainer.train()

    lines = (tmp_path / SELECTION_LOG_NAME).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == [0, 2, 4, 6]
    final = model.selected_heads()
    assert set(records[-1]["selections"]) == set(final) == {"encoder_self", "decoder_self"}
    assert records[-1]["selections"]["encoder_self"] == {
        "en": final["encoder_self"][0].tolist(), "de": final["encoder_self"][1].tolist()}
    assert records[-1]["selections"]["decoder_self"]["it"] == final["decoder_self"][1].tolist()

    log = read_selection_log(tmp_path / SELECTION_LOG_NAME)
    assert not log.skipped and not log.superseded
    stability = selection_stability(log.snapshots)
    logged = [entry["head_selection_changes"] for entry in trainer.state.log_history
              if "head_selection_changes" in entry]
    assert [entry["total"] for entry in stability["changes"]] == logged
    assert sum(logged) > 0  # the check above compares something that moved
