# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Trained tokenizers: their temporary files serve the tokenizer while the process runs and are gone after it."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headsel_recipes.tokenizer import train_marian_tokenizer, train_speech_tokenizer

TEXTS = ["the cat sat on the mat", "die Katze sass auf der Matte", "le chat", "a dog", "ein Hund"] * 4


def test_a_trained_tokenizer_survives_pickling_and_saves_its_files(tmp_path):
    for tokenizer in (train_marian_tokenizer(TEXTS, 40), train_speech_tokenizer(TEXTS, 40)):
        copy = pickle.loads(pickle.dumps(tokenizer))  # what datasets.map workers do: re-read the spm files
        assert copy("the cat").input_ids == tokenizer("the cat").input_ids
        folder = tmp_path / type(tokenizer).__name__
        tokenizer.save_pretrained(folder)
        reloaded = type(tokenizer).from_pretrained(folder)
        assert reloaded("the cat").input_ids == tokenizer("the cat").input_ids


def test_the_temporary_files_are_removed_when_the_process_exits():
    # a training run used to leave one folder per trained tokenizer in the temporary directory, for good
    script = textwrap.dedent("""
        from pathlib import Path
        from headsel_recipes.tokenizer import train_marian_tokenizer, train_speech_tokenizer
        texts = ["the cat sat on the mat", "a dog", "le chat"] * 4
        for spm_file in (train_marian_tokenizer(texts, 30).spm_files[0], train_speech_tokenizer(texts, 30).spm_file):
            assert Path(spm_file).is_file()
            print(Path(spm_file).parent)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    folders = [Path(line) for line in result.stdout.splitlines()]
    assert len(folders) == 2 and all(folder.name.startswith("headsel_spm_") for folder in folders)
    assert not any(folder.exists() for folder in folders)


def test_a_sampled_tokenizer_is_the_same_in_every_process(tmp_path):
    # more sentences than `max_sentences`: sentencepiece's own sampling drew others in every process, so the processes
    # of a distributed run (and reruns) trained different tokenizers; the recipes sample with a fixed seed
    script = textwrap.dedent("""
        import random, sys
        from pathlib import Path
        from headsel_recipes.tokenizer import MARIAN_SPECIALS, train_sentencepiece
        rng = random.Random(1)
        words = [''.join(rng.choice('abcdefghij') for _ in range(rng.randint(2, 6))) for _ in range(300)]
        texts = [' '.join(rng.choice(words) for _ in range(8)) for _ in range(400)]
        train_sentencepiece(texts, Path(sys.argv[1]), 60, MARIAN_SPECIALS, max_sentences=50)
    """)
    models = [tmp_path / f"{index}.model" for index in range(2)]
    for model in models:
        subprocess.run([sys.executable, "-c", script, str(model)], check=True)
    assert models[0].read_bytes() == models[1].read_bytes()


def test_a_vocabulary_smaller_than_the_text_needs_names_the_flag():
    # sentencepiece's own message advises a --character_coverage option the recipes do not have
    with pytest.raises(ValueError, match="--vocab_size 10 is smaller than the pieces every tokenizer of this text "
                                         "needs: each of its characters, 3 special tokens and 0 tags"):
        train_marian_tokenizer(["abcdefghijklmnop qrstuvw"], 10)


@pytest.mark.parametrize("train", [train_marian_tokenizer, train_speech_tokenizer])
def test_no_text_to_train_on_is_a_clear_error(train):
    """Training targets that are all empty (a misnamed column read as "") leave sentencepiece nothing to learn."""
    with pytest.raises(ValueError, match="no training text to build a tokenizer from"):
        train(["", ""], 40)
