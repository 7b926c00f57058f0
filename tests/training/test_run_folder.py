# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""A training run into a used `--output_dir`: refused unless it continues the earlier run or starts over there."""

from __future__ import annotations

import json

import pytest
from recipe_testkit import tiny_flags

from headsel_recipes import run
from headsel_recipes.environment import ENVIRONMENT_LOG_NAME
from headsel_recipes.modeling import find_checkpoints
from headsel_recipes.run_folder import AVERAGED_CHECKPOINTS_NAME, clear_earlier_run, earlier_run
from headsel_recipes.tasks import MT
from hf_headsel.analysis import SELECTION_LOG_NAME


def checkpoint_names(folder) -> list[str]:
    return [path.name for path in find_checkpoints(str(folder))]


def environments(folder) -> list[dict]:
    """The records of the folder's environment.jsonl: one per invocation that trained or scored there."""
    return [json.loads(line) for line in (folder / ENVIRONMENT_LOG_NAME).read_text().splitlines()]


def test_checkpoints_of_an_earlier_run_are_refused_or_removed(text_corpus, tmp_path):
    out = tmp_path / "run"
    common = ["--train_file", str(text_corpus / "train.jsonl"), "--save_strategy", "steps", "--save_steps", "2",
              "--do_train"]
    first = run(MT, tiny_flags(out, speech=False, max_steps=4) + common)
    assert checkpoint_names(out) == ["checkpoint-2", "checkpoint-4"]
    saved = (out / "model.safetensors").stat().st_mtime_ns
    (trained,) = environments(out)
    assert trained["recipe"] == "mt" and trained["do_train"] and trained["resumed_from"] is None

    with pytest.raises(ValueError, match="holds an earlier run's checkpoint-2, checkpoint-4, tokenizer, which this "
                                         "run .from step 0. would take for its own"):
        run(MT, tiny_flags(out, speech=False, max_steps=2) + common)
    with pytest.raises(ValueError, match="--overwrite_output_dir starts over .* give one of them"):
        run(MT, tiny_flags(out, speech=False, max_steps=2) + common + [
            "--overwrite_output_dir", "--resume_from_checkpoint", "true"])
    assert (out / "model.safetensors").stat().st_mtime_ns == saved  # refused before any work
    assert environments(out) == [trained]  # and recorded none

    # Starting over: the 2-step run averages its own last checkpoint, not the earlier run's checkpoint-4, and
    # trains its own tokenizer on its flags (a smaller vocabulary) instead of reusing the folder's.
    again = run(MT, tiny_flags(out, speech=False, max_steps=2) + common + [
        "--overwrite_output_dir", "--vocab_size", "50", "--average_last_n", "1"])
    assert checkpoint_names(out) == ["checkpoint-2"]
    assert json.loads((out / AVERAGED_CHECKPOINTS_NAME).read_text()) == ["checkpoint-2"]
    assert len(again.trainer.processing_class) < len(first.trainer.processing_class)
    assert [json.loads(line)["step"] for line in (out / SELECTION_LOG_NAME).read_text().splitlines()] == [0, 1, 2]
    assert len(environments(out)) == 1  # the earlier run's record went with its checkpoints


def test_a_tokenizer_the_run_would_reuse_is_refused_unless_named_or_continued(text_corpus, tmp_path):
    out = tmp_path / "run"
    flags = tiny_flags(out, speech=False, max_steps=1) + ["--train_file", str(text_corpus / "train.jsonl"),
                                                          "--do_train"]
    run(MT, flags)
    with pytest.raises(ValueError, match="holds an earlier run's tokenizer"):
        run(MT, flags)
    (out / "predict_results.json").write_text('{"predict_bleu": 99.0}')  # the earlier model's test scores
    run(MT, flags + ["--tokenizer_name", str(out)])  # reused on purpose
    # a new model: the earlier one's scores and selection log are gone (a card would have shown them as its own)
    assert not (out / "predict_results.json").exists()
    assert [json.loads(line)["step"] for line in (out / SELECTION_LOG_NAME).read_text().splitlines()] == [0, 1]
    assert len(environments(out)) == 1
    run(MT, flags + ["--resume_from_checkpoint", "last"])  # continues the folder's run (none saved: from step 0)
    assert [json.loads(line)["step"] for line in (out / SELECTION_LOG_NAME).read_text().splitlines()] == [0, 1, 0, 1]
    assert len(environments(out)) == 2  # each invocation that trained in the folder says where it ran


def test_clear_earlier_run_keeps_what_is_not_a_runs(tmp_path):
    for name in ("checkpoint-5", "checkpoint-10", "baseline"):
        (tmp_path / name).mkdir()
    for name in (SELECTION_LOG_NAME, AVERAGED_CHECKPOINTS_NAME, ENVIRONMENT_LOG_NAME, "predict_results.json",
                 "train_results.json", "generated_predictions.jsonl", "run_config.json", "config.json"):
        (tmp_path / name).write_text("{}")
    assert earlier_run(tmp_path, reads_its_tokenizer=True, speech=False) == ["checkpoint-5", "checkpoint-10"]
    assert sorted(clear_earlier_run(tmp_path)) == sorted([
        "checkpoint-5", "checkpoint-10", SELECTION_LOG_NAME, AVERAGED_CHECKPOINTS_NAME, ENVIRONMENT_LOG_NAME,
        "predict_results.json", "train_results.json", "generated_predictions.jsonl"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["baseline", "config.json", "run_config.json"]
    assert clear_earlier_run(tmp_path) == []
