# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Unit tests of the recipe components: audio, metrics, sampling, loss, schedule, arguments, model building."""

from __future__ import annotations

import io
import math
import re
import zipfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile
import torch
import torch.nn.functional as F
from datasets import Dataset
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, Speech2TextFeatureExtractor

from hf_headsel import HeadSelSpeech2TextConfig
from hf_headsel import HeadSelSpeech2TextForConditionalGeneration as HeadSelS2T
from headsel_recipes.arguments import DataArguments, HeadSelectionArguments, parse_arguments
from headsel_recipes.audio import AudioError, AudioInput, SpecAugment, extract_features, read_audio, resample
from headsel_recipes.collator import Seq2SeqCollator
from headsel_recipes.metrics import TaskMetrics, corpus_wer, normalize_for_wer
from headsel_recipes.modeling import (
    average_checkpoints,
    init_encoder_from,
    parse_config_overrides,
    scratch_config_keywords,
)
from headsel_recipes.recipe import schedule_callbacks
from headsel_recipes.sampling import TemperatureSampler, task_sampling_probabilities
from headsel_recipes.trainer import (
    HeadSelLoss,
    HeadSelSeq2SeqTrainer,
    NoiseScheduleCallback,
    TemperatureScheduleCallback,
    label_smoothed_nll,
    selection_logits,
    schedule_value,
)

# ---- audio --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [8000, 22050, 44100])
def test_resample_keeps_a_sine_and_features_are_computed_at_16khz(rate):
    t = np.arange(rate) / rate
    sine = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(sine, rate, 16000)
    assert out.shape == (16000,)
    expected = np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)
    assert np.abs(out - expected)[100:-100].max() < 2e-3
    # one second at any rate is the frames of one second at the extractor's rate: 25 ms windows every 10 ms
    features = extract_features(AudioInput(waveform=sine, sampling_rate=rate), Speech2TextFeatureExtractor())
    assert features.shape == ((16000 - 400) // 160 + 1, 80)


def _stored_zip_entry(zip_path, name):
    """`(offset, length)` of an uncompressed zip member's bytes, as fairseq manifests address them."""
    with zipfile.ZipFile(zip_path) as archive:
        info = archive.getinfo(name)
    with open(zip_path, "rb") as handle:
        handle.seek(info.header_offset + 26)
        name_length, extra_length = np.frombuffer(handle.read(4), dtype="<u2")
    return info.header_offset + 30 + int(name_length) + int(extra_length), info.file_size


def test_read_audio_fairseq_paths(tmp_path):
    waveform = np.sin(np.arange(1600) * 0.05).astype(np.float32) * 0.5
    soundfile.write(tmp_path / "a.wav", waveform, 16000, subtype="FLOAT")
    features = np.random.default_rng(0).standard_normal((30, 80)).astype(np.float32)
    np.save(tmp_path / "f.npy", features)
    wav_bytes, npy_bytes = io.BytesIO(), io.BytesIO()
    soundfile.write(wav_bytes, waveform, 16000, format="WAV", subtype="FLOAT")
    np.save(npy_bytes, features)
    with zipfile.ZipFile(tmp_path / "fbank.zip", "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("u1.npy", npy_bytes.getvalue())
        archive.writestr("u2.wav", wav_bytes.getvalue())

    plain = read_audio(str(tmp_path / "a.wav"))
    assert plain.sampling_rate == 16000 and np.allclose(plain.waveform, waveform)
    sliced = read_audio(f"{tmp_path / 'a.wav'}:100:200")
    assert np.allclose(sliced.waveform, waveform[100:300])
    assert np.array_equal(read_audio(str(tmp_path / "f.npy")).features, features)
    offset, length = _stored_zip_entry(tmp_path / "fbank.zip", "u1.npy")
    assert np.array_equal(read_audio(f"{tmp_path / 'fbank.zip'}:{offset}:{length}").features, features)
    offset, length = _stored_zip_entry(tmp_path / "fbank.zip", "u2.wav")
    assert np.allclose(read_audio(f"{tmp_path / 'fbank.zip'}:{offset}:{length}").waveform, waveform)
    assert np.allclose(read_audio({"bytes": wav_bytes.getvalue(), "path": None}).waveform, waveform)
    assert read_audio({"array": waveform, "sampling_rate": 8000}).duration == pytest.approx(0.2)
    for bad in (str(tmp_path / "missing.wav"), "", {"path": None, "bytes": None}, 3):
        with pytest.raises(AudioError):
            read_audio(bad)


def test_a_segment_of_a_file_in_a_folder_with_a_colon(tmp_path):
    # only the last two `:`-fields of a cell are the offset and the length
    folder = tmp_path / "take:2"
    folder.mkdir()
    waveform = np.sin(np.arange(1600) * 0.05).astype(np.float32)
    soundfile.write(folder / "a.wav", waveform, 16000, subtype="FLOAT")
    assert np.allclose(read_audio(f"{folder / 'a.wav'}:100:200").waveform, waveform[100:300])
    assert np.allclose(read_audio(str(folder / "a.wav")).waveform, waveform)


def test_a_segment_must_lie_inside_its_file(tmp_path):
    # cut short, a segment would no longer match its transcript; an offset on a `.npy` (one utterance's features)
    # was ignored: each is an unreadable row, skipped and counted
    soundfile.write(tmp_path / "a.wav", np.zeros(1600, np.float32), 16000)
    np.save(tmp_path / "f.npy", np.zeros((30, 80), np.float32))
    with zipfile.ZipFile(tmp_path / "fbank.ZIP", "w", zipfile.ZIP_STORED) as archive:  # any case of the suffix
        archive.writestr("u1.npy", (tmp_path / "f.npy").read_bytes())
    offset, length = _stored_zip_entry(tmp_path / "fbank.ZIP", "u1.npy")
    assert read_audio(f"{tmp_path / 'fbank.ZIP'}:{offset}:{length}").features.shape == (30, 80)
    assert read_audio(f"{tmp_path / 'a.wav'}:800:800").waveform.shape == (800,)  # up to the file's end
    size = (tmp_path / "fbank.ZIP").stat().st_size
    for cell, rule in [(f"{tmp_path / 'a.wav'}:800:1600", "runs past the end of the file \\(800 of 1600 frames"),
                       (f"{tmp_path / 'a.wav'}:801:800", "\\(799 of 800 frames"),  # short by its last frame
                       (f"{tmp_path / 'fbank.ZIP'}:{size - 10}:{length}", f"\\(10 of {length} bytes"),
                       (f"{tmp_path / 'f.npy'}:0:10", "a .npy file holds one utterance's features")]:
        with pytest.raises(AudioError, match=rule):
            read_audio(cell)


def test_stereo_audio_is_downmixed_decoded_in_either_layout_or_encoded():
    left, right = np.linspace(-0.5, 0.5, 16000, dtype=np.float32), np.full(16000, 0.25, np.float32)
    mono = (left + right) / 2
    encoded = io.BytesIO()  # a `datasets.Audio` cell's bytes
    soundfile.write(encoded, np.stack([left, right], axis=1), 16000, format="WAV", subtype="FLOAT")
    cells = [{"array": np.stack([left, right]), "sampling_rate": 16000},  # `datasets`' layout
             {"array": np.stack([left, right], axis=1), "sampling_rate": 16000},  # soundfile's
             {"bytes": encoded.getvalue(), "path": None}]
    for cell in cells:
        audio = read_audio(cell)
        assert audio.waveform.shape == (16000,) and np.allclose(audio.waveform, mono)


def test_audio_shorter_than_one_analysis_window_has_no_frames():
    extractor = Speech2TextFeatureExtractor()
    for samples in (50, 239, 399):  # the stock extractor raises below 240 samples, gives no frame below 400
        audio = AudioInput(waveform=np.full(samples, 0.1, np.float32), sampling_rate=16000)
        assert extract_features(audio, extractor).shape == (0, extractor.feature_size)
    one_frame = AudioInput(waveform=np.sin(np.arange(400) * 0.3).astype(np.float32), sampling_rate=16000)
    assert extract_features(one_frame, extractor).shape == (1, extractor.feature_size)


def test_precomputed_features_get_the_utterance_normalization():
    # stored fbank features (fairseq's are unnormalized) are mean/variance normalized per utterance, as extracted ones
    stored = (5.0 + 3.0 * np.random.default_rng(0).standard_normal((120, 80))).astype(np.float32)
    features = extract_features(AudioInput(features=stored), Speech2TextFeatureExtractor())
    assert np.allclose(features.mean(axis=0), 0.0, atol=1e-4) and np.allclose(features.std(axis=0), 1.0, atol=1e-3)


def test_spec_augment_masks_within_valid_frames():
    torch.manual_seed(0)
    features = torch.ones(3, 50, 20)
    lengths = torch.tensor([50, 30, 10])
    features[1, 30:] = 7.0  # padding must stay untouched
    features[2, 10:] = 7.0
    masked = SpecAugment(freq_mask_num=2, freq_mask_width=5, time_mask_num=2, time_mask_width=8,
                         time_mask_ratio=0.5)(features, lengths)
    assert masked.shape == features.shape and (masked == 0).any()
    assert torch.equal(masked[1, 30:], features[1, 30:]) and torch.equal(masked[2, 10:], features[2, 10:])
    assert torch.equal(features[0], torch.ones(50, 20))  # input not modified
    masked_frames = (masked[2, :10] == 0).all(dim=1).sum()  # time masks: at most 2 x min(8, 0.5 * 10) frames
    assert masked_frames <= 10


def test_spec_augment_time_masks_stay_within_a_fractional_cap():
    torch.manual_seed(0)
    lengths = torch.full((400,), 7)  # cap min(100, 0.2 x 7) = 1.4 frames: each of 2 masks is 0 or 1 frame wide
    masked = SpecAugment(freq_mask_num=0, time_mask_num=2, time_mask_ratio=0.2)(torch.ones(400, 7, 4), lengths)
    assert (masked == 0).all(dim=2).sum(dim=1).max() <= 2


def test_spec_augment_time_masks_reach_every_valid_frame_and_their_full_width():
    # a span is 0 to time_mask_width frames wide (both included) and may end at the last valid frame, not beyond
    torch.manual_seed(0)
    features = torch.ones(2000, 12, 2)
    features[:, 10:] = 7.0
    masked = SpecAugment(freq_mask_num=0, time_mask_num=1, time_mask_width=3)(features, torch.full((2000,), 10))
    zero = (masked == 0).all(dim=2)
    assert zero[:, 0].any() and zero[:, 9].any() and not zero[:, 10:].any()
    assert set(zero.sum(dim=1).tolist()) == {0, 1, 2, 3}


def test_spec_augment_defaults_are_the_documented_policy():
    # training/README.md's flag row (fairseq's LD policy: 2 x 27 channels, 2 x 100 frames) is what `SpecAugment()`
    # in Python and a recipe run's default flags give
    readme = (Path(__file__).parents[2] / "training" / "README.md").read_text(encoding="utf-8")
    documented = {name: float(value) for name, value in re.findall(r"`--(\w+_mask_\w+) ([\d.]+)`", readme)}
    assert set(documented) == {"freq_mask_num", "freq_mask_width", "time_mask_num", "time_mask_width",
                               "time_mask_ratio"}
    flags = DataArguments()
    for policy in (SpecAugment(), flags):
        assert {name: getattr(policy, name) for name in documented} == documented


def test_collators_pad_and_augment_only_training_batches():
    examples = [{"input_features": np.ones((5, 4), np.float32), "labels": [5, 2], "encoder_task_ids": 1,
                 "decoder_task_ids": 0},
                {"input_features": np.ones((3, 4), np.float32), "labels": [6, 7, 2], "encoder_task_ids": 0,
                 "decoder_task_ids": 1}]
    batch = Seq2SeqCollator(speech=True, pad_token_id=1)(examples)
    assert batch["input_features"].shape == (2, 5, 4) and batch["attention_mask"].tolist()[1] == [1, 1, 1, 0, 0]
    assert batch["labels"].tolist() == [[5, 2, -100], [6, 7, 2]]
    assert batch["encoder_task_ids"].tolist() == [1, 0] and batch["decoder_task_ids"].tolist() == [0, 1]
    assert torch.equal(batch["input_features"][0], torch.ones(5, 4))
    torch.manual_seed(0)
    augmented = Seq2SeqCollator(True, 1, spec_augment=SpecAugment(2, 2, 2, 2))(examples)
    assert (augmented["input_features"] == 0).any()
    baseline = Seq2SeqCollator(False, 9, with_task_ids=False)([{"input_ids": [4, 5, 6], "labels": [1]},
                                                              {"input_ids": [4], "labels": [1, 2]}])
    assert baseline["input_ids"].tolist() == [[4, 5, 6], [4, 9, 9]] and "encoder_task_ids" not in baseline


def test_spec_augment_is_given_each_examples_own_length():
    # masks are drawn within the lengths given: the padded length puts a short utterance's masks partly on padding
    # (it is masked less than a long one) or all of it under one mask
    seen = []

    def spec_augment(features, lengths):
        seen.append(lengths.tolist())
        return features

    Seq2SeqCollator(True, 1, spec_augment=spec_augment)([
        {"input_features": np.ones((frames, 4), np.float32), "labels": [2], "encoder_task_ids": 0,
         "decoder_task_ids": 0} for frames in (5, 3)])
    assert seen == [[5, 3]]


# ---- metrics ------------------------------------------------------------------------------------------------------


def test_wer_normalization_and_scores():
    assert normalize_for_wer("  ¡Hola, Mundo!  ¿Qué tal?") == "hola mundo qué tal"
    assert corpus_wer(["Hello, world.", "a b c d"], ["hello world", "a x c"]) == pytest.approx(100 * 2 / 6)
    assert corpus_wer(["the cat"], [""]) == 100.0


def test_task_metrics_per_group_and_order_check():
    tokenizer = SimpleNamespace(pad_token_id=0, batch_decode=lambda ids, skip_special_tokens: [
        " ".join(str(int(i)) for i in row if i > 0) for row in ids])
    metrics = TaskMetrics(tokenizer, "wer")
    metrics.use(["es", "fr", "es"], ["1 2", "3 4", "5 6"], label_lengths=[2, 2, 3])
    predictions = np.array([[1, 2, 0], [3, 9, 0], [5, 6, 0], [7, 7, 7]])  # a 4th, padded duplicate is dropped
    labels = np.array([[1, 2, -100], [3, 4, -100], [5, 6, 2], [1, 2, -100]])
    scores = metrics(SimpleNamespace(predictions=predictions, label_ids=labels))
    assert scores == {"wer_es": 0.0, "wer_fr": 50.0, "wer": 25.0, "wer_pooled": pytest.approx(16.67), "unusable": 0.0}
    assert metrics.last_hypotheses == ["1 2", "3 9", "5 6"]
    with pytest.raises(ValueError, match="in order"):
        metrics(SimpleNamespace(predictions=predictions, label_ids=labels[[1, 2, 0, 3]]))
    bleu = TaskMetrics(tokenizer, "bleu")
    bleu.use(["en-de"], ["1 2 3 4"])
    assert bleu(SimpleNamespace(predictions=np.array([[1, 2, 3, 4]]), label_ids=None))["bleu_en-de"] == 100.0
    bleu.use(["en-de", "en-de", "en-de", "en-de"], ["1 2", "3 4", "5 6", "7 8"])
    looping = np.array([[0, 0, 0, 0], [3, 3, 3, 3], [5, 6, 0, 0], [7, 8, 0, 0]])  # nothing, one word four times
    assert bleu(SimpleNamespace(predictions=looping, label_ids=None))["unusable"] == 0.5


# ---- sampling -----------------------------------------------------------------------------------------------------


def test_temperature_sampling():
    assert task_sampling_probabilities({"a": 90, "b": 10}, 1.0) == pytest.approx({"a": 0.9, "b": 0.1})
    assert task_sampling_probabilities({"a": 90, "b": 10}, 0.5) == pytest.approx({"a": 0.75, "b": 0.25})
    assert task_sampling_probabilities({"a": 90, "b": 10}, 0.0) == pytest.approx({"a": 0.5, "b": 0.5})
    groups = ["a"] * 90 + ["b"] * 10
    sampler = TemperatureSampler(groups, alpha=0.5, seed=3, num_samples=20000)
    draws = list(sampler)
    assert len(draws) == len(sampler) == 20000 and Counter(groups[i] for i in draws)["b"] / 20000 == pytest.approx(
        0.25, abs=0.02)
    assert set(i for i in draws if groups[i] == "b") == set(range(90, 100))  # uniform within a task
    assert list(sampler) == draws  # deterministic for an epoch
    sampler.set_epoch(1)
    assert list(sampler) != draws


# ---- loss and schedule --------------------------------------------------------------------------------------------


def test_label_smoothed_loss_and_kl_term():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    labels[1, 3:] = -100
    assert torch.allclose(label_smoothed_nll(logits, labels, 0.0), F.cross_entropy(logits.transpose(1, 2), labels))
    log_probs, mask = logits.log_softmax(-1), labels != -100
    nll = -log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    expected = ((1 - 0.1 - 0.01) * nll - 0.01 * log_probs.sum(-1))[mask].mean()  # fairseq, eps_i = 0.1 / 10
    assert torch.allclose(label_smoothed_nll(logits, labels, 0.1), expected)
    model = SimpleNamespace(config=SimpleNamespace(head_selection_kl_weight=0.5))
    kl = torch.tensor(0.8)
    loss = HeadSelLoss(0.1, model)({"logits": logits, "head_selection_kl": kl}, labels)
    assert torch.allclose(loss, expected + 0.4)


def test_temperature_schedules():
    assert schedule_value(0, 5, 5.0, 1.0, "linear") == 5.0
    assert schedule_value(4, 5, 5.0, 1.0, "linear") == 1.0
    assert schedule_value(2, 5, 5.0, 1.0, "linear") == pytest.approx(3.0)
    assert schedule_value(2, 5, 4.0, 1.0, "exponential") == pytest.approx(2.0)
    assert schedule_value(3, 5, 5.0, 1.0, "constant") == 5.0
    with pytest.raises(ValueError, match="schedule"):
        TemperatureScheduleCallback(5.0, 1.0, "cosine")
    for start, end in ((5.0, 0.0), (0.0, 1.0), (5.0, -1.0)):  # a division by the temperature
        with pytest.raises(ValueError, match=f"temperatures must be > 0, got {start} -> {end}"):
            TemperatureScheduleCallback(start, end, "linear")
    model = SimpleNamespace(config=SimpleNamespace(head_selection_temperature=5.0))
    TemperatureScheduleCallback(5.0, 1.0, "linear").on_step_begin(
        None, SimpleNamespace(global_step=2, max_steps=5), None, model=model)
    assert model.config.head_selection_temperature == pytest.approx(3.0)


def test_noise_schedule_anneals_the_noise_scale_to_zero():
    model = SimpleNamespace(config=SimpleNamespace(head_selection_noise_scale=1.0))
    callback = NoiseScheduleCallback(1.0, 0.0, "linear")
    for step, expected in ((0, 1.0), (2, 0.5), (4, 0.0)):
        callback.on_step_begin(None, SimpleNamespace(global_step=step, max_steps=5), None, model=model)
        assert model.config.head_selection_noise_scale == pytest.approx(expected)
    with pytest.raises(ValueError, match=">= 0"):
        NoiseScheduleCallback(1.0, -0.5)
    with pytest.raises(ValueError, match="exponential"):
        NoiseScheduleCallback(1.0, 0.0, "exponential")  # cannot reach 0


def test_schedule_callbacks_follow_the_flags():
    config = SimpleNamespace(head_selection_temperature=5.0, head_selection_noise_scale=1.0)
    flags = SimpleNamespace(temperature_schedule="constant", final_temperature=None, noise_schedule="linear",
                            final_noise_scale=0.0)
    (callback,) = schedule_callbacks(config, flags)
    assert isinstance(callback, NoiseScheduleCallback) and (callback.start, callback.end) == (1.0, 0.0)
    flags.noise_schedule, flags.temperature_schedule = "constant", "linear"
    with pytest.raises(ValueError, match="--temperature_schedule needs --final_temperature"):
        schedule_callbacks(config, flags)
    flags.temperature_schedule, flags.noise_schedule, flags.final_noise_scale = "constant", "linear", None
    with pytest.raises(ValueError, match="--noise_schedule needs --final_noise_scale"):
        schedule_callbacks(config, flags)


# ---- arguments ----------------------------------------------------------------------------------------------------


def test_arguments_flags_lists_and_defaults(tmp_path):
    model_args, head_args, data_args, training_args = parse_arguments([
        "--output_dir", str(tmp_path), "--encoder_tasks", "es,fr", "it", "--train_file", "a.jsonl,,b.jsonl,",
        "--no_spec_augment", "--head_selection_components", "encoder_self", "decoder_cross"])  # empty items dropped
    assert head_args.encoder_tasks == ["es", "fr", "it"] and data_args.train_file == ["a.jsonl", "b.jsonl"]
    assert head_args.head_selection_components == ["encoder_self", "decoder_cross"]
    assert not data_args.spec_augment and head_args.task_type is None
    assert training_args.predict_with_generate and training_args.label_smoothing_factor == 0.1
    assert not training_args.remove_unused_columns and training_args.ddp_find_unused_parameters is False
    (tmp_path / "c.json").write_text('{"output_dir": "%s", "label_smoothing_factor": 0.0, "save_strategy": "no"}'
                                     % tmp_path)
    assert parse_arguments([str(tmp_path / "c.json")])[3].label_smoothing_factor == 0.0
    assert parse_config_overrides("d_model=64, dropout=0.0,activation_function=gelu,scale_embedding=false") == {
        "d_model": 64, "dropout": 0.0, "activation_function": "gelu", "scale_embedding": False}
    with pytest.raises(ValueError, match="key=value"):
        parse_config_overrides("d_model")
    assert HeadSelectionArguments().temperature_schedule == "constant"


# ---- model building -----------------------------------------------------------------------------------------------

def test_models_from_scratch_initialise_with_fairseq_scale():
    keywords = scratch_config_keywords({"d_model": 64, "vocab_size": 100})
    assert keywords["init_std"] == 0.125
    assert scratch_config_keywords({"d_model": 64, "init_std": 0.02})["init_std"] == 0.02  # a user's value wins
    model = HeadSelS2T(HeadSelSpeech2TextConfig(**{**keywords, "encoder_layers": 1, "decoder_layers": 1,
                                                    "encoder_ffn_dim": 32, "decoder_ffn_dim": 32}))
    assert model.model.decoder.embed_tokens.weight.std().item() == pytest.approx(0.125, rel=0.1)


def test_init_encoder_from_copies_encoder_and_selector_rows(tmp_path):
    common = dict(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, conv_channels=8,
                  input_feat_per_channel=20)
    asr = HeadSelS2T(HeadSelSpeech2TextConfig(**common, encoder_tasks=["fr", "es"], decoder_tasks=["fr", "es"]))
    asr.save_pretrained(tmp_path / "asr")
    st = HeadSelS2T(HeadSelSpeech2TextConfig(**{**common, "vocab_size": 50}, encoder_tasks=["es", "it"],
                                             decoder_tasks=["en"]))
    copied = init_encoder_from(st, str(tmp_path / "asr"))
    assert copied > 5
    for name, value in asr.model.encoder.state_dict().items():
        torch.testing.assert_close(st.model.encoder.state_dict()[name], value)
    source, target = asr.head_selection["encoder_self"].logits, st.head_selection["encoder_self"].logits
    torch.testing.assert_close(target[0], source[1])  # "es" by name
    assert not torch.equal(target[1], source[0])  # "it" is new: left as initialised
    decoder = HeadSelS2T(HeadSelSpeech2TextConfig(**{**common, "d_model": 32}, encoder_tasks=["es"]))
    with pytest.raises(ValueError, match="shape"):
        init_encoder_from(decoder, str(tmp_path / "asr"))


@pytest.mark.parametrize("per_task", [dict(head_selection_strategy="task_specific"),
                                      dict(task_adapter_dim=4, task_adapter_key="task")], ids=["heads", "adapters"])
def test_init_encoder_from_refuses_per_task_weights_of_other_tasks(tmp_path, per_task):
    # the same shapes for [de, en] and [en, fr]: block by block, "en" started from "de"'s heads or adapter
    common = dict(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, conv_channels=8,
                  input_feat_per_channel=20, decoder_tasks=["en"])
    HeadSelS2T(HeadSelSpeech2TextConfig(**common, **per_task, encoder_tasks=["de", "en"])).save_pretrained(
        tmp_path / "asr")
    with pytest.raises(ValueError, match="holds weights per task"):
        init_encoder_from(HeadSelS2T(HeadSelSpeech2TextConfig(**common, **per_task, encoder_tasks=["en", "fr"])),
                          str(tmp_path / "asr"))
    # the same tasks in a model without per-task weights: the source's would be dropped without a word
    with pytest.raises(ValueError, match="holds weights per task"):
        init_encoder_from(HeadSelS2T(HeadSelSpeech2TextConfig(**common, encoder_tasks=["de", "en"])),
                          str(tmp_path / "asr"))
    assert init_encoder_from(HeadSelS2T(HeadSelSpeech2TextConfig(**common, **per_task, encoder_tasks=["de", "en"])),
                             str(tmp_path / "asr")) > 5  # the same tasks: copied


def test_init_encoder_from_passes_over_task_specific_heads_outside_the_encoder(tmp_path):
    # task-specific decoder heads: the encoder holds nothing per task, so other encoder tasks are no obstacle
    common = dict(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, conv_channels=8,
                  input_feat_per_channel=20, decoder_tasks=["en"], head_selection_strategy="task_specific",
                  head_selection_components=["decoder_self"])
    asr = HeadSelS2T(HeadSelSpeech2TextConfig(**common, encoder_tasks=["de", "en"]))
    asr.save_pretrained(tmp_path / "asr")
    st = HeadSelS2T(HeadSelSpeech2TextConfig(**common, encoder_tasks=["en", "fr"]))
    assert init_encoder_from(st, str(tmp_path / "asr")) > 5
    for name, value in asr.model.encoder.state_dict().items():
        torch.testing.assert_close(st.model.encoder.state_dict()[name], value)


def test_average_checkpoints(tmp_path):
    from safetensors.torch import save_file

    for step, value in ((1, 1.0), (2, 3.0)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        save_file({"w": torch.full((2,), value), "n": torch.tensor([step])},
                  tmp_path / f"checkpoint-{step}" / "model.safetensors")
    averaged = average_checkpoints([tmp_path / "checkpoint-1", tmp_path / "checkpoint-2"])
    assert averaged["w"].tolist() == [2.0, 2.0] and averaged["n"].tolist() == [2]


def _trainer(model, tmp_path, args: dict | None = None, **trainer_kwargs) -> HeadSelSeq2SeqTrainer:
    """A recipe Trainer on the CPU; `args`: more `Seq2SeqTrainingArguments`."""
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                    remove_unused_columns=False, **(args or {}))
    return HeadSelSeq2SeqTrainer(model=model, args=args, **trainer_kwargs)


def _optimizer_groups(model, tmp_path, **trainer_kwargs):
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), learning_rate=1e-3, weight_decay=0.01, warmup_steps=0,
                                    use_cpu=True, report_to="none")
    trainer = HeadSelSeq2SeqTrainer(model=model, args=args, **trainer_kwargs)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    return trainer.optimizer.param_groups


def test_distributed_evaluation_reads_the_split_in_order(marian, tmp_path, monkeypatch):
    # `group_by_length` made the stock Trainer sort distributed evaluation batches too: scores are matched with
    # references by position, so the order check failed after training
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                    train_sampling_strategy="group_by_length")
    trainer = HeadSelSeq2SeqTrainer(model=marian.model(), args=args)
    dataset = Dataset.from_dict({"input_ids": [[5] * n for n in (3, 40, 7, 25, 2, 60, 11, 5)]})
    assert list(trainer._get_eval_sampler(dataset)) == list(range(8))
    monkeypatch.setattr(Seq2SeqTrainingArguments, "world_size", property(lambda self: 2))
    assert trainer._get_eval_sampler(dataset) is None  # the stock distributed path: sharded in order


def test_the_task_sampler_is_told_the_epoch_it_runs(marian, tmp_path, monkeypatch):
    # a resumed distributed epoch's loader hides the sampler from every `set_epoch`: it replayed epoch 0's draws
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    trainer = HeadSelSeq2SeqTrainer(model=marian.model(), args=args, sampling_groups=["a", "a", "b"],
                                    sampling_alpha=0.5)
    sampler = trainer._get_train_sampler()
    seen = []
    monkeypatch.setattr(Seq2SeqTrainer, "_run_epoch", lambda self, **kwargs: seen.append(sampler.epoch))
    trainer._run_epoch(model=trainer.model, epoch=3)
    assert seen == [3]


def test_task_sampling_draws_from_the_data_seed(marian, tmp_path):
    # --data_seed fixes the data order apart from the initialisation (--seed), as the Trainer documents; without it
    # --seed does
    model, groups = marian.model(), ["a"] * 30 + ["b"] * 10

    def draws(**args):
        return list(_trainer(model, tmp_path, args, sampling_groups=groups, sampling_alpha=0.5)._get_train_sampler())

    assert draws(seed=0, data_seed=7) == draws(seed=1, data_seed=7) == draws(seed=7) != draws(seed=0, data_seed=8)
    assert len(draws(seed=0)) == len(groups)  # an epoch draws as many examples as the training set holds


def test_natural_task_proportions_read_every_example_once_per_epoch(marian, tmp_path):
    # --sampling_alpha 1 keeps the Trainer's shuffled sampler: a permutation, not draws with replacement
    data = Dataset.from_dict({"input_ids": [[index + 3] for index in range(40)]})
    trainer = _trainer(marian.model(), tmp_path, train_dataset=data, sampling_groups=["a"] * 30 + ["b"] * 10,
                       sampling_alpha=1.0)
    assert sorted(trainer._get_train_sampler()) == list(range(40))


def test_step_loss_is_the_step_token_mean_plus_the_batch_mean_kl():
    # each of 4 accumulated batches adds a quarter of its KL (the step's KL is the mean over its batches); each of 2
    # processes' losses is doubled, as their gradients are averaged while the token count (8) is the whole step's
    model = SimpleNamespace(config=SimpleNamespace(head_selection_kl_weight=1.0))
    trainer = SimpleNamespace(label_smoother=HeadSelLoss(0.0, model), current_gradient_accumulation_steps=4,
                              args=SimpleNamespace(average_tokens_across_devices=True, world_size=2),
                              accelerator=SimpleNamespace(num_processes=2))
    outputs = {"logits": torch.zeros(1, 2, 5), "head_selection_kl": torch.tensor(2.0)}  # uniform over 5 tokens
    loss = HeadSelSeq2SeqTrainer.step_loss(trainer, outputs, torch.tensor([[1, 2]]), 8)
    assert float(loss) == pytest.approx(2 * (2 * math.log(5) / 8) + 2.0 / 4)


def test_training_batches_get_the_train_collator_and_evaluation_batches_their_own(marian, tmp_path):
    # SpecAugment lives in the train collator and the task-tag prefix in the evaluation one: either serving the
    # other's batches trains without augmentation or scores without the prefix, silently
    data = Dataset.from_dict({"input_ids": [[5, 6], [7]], "labels": [[9, 2], [2]]})
    trainer = _trainer(marian.model(), tmp_path, train_dataset=data, eval_dataset=data,
                       train_collator=Seq2SeqCollator(False, marian.pad_token_id, False),
                       data_collator=Seq2SeqCollator(False, marian.pad_token_id, False, decoder_prefix_start=1))
    assert "decoder_prefix_ids" not in next(iter(trainer.get_train_dataloader()))
    assert "decoder_prefix_ids" in next(iter(trainer.get_eval_dataloader()))


def test_selection_logits_get_their_own_learning_rate_and_weight_decay(marian, tmp_path):
    model = marian.model()
    logits = selection_logits(model)
    assert len(logits) == len(model.config.head_selection_components) and all(p.dim() == 3 for p in logits)
    groups = _optimizer_groups(model, tmp_path, selection_learning_rate=0.02, selection_weight_decay=0.5)
    # Every trainable parameter is optimised exactly once; the logits only in their own group.
    optimised = [id(p) for group in groups for p in group["params"]]
    assert sorted(optimised) == sorted(id(p) for p in model.parameters() if p.requires_grad)
    (selection_group,) = [g for g in groups if any(p is logits[0] for p in g["params"])]
    assert {id(p) for p in selection_group["params"]} == {id(p) for p in logits}
    assert (selection_group["initial_lr"], selection_group["weight_decay"]) == (0.02, 0.5)
    assert {g["initial_lr"] for g in groups if g is not selection_group} == {1e-3}
    # Default: the run's learning rate, no weight decay on the logits.
    groups = _optimizer_groups(marian.model(), tmp_path)
    assert (groups[-1]["initial_lr"], groups[-1]["weight_decay"]) == (1e-3, 0.0)
    # The stock model has no logits: the Trainer's own groups.
    assert len(_optimizer_groups(marian.stock_model(), tmp_path)) == 2
    with pytest.raises(ValueError, match="head_selection_learning_rate"):
        _optimizer_groups(marian.model(), tmp_path, selection_learning_rate=-1e-3)
    with pytest.raises(ValueError, match="--head_selection_weight_decay must be >= 0, got -0.5"):
        _optimizer_groups(marian.model(), tmp_path, selection_weight_decay=-0.5)


def test_a_zero_selection_learning_rate_freezes_the_logits_and_trains_the_rest(marian, tmp_path):
    model = marian.model()
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), learning_rate=1e-2, warmup_steps=0, use_cpu=True,
                                    report_to="none")
    trainer = HeadSelSeq2SeqTrainer(model=model, args=args, selection_learning_rate=0.0)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    trainer.optimizer.step()
    logit_names = {name for name, p in model.named_parameters() if any(p is q for q in selection_logits(model))}
    assert logit_names and all(torch.equal(model.get_parameter(n), before[n]) for n in logit_names)
    assert any(not torch.equal(p, before[n]) for n, p in model.named_parameters() if n not in logit_names)


def test_evaluation_batches_carry_the_task_tag_prefix_and_generation_is_forced_to_it(marian, tmp_path):
    examples = [{"input_ids": [5, 6, 0], "labels": [9, 7, 0], "encoder_task_ids": 0, "decoder_task_ids": 0},
                {"input_ids": [6, 0], "labels": [8, 0], "encoder_task_ids": 0, "decoder_task_ids": 1}]
    model = marian.stock_model().eval()
    start = model.config.decoder_start_token_id
    batch = Seq2SeqCollator(False, marian.pad_token_id, False, decoder_prefix_start=start)(examples)
    assert batch["decoder_prefix_ids"].tolist() == [[start, 9], [start, 8]]
    assert "decoder_prefix_ids" not in Seq2SeqCollator(False, marian.pad_token_id, False)(examples)

    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), predict_with_generate=True, use_cpu=True,
                                    report_to="none", generation_max_length=6, generation_num_beams=1)
    trainer = HeadSelSeq2SeqTrainer(model=model, args=args)
    prefix = batch["decoder_prefix_ids"].clone()
    _, generated, _ = trainer.prediction_step(model, dict(batch), prediction_loss_only=False, max_length=6,
                                              num_beams=1)
    expected = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              decoder_input_ids=prefix, max_length=6, num_beams=1)
    assert torch.equal(generated[:, 0], expected[:, 0])
    assert (generated[:, 1] == model.config.pad_token_id).all()  # the tag is not part of the scored text
    torch.testing.assert_close(generated[:, 2:expected.shape[1]], expected[:, 2:])


def test_task_tag_generation_keeps_the_generation_flags(marian, tmp_path):
    # with --task_tag, generation is given the prefix as one more keyword: --generation_max_length and
    # --generation_num_beams must still apply, not the model's own generation config
    model = marian.stock_model().eval()
    model.generation_config.max_length = 30
    collator = Seq2SeqCollator(False, marian.pad_token_id, False,
                               decoder_prefix_start=model.config.decoder_start_token_id)
    trainer = _trainer(model, tmp_path, dict(predict_with_generate=True, generation_max_length=5,
                                             generation_num_beams=1), data_collator=collator)
    output = trainer.predict(Dataset.from_dict({"input_ids": [[5, 6, 7, 0]], "labels": [[9, 7, 0]]}))
    assert (output.predictions[:, 5:] == marian.pad_token_id).all()  # padded to the model's max_length (30)
