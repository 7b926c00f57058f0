# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The speech tokenizers the CPU benchmark's ASR and ST experiments share (`tokenizer_name` in their files), built
from the offline corpus once, so that every run reads the same pieces and the features are prepared once.

    python benchmarks/benchmark_tokenizers.py            # outputs/benchmark/tokenizers/{asr,st}, unless there

Piece for piece the tokenizer `headsel-train asr|st` trains itself with the files' flags (`vocab_size` 1000,
`--task_tag`: every task's tag a whole piece).
"""

from __future__ import annotations

import argparse
import csv
import glob
from pathlib import Path

from headsel_recipes.tokenizer import task_tag, train_speech_tokenizer

# kind: (task type, tasks, training manifests of a task)
KINDS = {
    "asr": ("lang", "ar de el es fr it pt ru".split(), "train_{task}_{task}_*"),
    "st": ("domain", ["django", "horizon", "wagtail"], "train_*_en_{task}"),
}


def manifest_texts(corpus: Path, kind: str) -> list[str]:
    _, tasks, pattern = KINDS[kind]
    texts = []
    for task in tasks:
        for path in sorted(glob.glob(str(corpus / "speech" / kind / f"{pattern.format(task=task)}.tsv"))):
            with open(path, newline="", encoding="utf-8") as manifest:
                texts += [row["tgt_text"] for row in csv.DictReader(manifest, delimiter="\t", quoting=csv.QUOTE_NONE)]
    return texts


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/offline_corpus"))
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/benchmark/tokenizers"))
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=sorted(KINDS))
    options = parser.parse_args(args)
    for kind in options.kinds:
        folder = options.output_dir / kind
        if (folder / "vocab.json").exists():
            continue
        texts = manifest_texts(options.corpus, kind)
        if not texts:
            raise SystemExit(f"no {kind} training manifests under {options.corpus}/speech/{kind}: build the corpus "
                             "first (headsel-build-corpus --speech)")
        task_type, tasks, _ = KINDS[kind]
        tags = [task_tag(task_type, task) for task in tasks]
        train_speech_tokenizer(texts, 1000, tags=tags).save_pretrained(str(folder))
        print(f"{kind} tokenizer: {folder} ({len(texts):,} sentences)")


if __name__ == "__main__":
    main()
