# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Train-only supplementary pairs: text the main corpus leaves out because it cannot be spoken, not because it is bad.

The main splits skip one-word segments (`too_short`: "Delete", "Arabic") and segments with placeholders
(`placeholder`: "Value %(value)r is not a valid choice.") because the corpus also feeds speech, and because they are
poor evaluation material. As *training* text for translation they are ordinary, in-domain human translations. This
module cleans them by every other rule of [`po`] (markup, URLs, copies, wrong script, length; `{0}`-style
placeholders stay out as code-like) and keeps one that:

* has no placeholder in its target that its source lacks (else skipped as `extra_placeholder`, e.g. the singular
  'a minute from now' -> 'через %(count)s минуту': the model would learn to invent tokens, and the catalog's
  formatting would fail). A target may *drop* a placeholder of its source: a singular form often spells the number
  out ('%(size)d byte' -> 'بايت واحد', "one byte"), which is a correct translation,
* is not a duplicate of a main-corpus pair or of an earlier supplementary pair (same domain, language and normalised
  English), and
* shares neither its normalised English nor its normalised target with any dev or test pair, so the splits stay
  disjoint (checked again by the build).

They are written as `mt/supplement_{src}_{tgt}_{domain}.jsonl`, which no `train_*`/`test_*` glob matches: the
benchmarks read exactly what they read before, and a recipe opts in with `--train_file 'mt/supplement_en_*.jsonl'`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from .pairs import Pair, pair_id
from .po import PLACEHOLDER, CatalogEntry, CleaningRules, clean_entry, normalize_text
from .splits import source_node, target_node

SUPPLEMENT = "supplement"
"""The split name of the supplementary pairs (file prefix and key of `stats.json["text"]`)."""
SUPPLEMENTED_REASONS = ("too_short", "placeholder")
"""The main corpus' skip reasons whose entries are candidates for the supplement."""


def placeholders(text: str) -> Counter:
    """The placeholders of a raw catalog string, counted (`%%` is a literal percent sign, not one)."""
    return Counter(match.group() for match in PLACEHOLDER.finditer(text.replace("%%", "")))


def supplement_entry(entry: CatalogEntry, rules: CleaningRules) -> tuple[str, str] | str | None:
    """The cleaned `(source, target)` of a supplementary candidate, the reason it is still skipped, or `None` when
    the entry is not a candidate (the main corpus keeps it, or skips it for another reason)."""
    if clean_entry(entry, rules) not in SUPPLEMENTED_REASONS:
        return None
    cleaned = clean_entry(entry, replace(rules, min_source_words=1), keep_placeholders=True)
    if isinstance(cleaned, tuple) and placeholders(entry.target) - placeholders(entry.source):
        return "extra_placeholder"  # the target has a placeholder (or one more of it) that the source lacks
    return cleaned


def supplement_pairs(
    entries: Iterable[CatalogEntry], rules: CleaningRules, splits: dict[str, list[Pair]], skipped: Counter
) -> list[Pair]:
    """The supplementary pairs of `entries` given the main `splits`, sorted by domain, language and id. Every
    candidate left out is counted in `skipped` by reason (`held_out`: it shares a sentence with dev or test;
    `extra_placeholder`: its target has a placeholder its source lacks)."""
    held_out = {node for split in ("dev", "test") for pair in splits.get(split, ())
                for node in (source_node(pair), target_node(pair))}
    seen = {(pair.domain, pair.lang, normalize_text(pair.source)) for members in splits.values() for pair in members}
    pairs = []
    for entry in entries:
        cleaned = supplement_entry(entry, rules)
        if cleaned is None:
            continue
        if isinstance(cleaned, str):
            skipped[cleaned] += 1
            continue
        source, target = cleaned
        pair = Pair(pair_id(entry.domain, entry.lang, source), entry.domain, entry.lang, source, target)
        key = (entry.domain, entry.lang, normalize_text(source))
        if key in seen:
            skipped["duplicate"] += 1
        elif source_node(pair) in held_out or target_node(pair) in held_out:
            skipped["held_out"] += 1
        else:
            seen.add(key)
            pairs.append(pair)
    return sorted(pairs, key=lambda pair: (pair.domain, pair.lang, pair.id))


__all__ = ["SUPPLEMENT", "SUPPLEMENTED_REASONS", "placeholders", "supplement_entry", "supplement_pairs"]
