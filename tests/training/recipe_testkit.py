# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Tiny synthetic corpora and tiny-model flags for the recipe tests: every file is generated, nothing is downloaded.

Speech: each word of a small per-language lexicon is a short tone (its own pitch) with a little noise, an utterance
is the tones of its words. Translation: word-by-word through a lexicon. Some rows are deliberately bad (unreadable,
empty or missing audio, empty text, an unknown language) so the skip counting can be checked exactly.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import soundfile

SPEECH_WORDS = {
    "es": ["hola", "gato", "casa", "rojo", "perro", "sol"],
    "fr": ["salut", "chat", "maison", "rouge", "chien", "soleil"],
}
ENGLISH = ["hello", "cat", "house", "red", "dog", "sun"]
TEXT_WORDS = {
    "en": "the cat dog house tree red blue big small runs sleeps eats".split(),
    "de": "die katze hund haus baum rot blau gross klein rennt schlaeft isst".split(),
    "fr": "le chat chien maison arbre rouge bleu grand petit court dort mange".split(),
}


def write_tone(path: Path, words: list[int], sampling_rate: int = 16000, seconds_per_word: float = 0.12,
               seed: int = 0) -> int:
    """Write one utterance (a tone per word index) as 16-bit PCM; returns its number of samples."""
    rng = np.random.default_rng(seed)
    parts = []
    for word in words:
        t = np.arange(int(seconds_per_word * sampling_rate)) / sampling_rate
        parts.append(0.4 * np.sin(2 * np.pi * (220 + 110 * word) * t))
    audio = np.concatenate(parts) + 0.01 * rng.standard_normal(sum(len(p) for p in parts))
    soundfile.write(path, audio.astype(np.float32), sampling_rate, subtype="PCM_16")
    return len(audio)


def speech_rows(folder: Path, split: str, count: int, seed: int, domain_cycle=("tedx", "covost")) -> list[dict]:
    """`count` good speech rows (es and fr, translated to en), audio written under `folder/audio`."""
    rng = random.Random(seed)
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    rows = []
    for index in range(count):
        lang = "es" if index % 2 == 0 else "fr"
        words = [rng.randrange(len(ENGLISH)) for _ in range(rng.randint(2, 4))]
        rate = (16000, 8000, 22050)[index % 3]  # exercise resampling
        name = f"audio/{split}_{index}.wav"
        write_tone(folder / name, words, rate, seed=seed * 1000 + index)
        rows.append({
            "id": f"{split}-{index}",
            "audio": name,
            "text": " ".join(SPEECH_WORDS[lang][w] for w in words).capitalize() + ".",
            "translation": " ".join(ENGLISH[w] for w in words),
            "source_lang": lang,
            "target_lang": "en",
            "domain": domain_cycle[index % len(domain_cycle)],
        })
    return rows


def bad_speech_rows(folder: Path) -> list[dict]:
    """One row per skip reason of the speech path (plus a good-looking row in an unknown language)."""
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    (folder / "audio/garbage.wav").write_bytes(b"this is not a wav file")
    soundfile.write(folder / "audio/empty.wav", np.zeros(0, dtype=np.float32), 16000)
    soundfile.write(folder / "audio/silent.wav", np.zeros(4000, dtype=np.float32), 16000)
    write_tone(folder / "audio/long.wav", [1] * 30, 16000, seconds_per_word=0.2)  # 6 s
    write_tone(folder / "audio/ok.wav", [1, 2], 16000)
    base = {"translation": "cat", "source_lang": "es", "target_lang": "en", "domain": "tedx", "text": "gato"}
    return [
        {**base, "id": "garbage", "audio": "audio/garbage.wav"},
        {**base, "id": "missing", "audio": "audio/does_not_exist.wav"},
        {**base, "id": "empty", "audio": "audio/empty.wav"},
        {**base, "id": "silent", "audio": "audio/silent.wav"},
        {**base, "id": "long", "audio": "audio/long.wav"},
        {**base, "id": "no_text", "audio": "audio/ok.wav", "text": "", "translation": ""},
        {**base, "id": "klingon", "audio": "audio/ok.wav", "source_lang": "tlh"},
    ]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_table(path: Path, rows: list[dict], delimiter: str, columns: list[str] | None = None) -> Path:
    """CSV (quoted as needed) or TSV (unquoted, like fairseq manifests)."""
    columns = columns or list(rows[0])
    with open(path, "w", newline="", encoding="utf-8") as handle:
        if delimiter == "\t":
            lines = ["\t".join(columns)] + ["\t".join(str(row.get(name, "")) for name in columns) for row in rows]
            handle.write("\n".join(lines) + "\n")
        else:
            writer = csv.DictWriter(handle, columns, delimiter=delimiter, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return path


def write_fairseq_manifest(folder: Path, split_name: str, rows: list[dict], target: str,
                           with_langs: bool = True) -> Path:
    """A fairseq S2T manifest `folder/{split_name}.tsv` (`tgt_text` = the row's `target` field)."""
    records = [{
        "id": row["id"], "audio": row["audio"], "n_frames": "0", "tgt_text": row[target], "speaker": "spk",
        "src_lang": row["source_lang"] if with_langs else "", "tgt_lang": row["target_lang"] if with_langs else "",
    } for row in rows]
    return write_table(folder / f"{split_name}.tsv", records, "\t",
                       ["id", "audio", "n_frames", "tgt_text", "speaker", "src_lang", "tgt_lang"])


def text_rows(count: int, seed: int, directions=(("en", "de"), ("en", "fr"), ("de", "en"))) -> list[dict]:
    """Word-by-word translation rows over a few directions, two domains."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        source_lang, target_lang = directions[index % len(directions)]
        words = [rng.randrange(len(TEXT_WORDS["en"])) for _ in range(rng.randint(3, 6))]
        rows.append({
            "id": f"mt-{seed}-{index}",
            "source": " ".join(TEXT_WORDS[source_lang][w] for w in words),
            "target": " ".join(TEXT_WORDS[target_lang][w] for w in words),
            "source_lang": source_lang,
            "target_lang": target_lang,
            "domain": ("news", "web")[index % 2],
        })
    return rows


TINY_SPEECH = ("d_model=32,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,decoder_attention_heads=2,"
               "encoder_ffn_dim=32,decoder_ffn_dim=32,conv_channels=16,dropout=0.0")
TINY_TEXT = ("d_model=32,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,decoder_attention_heads=2,"
             "encoder_ffn_dim=32,decoder_ffn_dim=32,dropout=0.0")
#: A tiny Marian configuration's keywords, for checkpoints a test saves itself (a stock or head-selection model).
TINY_MARIAN = dict(vocab_size=40, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0,
                   decoder_start_token_id=0, eos_token_id=1, max_position_embeddings=16)


def tiny_flags(output_dir: Path, speech: bool, max_steps: int = 3) -> list[str]:
    """Flags of a few-step run of a tiny model (d_model 32, one layer per side, vocabulary ~60)."""
    return [
        "--output_dir", str(output_dir),
        "--cache_dir", str(output_dir.parent / f"{output_dir.name}_cache"),
        "--config_overrides", TINY_SPEECH if speech else TINY_TEXT,
        "--vocab_size", "60",
        "--max_steps", str(max_steps),
        "--per_device_train_batch_size", "4",
        "--per_device_eval_batch_size", "8",
        "--learning_rate", "0.01",
        "--generation_max_length", "8",
        "--generation_num_beams", "2",
        "--logging_steps", "1",
        "--save_strategy", "no",
        "--use_cpu",
        "--disable_tqdm", "true",
        "--seed", "0",
    ]


def one_sgd_step_flags(folder: Path) -> list[str]:
    """Flags (besides `tiny_flags`) of deterministic SGD training on 8 translation pairs read in order, the 4
    shortest targets first (sequential, no sampling noise): batches of 4 hold different token counts, where a loss
    averaged per batch differs from one averaged over the whole step."""
    rows = sorted(text_rows(8, seed=1), key=lambda row: len(row["target"].split()))
    train = write_jsonl(folder / "train.jsonl", rows)
    return ["--train_file", str(train), "--train_sampling_strategy", "sequential", "--head_selection_noise_scale",
            "0", "--optim", "sgd", "--learning_rate", "1.0", "--do_train"]
