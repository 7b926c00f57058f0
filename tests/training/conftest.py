# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Fixtures of the recipe tests: generated corpora and the flags of a tiny, fast model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Transformers 5.25+ kernelizes every `from_pretrained` with kernels fetched from the Hub: never in the tests.
os.environ.setdefault("USE_HUB_KERNELS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

import datasets  # noqa: E402  (after the environment it reads)

# tests/training/ is on the test path (`pythonpath` in setup.cfg)
from recipe_testkit import (  # noqa: E402
    bad_speech_rows,
    speech_rows,
    text_rows,
    write_fairseq_manifest,
    write_jsonl,
)

datasets.disable_progress_bars()

@pytest.fixture(scope="session")
def speech_corpus(tmp_path_factory) -> Path:
    """JSONL speech data (es, fr -> en; domains tedx/covost) with bad training rows, and a dev set with an unknown
    language; plus fairseq manifests of the same audio under `manifests/`."""
    folder = tmp_path_factory.mktemp("speech")
    train = speech_rows(folder, "train", 16, seed=1)
    dev = speech_rows(folder, "dev", 6, seed=2)
    write_jsonl(folder / "train.jsonl", train + bad_speech_rows(folder))
    write_jsonl(folder / "train_clean.jsonl", train)
    write_jsonl(folder / "dev.jsonl", dev + [{**dev[0], "id": "dev-unknown", "source_lang": "tlh"}])
    manifests = folder / "manifests"
    manifests.mkdir()
    for split, rows in (("train", train), ("dev", dev)):
        for lang, domain in (("es", "tedx"), ("fr", "covost")):
            subset = [{**row, "audio": f"../{row['audio']}"} for row in rows if row["source_lang"] == lang]
            # the fr manifests leave src_lang/tgt_lang empty: the split name supplies them
            write_fairseq_manifest(manifests, f"{split}_{lang}_en_{domain}", subset, "translation",
                                   with_langs=lang == "es")
    return folder


@pytest.fixture(scope="session")
def text_corpus(tmp_path_factory) -> Path:
    """JSONL translation data: en->de, en->fr, de->en, domains news/web."""
    folder = tmp_path_factory.mktemp("text")
    write_jsonl(folder / "train.jsonl", text_rows(48, seed=1))
    write_jsonl(folder / "dev.jsonl", text_rows(9, seed=2))
    write_jsonl(folder / "test.jsonl", text_rows(9, seed=3))
    return folder
