# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The end of a recipe run: the model card in the output folder and `--push_to_hub` (to the recording Hub)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from huggingface_hub import ModelCard
from huggingface_hub import constants as hub_constants
from recipe_testkit import tiny_flags

from hf_headsel.hub import collect_metrics, eval_results
from headsel_recipes import run
from headsel_recipes.publishing import eval_dataset_labels
from headsel_recipes.tasks import MT


def mt_flags(text_corpus, out, *extra) -> list[str]:
    return tiny_flags(out, speech=False) + [
        "--train_file", str(text_corpus / "train.jsonl"), "--validation_file", str(text_corpus / "dev.jsonl"),
        "--do_train", "--do_eval", *extra,
    ]  # fmt: skip


def test_training_writes_the_card_and_pushes_once_at_the_end(text_corpus, tmp_path, hub, monkeypatch):
    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    out = tmp_path / "mt"
    # a name without a namespace: the Hub creates it under the token's user, and the card names the whole id
    result = run(MT, mt_flags(text_corpus, out, "--push_to_hub", "--hub_model_id", "mt-tiny",
                                  "--hub_token", "hf_fake", "--save_strategy", "steps", "--save_steps", "2"))

    card = ModelCard((out / "README.md").read_text())
    eval_results = json.loads((out / "eval_results.json").read_text())
    scores = {(r.dataset_config, r.metric_value) for r in card.data.eval_results}
    assert (None, eval_results["eval_bleu"]) in scores
    assert ("en-de", eval_results["eval_bleu_en-de"]) in scores
    assert "hf-headsel" in card.data.tags and "me/mt-tiny" in card.text
    # the scores are on the validation file, and the card names it (not the training data, nor the local path)
    assert {(r.dataset_name, r.dataset_split) for r in card.data.eval_results} == {("dev.jsonl", "validation")}
    assert "Dataset: dev.jsonl (validation)." in card.text and "train.jsonl" not in card.text
    # the analysis of the trained model sits beside it, and the card shows the head-sharing heatmap
    analysis = json.loads((out / "analysis.json").read_text())
    assert set(analysis["components"]) == {"encoder_self", "decoder_self"}
    assert analysis["stability"]["log"].endswith("head_selection_log.jsonl")
    assert "head_sharing_encoder_self.png" in card.text
    assert (out / "head_sharing_encoder_self.png").read_bytes().startswith(b"\x89PNG")

    assert hub.errors == [] and len(hub.commits) == 1  # once, at the end: the Trainer itself never pushed
    assert len(hub.created) == 1  # by the upload, once its checks passed (the card named the id before)
    assert hub.commits[0]["repo_id"] == "me/mt-tiny" and 'from_pretrained("me/mt-tiny"' in card.text
    files = hub.commits[0]["files"]
    assert files["README.md"] == (out / "README.md").read_bytes()
    assert files["model.safetensors"] == (out / "model.safetensors").read_bytes()
    assert {"modeling_head_selection.py", "modeling_headsel_marian.py", "tokenizer_config.json", "source.spm",
            "analysis.json", "head_sharing_decoder_self.png", "head_load_encoder_self.png"} <= set(files)
    assert not [name for name in files if name.startswith("checkpoint-")]
    # the Trainer pickles --hub_token into training_args.bin: it stays home, and no uploaded file holds the token
    assert (out / "training_args.bin").is_file() and "training_args.bin" not in files
    assert not [name for name, content in files.items() if b"hf_fake" in content]
    assert result.trainer.args.push_to_hub is False


def test_a_refused_upload_creates_no_repository(text_corpus, tmp_path, hub, monkeypatch):
    # the run's configuration in its folder holds the token (`headsel-train mt <folder>/run_config.json`): refused
    # before the repository is created (it was created first, then left empty)
    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    out = tmp_path / "mt"
    out.mkdir()
    (out / "run_config.json").write_text(json.dumps({"hub_token": "hf_fake"}))
    with pytest.raises(ValueError, match=r"\['run_config.json'\] in .* hold the Hub token"):
        run(MT, mt_flags(text_corpus, out, "--push_to_hub", "--hub_model_id", "mt-tiny", "--hub_token", "hf_fake"))
    assert hub.created == [] and hub.commits == []
    assert (out / "model.safetensors").is_file()  # the trained model is kept


def test_each_split_is_labelled_with_its_own_files():
    data_args = SimpleNamespace(dataset_name=None, manifest_dir=None, train_file=["data/train.jsonl"],
                                validation_file=["data/dev.jsonl"], test_file=["data/b.jsonl", "data/a.jsonl"])
    labels = eval_dataset_labels(data_args)
    assert labels == {"validation": "dev.jsonl", "test": "a.jsonl, b.jsonl"}
    records = collect_metrics({"eval_bleu_en-de": 30.0, "predict_bleu_en-de": 29.0})
    assert [(r.dataset_split, r.dataset_name) for r in eval_results(records, labels, "custom")] == [
        ("validation", "dev.jsonl"), ("test", "a.jsonl, b.jsonl")]
    manifests = SimpleNamespace(dataset_name=None, manifest_dir="/data/covost", train_file=["train"],
                                validation_file=["dev"], test_file=None)
    assert eval_dataset_labels(manifests) == {"validation": "covost/dev"}
    assert eval_dataset_labels(SimpleNamespace(dataset_name="europarl_st")) == "europarl_st"


def test_shared_baseline_gets_the_trainer_card(text_corpus, tmp_path):
    out = tmp_path / "shared"
    run(MT, mt_flags(text_corpus, out, "--shared_baseline"))
    card = (out / "README.md").read_text()
    assert "hf-headsel" not in card and "generated_from_trainer" in card
    assert "on the train.jsonl dataset" in card  # what it was trained on, not the validation file it was scored on


def test_push_without_training_is_refused_before_any_work(text_corpus, tmp_path):
    with pytest.raises(ValueError, match="--push_to_hub .* needs --do_train"):
        run(MT, tiny_flags(tmp_path / "x", speech=False) + [
            "--validation_file", str(text_corpus / "dev.jsonl"), "--do_eval", "--push_to_hub"])
    assert not (tmp_path / "x" / "README.md").exists()
