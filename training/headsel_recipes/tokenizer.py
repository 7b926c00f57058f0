# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Tokenizers: load one, or train a sentencepiece model on the training text and wrap it as the stock tokenizer of
the model family, so the output folder loads with `from_pretrained`.

* Speech: [`Speech2TextTokenizer`] files (`vocab.json`, `sentencepiece.bpe.model`), fairseq's special ids
  `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3 (those of `Speech2TextConfig`).
* Text: [`MarianTokenizer`] files (`vocab.json`, `source.spm`, `target.spm`: one joint model for both sides, so the
  embeddings can be shared), `</s>`=0, `<unk>`=1, `<pad>`=2; `>>xx<<` target-language tokens are whole pieces.
"""

from __future__ import annotations

import atexit
import json
import logging
import random
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
from transformers import MarianTokenizer, Speech2TextTokenizer

logger = logging.getLogger(__name__)

SPEECH_SPECIALS = {"bos": (0, "<s>"), "pad": (1, "<pad>"), "eos": (2, "</s>"), "unk": (3, "<unk>")}
MARIAN_SPECIALS = {"eos": (0, "</s>"), "unk": (1, "<unk>"), "pad": (2, "<pad>"), "bos": (-1, "<s>")}
# sentencepiece's model types (`--tokenizer_model_type`, any case).
TOKENIZER_MODEL_TYPES = ("unigram", "bpe", "char", "word")
# The seed of the sentences a tokenizer is trained on when there are more than `max_sentences`: every run (and every
# process of a distributed one) on the same text trains the same tokenizer.
SENTENCE_SAMPLE_SEED = 0


def task_tag(task_type: str, task: str) -> str:
    """The decoder-task tag of `--task_tag` (speech): `<lang:fr>` or `<domain:tedx>`, a whole piece."""
    return f"<{'domain' if task_type == 'domain' else 'lang'}:{task}>"


def check_tokenizer_flags(vocab_size: int, model_type: str, max_sentences: int) -> None:
    """A `ValueError` naming the rule when `--vocab_size`, `--tokenizer_model_type` or `--tokenizer_max_sentences`
    cannot train a tokenizer (checked at start-up: sentencepiece would fail only after the data is read)."""
    if model_type.lower() not in TOKENIZER_MODEL_TYPES:
        raise ValueError(f"--tokenizer_model_type {model_type!r}: use one of {', '.join(TOKENIZER_MODEL_TYPES)}")
    for flag, value in (("--vocab_size", vocab_size), ("--tokenizer_max_sentences", max_sentences)):
        if value < 1:
            raise ValueError(f"{flag} {value}: must be at least 1")


def train_sentencepiece(
    texts: Iterable[str],
    model_path: Path,
    vocab_size: int,
    specials: dict[str, tuple[int, str]],
    model_type: str = "unigram",
    user_symbols: list[str] | None = None,
    max_sentences: int = 1_000_000,
) -> dict[str, int]:
    """Train a sentencepiece model on `texts` into `model_path` and return its vocabulary `{piece: id}`.

    `vocab_size` is a soft upper limit (a small corpus yields fewer pieces rather than an error); below the pieces
    every model needs (each character of the text, the special tokens and `user_symbols`) it is a `ValueError`.
    """
    texts = [text for text in texts if text]
    if not texts:
        raise ValueError("no training text to build a tokenizer from")
    if len(texts) > max_sentences:  # sampled here, seeded: sentencepiece's own sampling differs from run to run
        texts = random.Random(SENTENCE_SAMPLE_SEED).sample(texts, max_sentences)
    options = {f"{name}_id": index for name, (index, _) in specials.items()}
    options.update({f"{name}_piece": piece for name, (index, piece) in specials.items() if index >= 0})
    with open(model_path, "wb") as writer:
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(texts),
                model_writer=writer,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=1.0,
                input_sentence_size=0,  # every sentence given (sampled above)
                hard_vocab_limit=False,
                user_defined_symbols=user_symbols or [],
                minloglevel=2,
                **options,
            )
        except RuntimeError as error:
            if "required_chars" not in str(error):
                raise
            # sentencepiece's own message advises a --character_coverage option the recipes do not have
            pieces = sum(index >= 0 for index, _ in specials.values())  # Marian's `<s>` is no piece
            raise ValueError(f"--vocab_size {vocab_size} is smaller than the pieces every tokenizer of this text "
                             f"needs: each of its characters, {pieces} special tokens and {len(user_symbols or [])} "
                             f"tags; raise --vocab_size ({error})") from None
    processor = spm.SentencePieceProcessor(model_file=str(model_path))
    return {processor.id_to_piece(index): index for index in range(processor.get_piece_size())}


def tokenizer_folder() -> Path:
    """A new temporary folder for a trained tokenizer's files, removed when the interpreter exits: the tokenizer
    reads them again when it is copied or unpickled (`datasets.map` workers), and `save_pretrained` copies them."""
    folder = Path(tempfile.mkdtemp(prefix="headsel_spm_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def train_speech_tokenizer(texts: Iterable[str], vocab_size: int, model_type: str = "unigram",
                           max_sentences: int = 1_000_000, tags: list[str] | None = None) -> Speech2TextTokenizer:
    """A [`Speech2TextTokenizer`] over a sentencepiece model trained on `texts` (its files live in a temporary
    folder, see [`tokenizer_folder`], until `save_pretrained`); `tags` (task tags) are whole pieces."""
    folder = tokenizer_folder()
    vocab = train_sentencepiece(texts, folder / "sentencepiece.bpe.model", vocab_size, SPEECH_SPECIALS, model_type,
                                user_symbols=tags, max_sentences=max_sentences)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return Speech2TextTokenizer(vocab_file=str(folder / "vocab.json"), spm_file=str(folder / "sentencepiece.bpe.model"))


def train_marian_tokenizer(texts: Iterable[str], vocab_size: int, model_type: str = "unigram",
                           symbols: list[str] | None = None, max_sentences: int = 1_000_000) -> MarianTokenizer:
    """A [`MarianTokenizer`] over one joint sentencepiece model trained on `texts` (source and target sides); its
    files live in a temporary folder (see [`tokenizer_folder`]) until `save_pretrained`; `symbols` (target-language
    tokens, task tags) are whole pieces."""
    folder = tokenizer_folder()
    vocab = train_sentencepiece(texts, folder / "source.spm", vocab_size, MARIAN_SPECIALS, model_type,
                                user_symbols=symbols, max_sentences=max_sentences)
    shutil.copyfile(folder / "source.spm", folder / "target.spm")
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return MarianTokenizer(source_spm=str(folder / "source.spm"), target_spm=str(folder / "target.spm"),
                           vocab=str(folder / "vocab.json"))


def piece_ids(tokenizer, pieces: list[str], flag: str) -> list[int]:
    """The id of each whole piece; a `ValueError` when the tokenizer lacks one (it was built without `flag`, the
    recipe flag that asks for them): the text would read it as `<unk>` or as pieces of characters."""
    ids = [tokenizer.convert_tokens_to_ids(piece) for piece in pieces]
    missing = [piece for piece, index in zip(pieces, ids) if index in (None, tokenizer.unk_token_id)]
    if missing:
        raise ValueError(f"{flag}: the tokenizer has no piece for {missing}; a tokenizer built with {flag} "
                         "holds them (train it on the data, or give one that has them)")
    return ids


def task_tag_ids(tokenizer, task_type: str, tasks: list[str], flag: str = "--task_tag") -> dict[str, int]:
    """`{task: id of its tag}` ([`piece_ids`])."""
    return dict(zip(tasks, piece_ids(tokenizer, [task_tag(task_type, task) for task in tasks], flag)))


def load_tokenizer(path: str, speech: bool, cache_dir: str | None = None):
    """The tokenizer saved in `path` (a recipe output folder or checkpoint)."""
    cls = Speech2TextTokenizer if speech else MarianTokenizer
    return cls.from_pretrained(path, cache_dir=cache_dir)


def has_tokenizer(path: str | None, speech: bool) -> bool:
    """Whether the local folder `path` holds tokenizer files of the family."""
    if path is None or not Path(path).is_dir():
        return False
    needed = ("vocab.json", "sentencepiece.bpe.model") if speech else ("vocab.json", "source.spm")
    return all((Path(path) / name).exists() for name in needed)
