# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""End-to-end runs of the three recipes (in-process, a few steps of a tiny model) on generated corpora."""

from __future__ import annotations

import json
import logging
import re
import shutil

import pytest
import torch
import yaml
from datasets.fingerprint import Hasher
from recipe_testkit import TINY_MARIAN, TINY_TEXT, one_sgd_step_flags, text_rows, tiny_flags, write_jsonl
from safetensors.torch import load_file
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoModelForSpeechSeq2Seq,
    MarianConfig,
    MarianMTModel,
    Seq2SeqTrainingArguments,
    Speech2TextProcessor,
)

import hf_headsel
from headsel_recipes import run
from headsel_recipes.arguments import parse_arguments
from headsel_recipes.data import DataError, load_splits
from headsel_recipes.metrics import NOISE_DEPENDENCE_NATS, UNLEARNED_SHARE, unusable_share
from headsel_recipes.recipe import (
    get_tokenizer,
    resolve_tasks,
    selection_noise,
    target_languages,
    warn_if_noise_dependent,
    warn_if_unlearned,
)
from headsel_recipes.results_keys import TRAIN_LOSS_EVAL_MODE, TRAIN_LOSS_TRAIN_MODE
from headsel_recipes.tasks import ASR, MT, ST
from headsel_recipes.tokenizer import has_tokenizer, load_tokenizer, train_marian_tokenizer


def read_json(path):
    return json.loads(path.read_text())


def test_asr_end_to_end_with_bad_rows(speech_corpus, tmp_path, caplog):
    out = tmp_path / "asr"
    args = tiny_flags(out, speech=True) + [
        "--train_file", str(speech_corpus / "train.jsonl"),
        "--validation_file", str(speech_corpus / "dev.jsonl"),
        "--test_file", str(speech_corpus / "dev.jsonl"),
        "--encoder_tasks", "es,fr", "--decoder_tasks", "es,fr",
        "--max_duration_in_seconds", "5",
        "--do_train", "--do_eval", "--do_predict",
    ]
    with caplog.at_level(logging.INFO):
        result = run(ASR, args)

    report = read_json(out / "data_report.json")
    assert report["train"] == {"total": 23, "kept": 16, "skipped": {
        "unreadable_audio": 2, "empty_audio": 1, "invalid_audio": 1, "audio_too_long": 1, "empty_target": 1,
        "unknown_language": 1}}
    assert report["validation"]["skipped"] == {"unknown_language": 1}
    assert "train: kept 16 of 23 examples; skipped 7: audio_too_long=1" in caplog.text
    # why audio is unreadable (a wrong folder, a format) is said, not only counted
    assert re.search(r"train: the first unreadable audio: (garbage|missing): \S", caplog.text)

    eval_results = read_json(out / "eval_results.json")
    assert {"eval_wer", "eval_wer_es", "eval_wer_fr", "eval_wer_pooled", "eval_loss"} <= set(eval_results)
    assert eval_results["eval_samples"] == 6
    assert {"predict_wer_es", "predict_wer_fr"} <= set(read_json(out / "predict_results.json"))
    predictions = [json.loads(line) for line in (out / "generated_predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 6 and {p["group"] for p in predictions} == {"es", "fr"}
    # the share of empty or looping hypotheses is recorded, and a model that has not learned is called so
    unusable = read_json(out / "predict_results.json")["predict_unusable"]
    assert unusable == unusable_share([p["prediction"] for p in predictions])
    assert ("the model has not learned its task" in caplog.text) == (unusable >= UNLEARNED_SHARE)

    train_logs = [entry for entry in result.trainer.state.log_history if "loss" in entry]
    assert len(train_logs) == 3
    assert all({"head_selection_kl", "head_selection_temperature", "head_selection_changes"} <= set(entry)
               for entry in train_logs)

    # the output folder is a complete, loadable model: weights, tokenizer, feature extractor
    model = AutoModelForSpeechSeq2Seq.from_pretrained(out).eval()
    assert isinstance(model, hf_headsel.HeadSelSpeech2TextForConditionalGeneration)
    assert model.config.encoder_tasks == ["es", "fr"] and model.config.task_type == "lang"
    processor = Speech2TextProcessor.from_pretrained(out)
    audio = torch.sin(torch.arange(8000) * 0.3).numpy()
    features = processor.feature_extractor(audio, sampling_rate=16000, return_tensors="pt")
    tokens = model.generate(features.input_features, attention_mask=features.attention_mask,
                            encoder_task_ids=torch.tensor([1]), decoder_task_ids=torch.tensor([1]), max_length=5)
    assert tokens.shape[0] == 1


@pytest.mark.parametrize("overrides, noise", [
    ({}, 1.0),  # group, H' = 2H: draws a noisy selection (the paper's scale)
    ({"head_selection_noise_scale": 0.25}, 0.25),
    ({"head_selection_noise_scale": 0.0}, 0.0),
    ({"head_selection_strategy": "task_specific"}, 0.0),  # fixed heads: nothing drawn
    ({"total_encoder_attention_heads": 4, "total_decoder_attention_heads": 4}, 0.0),  # H' = H: every head used
])
def test_selection_noise_is_the_scale_a_selection_is_drawn_with(marian, overrides, noise):
    components = {"head_selection_components": ["encoder_self", "decoder_self", "decoder_cross"]}
    assert selection_noise(marian.model(**components, **overrides)) == noise


def test_selection_noise_of_a_stock_model_is_zero(marian):
    assert selection_noise(marian.stock_model()) == 0.0


@pytest.mark.parametrize("share, noise, warnings", [
    (0.9, 1.0, ["has not learned its task", "head_selection_noise_scale=1)"]),
    (0.9, 0.0, ["has not learned its task"]),
    (0.1, 1.0, []),
    (None, 1.0, []),
])
def test_an_unlearned_run_names_the_sampling_noise(caplog, share, noise, warnings):
    with caplog.at_level(logging.WARNING, logger="headsel_recipes"):
        warn_if_unlearned(share, "predict", noise)
    assert len(caplog.records) == len(warnings)
    for record, expected in zip(caplog.records, warnings):
        assert expected in record.getMessage()


def test_mode_losses_score_the_model_without_and_with_its_training_noise(text_corpus, tmp_path):
    out = tmp_path / "shared"
    result = run(MT, tiny_flags(out, speech=False) + [
        "--shared_baseline", "--train_file", str(text_corpus / "train.jsonl"), "--do_train"])
    recorded = read_json(out / "train_results.json")
    # the tiny stock model has no dropout: the same function in both modes, so the same loss
    assert recorded[TRAIN_LOSS_EVAL_MODE] == recorded[TRAIN_LOSS_TRAIN_MODE] > 0

    trainer = result.trainer
    for module in trainer.model.modules():
        if isinstance(getattr(module, "dropout", None), float):
            module.dropout = 0.3
    was_training, random_state = trainer.model.training, torch.get_rng_state()
    eval_mode, train_mode = trainer.mode_losses(trainer.train_dataset)
    # evaluation mode ignores dropout; training mode draws it, seeded, and leaves no trace
    assert eval_mode == pytest.approx(recorded[TRAIN_LOSS_EVAL_MODE], abs=1e-6) and train_mode != eval_mode
    assert trainer.model.training == was_training and torch.equal(torch.get_rng_state(), random_state)
    assert trainer.mode_losses(trainer.train_dataset) == (eval_mode, train_mode)


@pytest.mark.parametrize("eval_mode, train_mode, warns", [
    (6.7, 4.7, True),  # the depth benchmark's broken adapters seed: it works only with dropout on
    (4.7 + NOISE_DEPENDENCE_NATS + 0.01, 4.7, True),
    (4.7 + NOISE_DEPENDENCE_NATS - 0.01, 4.7, False),
    (4.6, 4.7, False),  # evaluation mode better: the usual case
])
def test_a_model_that_needs_its_training_noise_is_called_so(caplog, eval_mode, train_mode, warns):
    with caplog.at_level(logging.WARNING, logger="headsel_recipes"):
        warn_if_noise_dependent(eval_mode, train_mode)
    assert ("works only with its training-time noise" in caplog.text) == warns


def test_st_fairseq_manifests_domains(speech_corpus, tmp_path):
    # an "ASR" checkpoint with the same encoder shape to start the encoder from
    asr = hf_headsel.HeadSelSpeech2TextForConditionalGeneration(hf_headsel.HeadSelSpeech2TextConfig(
        vocab_size=40, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, conv_channels=16,
        encoder_tasks=["tedx", "mustc"], decoder_tasks=["tedx", "mustc"], task_type="domain"))
    asr.save_pretrained(tmp_path / "asr")
    out = tmp_path / "st"
    args = tiny_flags(out, speech=True) + [
        "--manifest_dir", str(speech_corpus / "manifests"),
        "--train_file", "train_es_en_tedx,train_fr_en_covost",
        "--validation_file", "dev_*",
        "--task_type", "domain",
        "--init_encoder_from", str(tmp_path / "asr"),
        "--sampling_alpha", "0.5",
        "--head_selection_kl_weight", "0.1",
        "--temperature_schedule", "linear", "--final_temperature", "1.0",
        "--noise_schedule", "linear", "--final_noise_scale", "0.0",
        "--do_train", "--do_eval",
    ]
    result = run(ST, args)
    config = result.trainer.model.config
    assert config.encoder_tasks == ["covost", "tedx"] and config.task_type == "domain"
    eval_results = read_json(out / "eval_results.json")
    assert {"eval_bleu", "eval_bleu_tedx", "eval_bleu_covost"} <= set(eval_results)
    temperatures = [entry["head_selection_temperature"] for entry in result.trainer.state.log_history
                    if "loss" in entry]
    assert temperatures == pytest.approx([5.0, 3.0, 1.0])
    noise_scales = [entry["head_selection_noise_scale"] for entry in result.trainer.state.log_history
                    if "loss" in entry]
    assert noise_scales == pytest.approx([1.0, 0.5, 0.0])


def test_mt_sampling_smoothing_kl_averaging(text_corpus, tmp_path):
    out = tmp_path / "mt"
    args = tiny_flags(out, speech=False, max_steps=4) + [
        "--train_file", str(text_corpus / "train.jsonl"),
        "--validation_file", str(text_corpus / "dev.jsonl"),
        "--test_file", str(text_corpus / "test.jsonl"),
        "--sampling_alpha", "0.3",
        "--label_smoothing_factor", "0.1",
        "--head_selection_kl_weight", "0.5",
        "--head_selection_strategy", "subset",
        "--save_strategy", "steps", "--save_steps", "2",
        "--average_last_n", "2",
        "--do_train", "--do_eval", "--do_predict",
    ]
    result = run(MT, args)
    assert read_json(out / "averaged_checkpoints.json") == ["checkpoint-2", "checkpoint-4"]
    final = load_file(out / "model.safetensors")
    two, four = (load_file(out / f"checkpoint-{step}" / "model.safetensors") for step in (2, 4))
    for key in ("head_selection.encoder_self.logits", "model.encoder.layers.0.self_attn.q_proj.weight"):
        torch.testing.assert_close(final[key], (two[key] + four[key]) / 2)
    predict = read_json(out / "predict_results.json")
    assert {"predict_bleu", "predict_bleu_en-de", "predict_bleu_en-fr", "predict_bleu_de-en"} <= set(predict)
    config = result.trainer.model.config
    assert (config.encoder_tasks, config.decoder_tasks) == (["de", "en"], ["de", "en", "fr"])
    assert config.head_selection_strategy == "subset"

    # the output continues as a checkpoint: evaluation only, tasks and tokenizer from the checkpoint
    again = run(MT, tiny_flags(tmp_path / "mt_eval", speech=False) + [
        "--model_name_or_path", str(out), "--validation_file", str(text_corpus / "dev.jsonl"), "--do_eval"])
    assert again.metrics["eval"]["eval_bleu_en-de"] == read_json(out / "eval_results.json")["eval_bleu_en-de"]


def test_mt_shared_baseline_from_yaml(text_corpus, tmp_path):
    out = tmp_path / "baseline"
    flags = tiny_flags(out, speech=False)
    flags.remove("--use_cpu")
    config = {flags[i].lstrip("-"): yaml.safe_load(flags[i + 1]) for i in range(0, len(flags), 2)}
    config.update(use_cpu=True, shared_baseline=True, target_lang_token=True, do_train=True, do_eval=True,
                  train_file=[str(text_corpus / "train.jsonl")], validation_file=[str(text_corpus / "dev.jsonl")])
    (tmp_path / "mt.yaml").write_text(yaml.safe_dump(config))
    result = run(MT, [str(tmp_path / "mt.yaml")])
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert type(model) is MarianMTModel and model.config.model_type == "marian"
    assert {"eval_bleu_en-de", "eval_bleu_de-en"} <= set(read_json(out / "eval_results.json"))
    tokenizer = result.trainer.processing_class
    assert tokenizer.convert_tokens_to_ids(">>de<<") != tokenizer.unk_token_id
    assert tokenizer(">>de<< the cat").input_ids[0] == tokenizer.convert_tokens_to_ids(">>de<<")


def test_target_language_tokens_with_domain_tasks(text_corpus, tmp_path):
    # the tasks are domains, the `>>xx<<` tokens still the target languages (they were `>>news<<`: every source
    # began with `<unk>`)
    out = tmp_path / "domains"
    result = run(MT, tiny_flags(out, speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--task_type", "domain", "--target_lang_token", "--do_train"])
    tokenizer = result.trainer.processing_class
    assert result.trainer.model.config.decoder_tasks == ["news", "web"]
    first_tokens = {int(row["input_ids"][0]) for row in result.trainer.train_dataset}
    assert first_tokens == {tokenizer.convert_tokens_to_ids(f">>{lang}<<") for lang in ("de", "en", "fr")}
    with pytest.raises(ValueError, match="--target_lang_token: the tokenizer has no piece for"):
        run(MT, tiny_flags(tmp_path / "without", speech=False) + [
            "--train_file", str(text_corpus / "train.jsonl"), "--tokenizer_name", str(out), "--task_type", "lang",
            "--decoder_tasks", "de", "en", "fr", "it", "--target_lang_token", "--do_train"])


def test_an_encoder_keyed_by_no_task_selects_once_for_every_domain(text_corpus, tmp_path):
    # the ablation of routing the encoder by the domain: one encoder selection (H of H'), the decoder's per domain
    result = run(MT, tiny_flags(tmp_path / "run", speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--task_type", "domain", "--encoder_tasks", "default",
        "--do_train"])
    model = result.trainer.model
    assert model.config.encoder_tasks == ["default"] and model.config.decoder_tasks == ["news", "web"]
    assert tuple(model.head_selection["encoder_self"].logits.shape[:1]) == (1,)
    assert tuple(model.head_selection["decoder_self"].logits.shape[:1]) == (2,)
    train = result.trainer.train_dataset
    assert len(train) == 48 and set(train["encoder_task_ids"]) == {0} and set(train["decoder_task_ids"]) == {0, 1}
    assert set(train["group"]) == {"news", "web"}


def test_tags_name_each_examples_own_task_on_a_side_keyed_by_no_task(text_corpus, speech_corpus, tmp_path):
    # routing by no task removes the per-task heads, not what the shared model is told: the tag of its own task
    result = run(ASR, tiny_flags(tmp_path / "asr", speech=True) + [
        "--train_file", str(speech_corpus / "train.jsonl"), "--encoder_tasks", "default", "--decoder_tasks", "default",
        "--task_tag", "--do_train"])
    tokenizer, train = result.trainer.processing_class.tokenizer, result.trainer.train_dataset
    assert result.trainer.model.config.decoder_tasks == ["default"] and set(train["decoder_task_ids"]) == {0}
    tags = [tokenizer.convert_ids_to_tokens(int(labels[0])) for labels in train["labels"]]
    # the training row in Klingon, skipped where a side is keyed by the language, is kept and tagged as its own
    assert tags == [f"<lang:{group}>" for group in train["group"]]
    assert set(tags) == {"<lang:es>", "<lang:fr>", "<lang:tlh>"}
    result = run(MT, tiny_flags(tmp_path / "mt", speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--encoder_tasks", "default", "--encoder_task_tag",
        "--do_train"])
    tokenizer, train = result.trainer.processing_class, result.trainer.train_dataset
    assert set(train["encoder_task_ids"]) == {0}
    tags = [tokenizer.convert_ids_to_tokens(int(ids[0])) for ids in train["input_ids"]]
    assert tags == [f"<lang:{group.split('-')[0]}>" for group in train["group"]]
    assert set(tags) == {"<lang:de>", "<lang:en>"}


def test_target_language_tokens_of_a_decoder_keyed_by_no_task_are_the_rows_languages():
    raw = {"train": {"target_lang": ["de", "fr", "de"]}, "test": {"target_lang": ["en"]}}
    assert target_languages(raw, "lang", ["de", "fr"]) == ["de", "fr"]
    assert target_languages(raw, "lang", ["default"]) == ["de", "en", "fr"]


def test_a_task_whose_every_training_example_is_skipped_is_named(tmp_path, caplog):
    rows = [dict(row, target="" if row["target_lang"] == "fr" else row["target"]) for row in text_rows(24, seed=1)]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        result = run(MT, tiny_flags(tmp_path / "out", speech=False) + ["--train_file", str(train), "--do_train"])
    assert result.trainer.model.config.decoder_tasks == ["de", "en", "fr"]
    assert "every training example of decoder task(s) ['fr'] was skipped" in caplog.text
    assert "encoder task(s)" not in caplog.text


def test_accumulated_batches_train_as_one_large_batch(tmp_path):
    # each batch's loss was its own mean: a batch of short targets weighted its tokens more than one batch would
    common = one_sgd_step_flags(tmp_path)  # the 4 short targets, then the 4 long ones
    flags = {name: tiny_flags(tmp_path / name, speech=False, max_steps=1) + common for name in ("one", "accumulated")}
    flags["one"][flags["one"].index("--per_device_train_batch_size") + 1] = "8"
    flags["accumulated"] += ["--gradient_accumulation_steps", "2"]  # 2 x 4 examples
    results = {name: run(MT, run_flags + (["--tokenizer_name", str(tmp_path / "one")] if name == "accumulated" else []))
               for name, run_flags in flags.items()}
    losses = [results[name].metrics["train"]["train_loss"] for name in ("one", "accumulated")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5) and losses[0] > 0
    one, accumulated = (load_file(tmp_path / name / "model.safetensors") for name in ("one", "accumulated"))
    for key in one:
        torch.testing.assert_close(accumulated[key], one[key], rtol=1e-5, atol=1e-6)


# Trainer's activation checkpointing flags are Transformers 5.24's (pip gives Python 3.10 an older release)
HAS_ACTIVATION_CHECKPOINTING_FLAGS = hasattr(Seq2SeqTrainingArguments, "activation_checkpointing")


@pytest.mark.skipif(not HAS_ACTIVATION_CHECKPOINTING_FLAGS, reason="--activation_checkpointing is Transformers 5.24's")
@pytest.mark.parametrize("reentrant", ["true", "false"])
def test_activation_checkpointing_trains_the_weights_of_an_unchecked_run(tmp_path, reentrant):
    """Trainer's `--activation_checkpointing` (Transformers 5.24) on a recipe's model with the Gumbel noise on: the
    same losses and weights after two SGD steps (a checkpointed layer recomputes its gates from the step's one draw)."""
    common = one_sgd_step_flags(tmp_path) + ["--head_selection_noise_scale", "1"]
    checked = ["--activation_checkpointing", "--activation_checkpointing_kwargs", f'{{"use_reentrant": {reentrant}}}']
    results = {}
    for name, extra in (("plain", []), ("checked", checked + ["--tokenizer_name", str(tmp_path / "plain")])):
        results[name] = run(MT, tiny_flags(tmp_path / name, speech=False, max_steps=2) + common + extra)
    layers = {name: [layer.gradient_checkpointing for layer in result.trainer.model.model.encoder.layers]
              for name, result in results.items()}
    assert layers == {"plain": [False], "checked": [True]}
    assert results["checked"].metrics["train"]["train_loss"] == results["plain"].metrics["train"]["train_loss"]
    plain, checked_weights = (load_file(tmp_path / name / "model.safetensors") for name in ("plain", "checked"))
    assert checked_weights.keys() == plain.keys()
    for key in plain:
        torch.testing.assert_close(checked_weights[key], plain[key], msg=lambda m: f"{key}: {m}")


def test_evaluation_without_generation_scores_the_same_loss(text_corpus, tmp_path):
    # Transformers 5.24 hands evaluation a token count too: the loss-only path took the training step's loss (and
    # an evaluation-only run failed on the missing accumulation count)
    trained = tmp_path / "trained"
    run(MT, tiny_flags(trained, speech=False, max_steps=2) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--head_selection_kl_weight", "5",
        "--gradient_accumulation_steps", "2", "--do_train"])
    losses = []
    for generate in ("true", "false"):
        result = run(MT, tiny_flags(tmp_path / f"eval_{generate}", speech=False) + [
            "--model_name_or_path", str(trained), "--validation_file", str(text_corpus / "dev.jsonl"),
            "--predict_with_generate", generate, "--do_eval"])
        losses.append(result.metrics["eval"]["eval_loss"])
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)


def test_resume_continues_same_data_and_selector_state(text_corpus, tmp_path):
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    common = ["--train_file", str(text_corpus / "train.jsonl"), "--sampling_alpha", "0.5",
              "--save_strategy", "steps", "--save_steps", "2", "--head_selection_kl_weight", "0.1", "--do_train"]
    first = run(MT, tiny_flags(full, speech=False, max_steps=4) + common)
    second = run(MT, tiny_flags(resumed, speech=False, max_steps=4) + common + [
        "--tokenizer_name", str(full), "--resume_from_checkpoint", str(full / "checkpoint-2")])
    losses = [[entry["loss"] for entry in run.trainer.state.log_history if "loss" in entry] for run in (first, second)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)  # the resumed history holds steps 1-2 of the checkpoint
    final_full, final_resumed = load_file(full / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert final_full.keys() == final_resumed.keys()
    for key in final_full:
        torch.testing.assert_close(final_resumed[key], final_full[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--do_predict"], "without --do_train score a trained model: give it with --model_name_or_path"),
        (["--do_train", "--temperature_schedule", "linear"], "--temperature_schedule needs --final_temperature"),
        (["--do_train", "--noise_schedule", "linear"], "--noise_schedule needs --final_noise_scale"),
        (["--do_train", "--early_stopping_patience", "2"], "--early_stopping_patience needs evaluation"),
        (["--do_train", "--average_last_n", "2"], "--save_strategy no saves none"),
        (["--do_train", "--average_last_n", "3", "--save_strategy", "steps", "--save_total_limit", "2"],
         "--save_total_limit 2 keeps fewer"),
        (["--do_train", "--bleu_tokenize", "13A"], "--bleu_tokenize '13A' cannot score"),
        (["--do_train", "--task_tag"], "--task_tag is for speech recipes"),
        (["--do_train", "--resume_from_checkpoint", "no/such/folder"], "not a checkpoint folder"),
        (["--do_train", "--resume_from_checkpoint", "true"], "no checkpoint-\\* folder"),
        (["--do_train", "--sampling_alpha", "0.5", "--train_sampling_strategy", "group_by_length"],
         "--sampling_alpha 0.5 draws the training order itself"),
        (["--do_train", "--metric_for_best_model", "eval_wer"], "eval_wer is an error rate .* --greater_is_better false"),
        (["--do_train", "--average_last_n", "2", "--save_strategy", "steps", "--save_total_limit", "2",
          "--eval_strategy", "steps", "--early_stopping_patience", "2"], "checkpoints kept beside the best one"),
        (["--do_train", "--tokenizer_model_type", "bogus"], "--tokenizer_model_type 'bogus': use one of unigram"),
        (["--do_train", "--vocab_size", "0"], "--vocab_size 0: must be at least 1"),
        (["--do_train", "--tokenizer_max_sentences", "0"], "--tokenizer_max_sentences 0: must be at least 1"),
        (["--do_train", "--config_overrides", TINY_TEXT + ",head_selection_strategy=subset"],
         "--config_overrides cannot set head-selection settings \\['head_selection_strategy'\\]"),
        (["--do_train", "--config_overrides", TINY_TEXT + ",dropout"], "--config_overrides items must look like"),
        ([], "nothing to do: pass --do_train, --do_eval and/or --do_predict"),
        # `best` saves when an evaluation during training is the best so far, and there is none: nothing to average
        (["--do_train", "--average_last_n", "2", "--save_strategy", "best", "--metric_for_best_model", "eval_loss"],
         "--save_strategy best saves one only when an evaluation during training is the best so far, which "
         "--eval_strategy no never runs"),
    ],
    ids=["predict-without-a-model", "temperature-schedule", "noise-schedule", "early-stopping", "average-unsaved",
         "average-more-than-kept", "bleu-tokenizer", "task-tag-in-mt", "resume-missing", "resume-none",
         "task-sampling-and-another-order", "error-rate-higher-better", "average-beside-the-best",
         "tokenizer-model-type", "vocab-size", "tokenizer-sentences", "head-selection-override",
         "malformed-override", "nothing-to-do", "average-best-without-evaluation"],
)
def test_flag_rules_fail_before_any_work(text_corpus, tmp_path, flags, message):
    out = tmp_path / "run"
    files = ["--train_file", str(text_corpus / "train.jsonl"), "--test_file", str(text_corpus / "test.jsonl")]
    with pytest.raises(ValueError, match=message):
        run(MT, tiny_flags(out, speech=False) + files + flags)
    assert not out.exists()  # no tokenizer trained and left behind for the next run to reuse


@pytest.mark.parametrize("flag", ["--tokenizer_name", "--feature_extractor_name"])
def test_a_named_tokenizer_or_feature_extractor_must_load(speech_corpus, tmp_path, flag):
    # a typo in the name gave the default feature extractor silently, features the model was not trained on
    typo = str(tmp_path / "no_such_folder")
    with pytest.raises(DataError, match=f"cannot load a {flag[2:-5].replace('_', ' ')} from '{typo}'"):
        run(ASR, tiny_flags(tmp_path / "run", speech=True) + [
            "--train_file", str(speech_corpus / "train.jsonl"), "--do_train", flag, typo])


def test_a_trained_tokenizer_hashes_as_the_one_later_processes_load(text_corpus, tmp_path):
    # the prepared splits' cache is keyed by the tokenizer's hash: the other processes of a distributed run and a
    # resumed run load the tokenizer from the output folder, and must find the splits the main process prepared
    model_args, head_args, data_args, training_args = parse_arguments(tiny_flags(tmp_path / "run", speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--do_train"])
    raw = load_splits(MT, data_args, ["train"], "lang", model_args.cache_dir)
    encoder_tasks, decoder_tasks, _ = resolve_tasks(MT, head_args, raw, None, None)
    trained = get_tokenizer(MT, model_args, data_args, raw, encoder_tasks, decoder_tasks, training_args)
    assert Hasher.hash(trained) == Hasher.hash(load_tokenizer(training_args.output_dir, speech=False))


def test_resuming_a_checkpoint_of_another_structure_is_refused(text_corpus, tmp_path):
    out = tmp_path / "run"
    common = ["--train_file", str(text_corpus / "train.jsonl"), "--save_strategy", "steps", "--save_steps", "2",
              "--do_train"]
    run(MT, tiny_flags(out, speech=False, max_steps=2) + common)
    with pytest.raises(ValueError, match="trained with head_selection_strategy='group', and this run builds "
                                         "head_selection_strategy='subset'"):
        run(MT, tiny_flags(out, speech=False, max_steps=4) + common + [
            "--resume_from_checkpoint", "last", "--head_selection_strategy", "subset"])


def test_missing_column_or_file_fails_before_training(speech_corpus, tmp_path):
    out = tmp_path / "bad"
    base = tiny_flags(out, speech=True) + ["--validation_file", str(speech_corpus / "dev.jsonl"), "--do_train"]
    with pytest.raises(DataError, match="--text_column"):
        run(ASR, base + ["--train_file", str(speech_corpus / "train.jsonl"), "--text_column", "transcript"])
    with pytest.raises(DataError, match="not found"):
        run(ASR, base + ["--train_file", str(speech_corpus / "nope.jsonl")])
    with pytest.raises(DataError, match="--domain_column"):
        run(ST, base + ["--train_file", str(speech_corpus / "train.jsonl"), "--task_type", "domain",
                            "--domain_column", "corpus"])
    assert not (out / "model.safetensors").exists()
    shutil.rmtree(out, ignore_errors=True)


def test_mt_adapter_baseline_upcycled_from_a_stock_checkpoint(text_corpus, tmp_path):
    rows = [json.loads(line) for line in (text_corpus / "train.jsonl").read_text().splitlines()]
    tokenizer = train_marian_tokenizer([row["source"] for row in rows] + [row["target"] for row in rows], 60)
    size = len(tokenizer)
    stock = MarianMTModel(MarianConfig(
        vocab_size=size, decoder_vocab_size=size, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id))
    stock.save_pretrained(tmp_path / "stock")
    tokenizer.save_pretrained(tmp_path / "stock")
    out = tmp_path / "upcycled"
    flags = tiny_flags(out, speech=False, max_steps=2)
    flags.remove("--config_overrides")
    flags.remove(TINY_TEXT)
    run(MT, flags + ["--model_name_or_path", str(tmp_path / "stock"), "--train_file",
                         str(text_corpus / "train.jsonl"), "--task_adapter_dim", "8", "--train_only_adapters",
                         "--do_train"])
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert isinstance(model, hf_headsel.HeadSelMarianMTModel)
    assert model.config.encoder_tasks == ["de", "en"] and model.config.total_encoder_attention_heads == 4
    # frozen: the stock weights, each stock head tiled into its group of candidates
    stock_q = stock.model.encoder.layers[0].self_attn.q_proj.weight
    torch.testing.assert_close(model.model.encoder.layers[0].self_attn.q_proj.weight, torch.cat([stock_q, stock_q]))
    torch.testing.assert_close(model.model.encoder.layers[0].fc1.weight, stock.model.encoder.layers[0].fc1.weight)
    # trained: the adapters (their up-projections start at zero)
    assert model.model.encoder.layers[0].task_adapter.up_weight.abs().sum() > 0


def test_a_resumed_run_keeps_its_early_stopping_patience(text_corpus, tmp_path):
    # Transformers restores callback states only when asked: the resumed run counted its patience from 0 again
    def stopped_at(out, *extra):
        return run(MT, tiny_flags(out, speech=False, max_steps=8) + [
            "--train_file", str(text_corpus / "train.jsonl"), "--validation_file", str(text_corpus / "dev.jsonl"),
            "--learning_rate", "0", "--eval_strategy", "steps", "--eval_steps", "1", "--save_strategy", "steps",
            "--save_steps", "1", "--early_stopping_patience", "2", "--do_train", *extra]).trainer.state.global_step

    uninterrupted = stopped_at(tmp_path / "whole")
    assert uninterrupted == 3  # no improvement at the 2nd and 3rd evaluations
    shutil.rmtree(tmp_path / "whole" / "checkpoint-3")  # the run interrupted after step 2
    assert stopped_at(tmp_path / "whole", "--resume_from_checkpoint", "last") == uninterrupted


def test_averaging_takes_this_runs_checkpoints_only(text_corpus, tmp_path):
    # resumed from an earlier step, a run averaged the abandoned continuation's later checkpoints; resumed from
    # another folder's checkpoint into a used folder, it would average that folder's run
    out = tmp_path / "run"
    common = ["--train_file", str(text_corpus / "train.jsonl"), "--save_strategy", "steps", "--save_steps", "2",
              "--do_train"]
    run(MT, tiny_flags(out, speech=False, max_steps=8) + common)
    run(MT, tiny_flags(out, speech=False, max_steps=6) + common + [
        "--resume_from_checkpoint", str(out / "checkpoint-4"), "--average_last_n", "2"])
    assert json.loads((out / "averaged_checkpoints.json").read_text()) == ["checkpoint-4", "checkpoint-6"]
    (tmp_path / "other" / "checkpoint-8").mkdir(parents=True)  # another run's, in the folder resumed into
    with pytest.raises(ValueError, match=r"holds an earlier run's checkpoint-8, which this run \(from .*checkpoint-2\)"):
        run(MT, tiny_flags(tmp_path / "other", speech=False, max_steps=4) + common + [
            "--resume_from_checkpoint", str(out / "checkpoint-2"), "--tokenizer_name", str(out)])


def test_early_stopping_on_the_task_score(text_corpus, tmp_path):
    out = tmp_path / "early"
    result = run(MT, tiny_flags(out, speech=False, max_steps=6) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--validation_file", str(text_corpus / "dev.jsonl"),
        "--learning_rate", "0", "--eval_strategy", "steps", "--eval_steps", "1", "--early_stopping_patience", "1",
        "--do_train"])
    evaluations = [entry for entry in result.trainer.state.log_history if "eval_bleu" in entry]
    assert result.trainer.state.global_step == 2 and len(evaluations) >= 2  # no improvement at the 2nd evaluation
    assert {"eval_bleu_en-de", "eval_bleu_de-en"} <= set(evaluations[0])


def test_length_grouped_training_still_evaluates_in_order(text_corpus, tmp_path):
    """`group_by_length` reorders evaluation batches too in Transformers 5; the recipe evaluates in split order, so
    its order check (predictions matched with references and tasks by position) passes and scores are right."""
    out = tmp_path / "grouped"
    result = run(MT, tiny_flags(out, speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--validation_file", str(text_corpus / "dev.jsonl"),
        "--train_sampling_strategy", "group_by_length", "--do_train", "--do_eval"])
    assert {"eval_bleu_en-de", "eval_bleu_de-en"} <= set(result.metrics["eval"])


def test_asr_task_tag_tells_the_shared_model_the_language(speech_corpus, tmp_path):
    out = tmp_path / "asr_tagged"
    args = tiny_flags(out, speech=True) + [
        "--train_file", str(speech_corpus / "train.jsonl"), "--test_file", str(speech_corpus / "dev.jsonl"),
        "--shared_baseline", "--task_tag", "--encoder_tasks", "es,fr", "--decoder_tasks", "es,fr",
        "--do_train", "--do_predict",
    ]
    result = run(ASR, args)
    tokenizer = result.trainer.processing_class.tokenizer
    tags = {lang: tokenizer.convert_tokens_to_ids(f"<lang:{lang}>") for lang in ("es", "fr")}
    assert tokenizer.unk_token_id not in tags.values()
    # every training target starts with its language's tag
    train = result.trainer.train_dataset
    first = {tags[("es", "fr")[task]] for task in train["decoder_task_ids"]}
    assert {int(labels[0]) for labels in train["labels"]} == first
    # scored with the tag forced (test_components checks the forcing itself)
    predictions = [json.loads(line) for line in (out / "generated_predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 6 and "predict_wer" in read_json(out / "predict_results.json")


def test_mt_encoder_task_tag_tells_the_shared_model_the_source_language(text_corpus, tmp_path):
    """Many-to-one MT: `--encoder_task_tag` puts the source language's tag, a whole piece, first in every source, so
    a shared model reads what head selection routes the encoder by; the tag is the encoder task of each example."""
    out = tmp_path / "mt_tagged"
    result = run(MT, tiny_flags(out, speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--test_file", str(text_corpus / "test.jsonl"),
        "--shared_baseline", "--encoder_task_tag", "--do_train", "--do_predict"])
    tokenizer = result.trainer.processing_class
    encoder_tasks = ["de", "en"]
    tags = [tokenizer.convert_tokens_to_ids(f"<lang:{lang}>") for lang in encoder_tasks]
    assert tokenizer.unk_token_id not in tags and len(set(tags)) == 2
    train = result.trainer.train_dataset
    assert sorted(set(train["encoder_task_ids"])) == [0, 1]
    assert [int(ids[0]) for ids in train["input_ids"]] == [tags[task] for task in train["encoder_task_ids"]]
    # the rest of each source is the untagged tokenization: one id longer than without the flag
    untagged = run(MT, tiny_flags(tmp_path / "mt_untagged", speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--tokenizer_name", str(out), "--shared_baseline",
        "--do_train"]).trainer.train_dataset
    assert [list(ids[1:]) for ids in train["input_ids"]] == [list(ids) for ids in untagged["input_ids"]]
    assert "predict_bleu" in read_json(out / "predict_results.json")


def test_encoder_task_tag_needs_its_tags_and_a_text_recipe(text_corpus, speech_corpus, tmp_path):
    untagged = tmp_path / "untagged"
    run(MT, tiny_flags(untagged, speech=False) + ["--train_file", str(text_corpus / "train.jsonl"), "--do_train"])
    with pytest.raises(ValueError, match="--encoder_task_tag: the tokenizer has no piece for"):
        run(MT, tiny_flags(tmp_path / "mt", speech=False) + [
            "--train_file", str(text_corpus / "train.jsonl"), "--tokenizer_name", str(untagged),
            "--encoder_task_tag", "--do_train"])
    with pytest.raises(ValueError, match="--encoder_task_tag is for MT"):
        run(ASR, tiny_flags(tmp_path / "asr", speech=True) + [
            "--train_file", str(speech_corpus / "train.jsonl"), "--encoder_task_tag", "--do_train"])


def test_task_tag_is_refused_for_mt(text_corpus, tmp_path):
    args = tiny_flags(tmp_path / "mt", speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--task_tag", "--do_train"]
    with pytest.raises(ValueError, match="target_lang_token"):
        run(MT, args)


def headsel_mt_checkpoint(folder) -> str:
    """A trained head-selection MT model of `text_rows`' tasks, its weights only (no tokenizer)."""
    config = hf_headsel.HeadSelMarianConfig(**TINY_MARIAN, encoder_tasks=["de", "en"], decoder_tasks=["de", "en", "fr"])
    hf_headsel.HeadSelMarianMTModel(config).save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("flags, message", [
    (["--encoder_tasks", "en"], "was trained with encoder tasks ['de', 'en']; --encoder_tasks ['en'] differs"),
    # the same tasks in another order: a task's selection and embeddings are the rows at its position
    (["--decoder_tasks", "fr,de,en"],
     "was trained with decoder tasks ['de', 'en', 'fr']; --decoder_tasks ['fr', 'de', 'en'] differs"),
    (["--task_type", "domain"], "was trained with task_type='lang', not 'domain'"),
], ids=["encoder-tasks", "decoder-task-order", "task-type"])
def test_continuing_a_trained_model_keeps_its_tasks(text_corpus, tmp_path, flags, message):
    checkpoint = headsel_mt_checkpoint(tmp_path / "trained")
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=re.escape(f"{checkpoint} {message}")):
        run(MT, tiny_flags(out, speech=False) + [
            "--model_name_or_path", checkpoint, "--train_file", str(text_corpus / "train.jsonl"), "--do_train", *flags])
    assert not has_tokenizer(str(out), speech=False) and not (out / "model.safetensors").exists()


@pytest.mark.parametrize("baseline", [["--shared_baseline"], []], ids=["shared-baseline", "upcycled"])
def test_scoring_a_stock_model_without_training_data_needs_the_tasks(text_corpus, tmp_path, baseline):
    # a stock checkpoint names no tasks, and no training data is read to find them in
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path / "stock")
    with pytest.raises(DataError, match="without training data, give the tasks: --encoder_tasks and --decoder_tasks"):
        run(MT, tiny_flags(tmp_path / "run", speech=False) + [
            "--model_name_or_path", str(tmp_path / "stock"), "--validation_file", str(text_corpus / "dev.jsonl"),
            "--do_eval", *baseline])


def test_a_checkpoint_without_its_tokenizer_needs_the_one_it_was_trained_with(text_corpus, tmp_path):
    """A tokenizer trained anew on the training data would give the checkpoint's embeddings other pieces."""
    checkpoint = headsel_mt_checkpoint(tmp_path / "trained")
    out = tmp_path / "run"
    with pytest.raises(DataError, match=re.escape(f"{checkpoint} holds no tokenizer: give the one it was trained with "
                                                  "(--tokenizer_name)")):
        run(MT, tiny_flags(out, speech=False) + [
            "--model_name_or_path", checkpoint, "--train_file", str(text_corpus / "train.jsonl"), "--do_train"])
    assert not has_tokenizer(str(out), speech=False)


def test_target_language_tokens_need_every_row_s_target_language(tmp_path):
    # with domain tasks the `>>xx<<` tokens are the rows' target languages: one row without it has no token
    rows = text_rows(12, seed=1)
    del rows[5]["target_lang"]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "run"
    with pytest.raises(DataError, match=re.escape("--target_lang_token: rows without a target language; give them "
                                                  "one (--target_lang_column or --target_lang)")):
        run(MT, tiny_flags(out, speech=False) + [
            "--train_file", str(train), "--task_type", "domain", "--target_lang_token", "--do_train"])
    assert not has_tokenizer(str(out), speech=False)  # refused before a tokenizer was trained


def test_a_split_whose_every_example_is_skipped_fails_before_training(text_corpus, tmp_path):
    dev = write_jsonl(tmp_path / "dev.jsonl", [dict(row, target="") for row in text_rows(4, seed=2)])
    out = tmp_path / "run"
    with pytest.raises(DataError, match=re.escape("every validation example was skipped: validation: kept 0 of 4 "
                                                  "examples; skipped 4: empty_target=4")):
        run(MT, tiny_flags(out, speech=False) + [
            "--train_file", str(text_corpus / "train.jsonl"), "--validation_file", str(dev), "--do_train",
            "--do_eval"])
    assert read_json(out / "data_report.json")["validation"]["skipped"] == {"empty_target": 4}  # why, in the folder
    assert not (out / "model.safetensors").exists()
    # the tokenizer it trained is gone with it: the corrected run trains in the same folder, no flag needed
    assert not has_tokenizer(str(out), speech=False)
    run(MT, tiny_flags(out, speech=False, max_steps=1) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--validation_file", str(text_corpus / "dev.jsonl"),
        "--do_train", "--do_eval"])
    assert (out / "model.safetensors").is_file()


def test_the_model_and_the_feature_extractor_must_agree_on_the_features_per_frame(speech_corpus, tmp_path):
    flags = tiny_flags(tmp_path / "run", speech=True)
    flags[flags.index("--config_overrides") + 1] += ",input_feat_per_channel=40"  # the feature extractor makes 80
    with pytest.raises(ValueError, match=re.escape(
            "the model reads 40 features per frame, the feature extractor makes 80: give the feature extractor the "
            "model was trained with (--feature_extractor_name), or a model that reads as many (--config_overrides "
            "input_feat_per_channel=...)")):
        run(ASR, flags + ["--train_file", str(speech_corpus / "train_clean.jsonl"), "--do_train"])
    assert not (tmp_path / "run" / "model.safetensors").exists()
    assert not has_tokenizer(str(tmp_path / "run"), speech=True)  # trained before the check, removed with the run


def test_averaging_fewer_checkpoints_than_asked_is_said(text_corpus, tmp_path, caplog):
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        run(MT, tiny_flags(out, speech=False, max_steps=2) + [
            "--train_file", str(text_corpus / "train.jsonl"), "--do_train", "--save_strategy", "steps",
            "--save_steps", "1", "--average_last_n", "3"])
    assert "--average_last_n 3: only 2 checkpoints to average" in caplog.text
    assert read_json(out / "averaged_checkpoints.json") == ["checkpoint-1", "checkpoint-2"]
    assert (out / "model.safetensors").is_file()
