# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The recipes run unchanged under torchrun: two CPU processes (gloo) keep identical selector logits and share one
tokenizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from recipe_testkit import one_sgd_step_flags, tiny_flags
from safetensors.torch import load_file

from headsel_recipes import run
from headsel_recipes.tasks import MT

WORKER = Path(__file__).resolve().parent / "ddp_worker.py"


def torchrun(tmp_path, flags: list[str]) -> None:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "--log-dir", str(tmp_path / "torchrun_logs"),  # not a new folder in the system's temp dir each run
               str(WORKER), str(tmp_path)] + flags
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-5000:]


def test_two_processes_train_as_one_process_with_their_batches_together(tmp_path):
    # each process's loss was its own batch's mean: the process with the shorter targets weighted its tokens more
    common = one_sgd_step_flags(tmp_path)  # rank 0: the 4 short targets, rank 1: the 4 long ones
    single = tiny_flags(tmp_path / "single", speech=False, max_steps=1) + common
    single[single.index("--per_device_train_batch_size") + 1] = "8"
    run(MT, single)
    torchrun(tmp_path, tiny_flags(tmp_path / "ddp", speech=False, max_steps=1) + common + [
        "--ddp_backend", "gloo", "--tokenizer_name", str(tmp_path / "single")])
    one, two = (load_file(tmp_path / name / "model.safetensors") for name in ("single", "ddp"))
    for key in one:
        torch.testing.assert_close(two[key], one[key], rtol=1e-5, atol=1e-6)


def test_torchrun_two_processes_keep_selectors_in_sync(text_corpus, tmp_path):
    out = tmp_path / "ddp"
    flags = tiny_flags(out, speech=False, max_steps=4) + [
        "--train_file", str(text_corpus / "train.jsonl"),
        "--validation_file", str(text_corpus / "dev.jsonl"),
        "--test_file", str(text_corpus / "test.jsonl"),
        "--sampling_alpha", "0.5", "--head_selection_kl_weight", "0.5", "--learning_rate", "0.001",
        "--ddp_backend", "gloo", "--do_train", "--do_eval", "--do_predict",
        # a sampled tokenizer (fewer sentences than the corpus has) trained over an earlier run's: one for all ranks
        "--tokenizer_max_sentences", "20", "--overwrite_output_dir",
    ]
    torchrun(tmp_path, flags)

    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in (0, 1)]
    assert [rank["world_size"] for rank in ranks] == [2, 2]
    assert ranks[0]["vocab"] == ranks[1]["vocab"]
    assert sorted(ranks[0]["final"]) == ["head_selection.decoder_self.logits", "head_selection.encoder_self.logits"]
    for name, final in ranks[0]["final"].items():
        torch.testing.assert_close(ranks[1]["final"][name], final, rtol=0, atol=0)  # identical on both ranks
        assert not torch.equal(final, ranks[0]["initial"][name])  # and they did train
    assert len([entry for entry in ranks[0]["log_history"] if "loss" in entry]) == 4
    eval_results = json.loads((out / "eval_results.json").read_text())
    assert eval_results["eval_samples"] == 9
    assert {"eval_bleu_en-de", "eval_bleu_en-fr", "eval_bleu_de-en"} <= set(eval_results)

    # (TaskMetrics checked that the gathered labels are the split's, in order.) The model saved by the distributed
    # run predicts the same in one process.
    single = run(MT, tiny_flags(tmp_path / "single", speech=False) + [
        "--model_name_or_path", str(out), "--test_file", str(text_corpus / "test.jsonl"), "--do_predict"])
    assert single.metrics["predict"]["predict_samples"] == 9
    read = lambda path: [json.loads(line) for line in path.read_text().splitlines()]  # noqa: E731
    predictions = read(out / "generated_predictions.jsonl")
    assert predictions == read(tmp_path / "single" / "generated_predictions.jsonl")
