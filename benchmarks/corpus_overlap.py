# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How close the offline corpus's evaluation sentences come to its training sentences.

The builder keeps *identical* sentences (after `offline_corpus.po.normalize_text`) in one split; near-duplicates
(a plural, an article, a small edit) may cross splits. This measures, for the en->x pairs of each evaluation split,
the share whose English source has a training near-duplicate, by domain, under two keys:

* `variant`: the normalised text without `a` / `an` / `the` and with a plural `-s` stripped ("Shipping method" vs
  "shipping methods");
* `ratio >= 95`: rapidfuzz's `fuzz.ratio` against the closest training sentence (rapidfuzz comes with jiwer);

and how many distinct English sentences the split holds (the test set is multi-parallel: one English sentence in
several languages, which a pooled bootstrap treats as independent).

    python benchmarks/corpus_overlap.py --corpus data/offline_corpus --output benchmarks/results/corpus_overlap.md
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from offline_corpus.po import normalize_text
from rapidfuzz import fuzz, process

ARTICLES = frozenset({"a", "an", "the"})
EVALUATION_SPLITS = ("dev", "test")


def variant_key(text: str) -> str:
    """The normalised text without articles and with a plural `-s` stripped."""
    words = [word for word in normalize_text(text).split() if word not in ARTICLES]
    return " ".join(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
                    for word in words)


def read_pairs(corpus: Path) -> list[tuple[str, str, str]]:
    """`(split, domain, English source)` of every en->x pair."""
    pairs = []
    for path in sorted((corpus / "mt").glob("*_en_*.jsonl")):
        split, source_lang, _, domain = path.stem.split("_")
        if source_lang == "en":
            pairs += [(split, domain, json.loads(line)["source"]) for line in path.open(encoding="utf-8")]
    return pairs


def overlap_rows(pairs: list[tuple[str, str, str]]) -> list[dict]:
    """One row per evaluation split and domain (and `all`): pairs, distinct English sentences, and how many pairs
    have a training near-duplicate under each key."""
    train = sorted({normalize_text(text) for split, _, text in pairs if split == "train"})
    train_variants = {variant_key(text) for text in train}
    closest: dict[str, bool] = {}
    rows = []
    for split in EVALUATION_SPLITS:
        counts: Counter = Counter()
        sentences: dict[str, set] = {}
        for pair_split, domain, text in pairs:
            if pair_split != split:
                continue
            normalised = normalize_text(text)
            if normalised not in closest:
                closest[normalised] = process.extractOne(normalised, train, scorer=fuzz.ratio, score_cutoff=95) is not None
            for group in (domain, "all"):
                counts[group, "pairs"] += 1
                counts[group, "variant"] += variant_key(text) in train_variants
                counts[group, "ratio"] += closest[normalised]
                sentences.setdefault(group, set()).add(normalised)
        for group in sorted(sentences, key=lambda name: (name == "all", name)):
            rows.append({"split": split, "domain": group, "pairs": counts[group, "pairs"],
                         "english": len(sentences[group]), "variant": counts[group, "variant"],
                         "ratio": counts[group, "ratio"]})
    return rows


def table(rows: list[dict], command: str) -> str:
    lines = [f"Made by `{command}`.", "",
             "| split | domain | en->x pairs | distinct English | train variant (plural / article) | "
             "train ratio >= 95 |", "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        share = lambda key: f"{row[key]} ({100 * row[key] / row['pairs']:.1f} %)"  # noqa: E731
        lines.append(f"| {row['split']} | {row['domain']} | {row['pairs']:,} | {row['english']:,} | "
                     f"{share('variant')} | {share('ratio')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/offline_corpus"), help="A built corpus folder.")
    parser.add_argument("--output", type=Path, help="Also write the table here (markdown).")
    args = parser.parse_args()
    command = f"python benchmarks/corpus_overlap.py --corpus {args.corpus}"
    text = table(overlap_rows(read_pairs(args.corpus)), command)
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
