# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Writing the corpus in the formats the training scripts read, and its statistics.

* MT: JSONL rows `id, source, target, source_lang, target_lang, domain` in `mt/{split}_{src}_{tgt}_{domain}.jsonl`,
  both directions (en->x and x->en), so a glob picks a task set: `mt/train_en_*` (one-to-many),
  `mt/train_*_en_*` (many-to-one), `mt/train_*_wagtail.jsonl` (one domain).
* Speech: fairseq speech-to-text manifests (`id, audio, n_frames, tgt_text, speaker, src_lang, tgt_lang`; audio paths
  relative to the manifest folder, `n_frames` in 16 kHz samples) named `{split}_{src}_{tgt}_{domain}.tsv`, ASR ones
  (`tgt = src`, the transcript) in `speech/asr/` and ST ones (`tgt = en`, the English source) in `speech/st/`, over
  the same audio in `speech/audio/`. Two folders because a glob cannot say "source language = target language":
  `--manifest_dir speech/asr --train_file 'train_*'` reads every ASR task and nothing else.
* `stats.json` and `stats.md` (the tables for the README).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from .pairs import Pair
from .speech import SAMPLING_RATE, SynthesisResult

MANIFEST_COLUMNS = ("id", "audio", "n_frames", "tgt_text", "speaker", "src_lang", "tgt_lang")


def _group(pairs: list[Pair]) -> dict[tuple[str, str], list[Pair]]:
    groups: dict[tuple[str, str], list[Pair]] = defaultdict(list)
    for pair in pairs:
        groups[(pair.lang, pair.domain)].append(pair)
    return dict(sorted(groups.items()))


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def mt_rows(pair: Pair, to_english: bool) -> dict:
    """The JSONL row of a pair in one direction (ids get a `-x2en` / `-en2x` suffix: each direction is an example)."""
    if to_english:
        return {"id": f"{pair.id}-x2en", "source": pair.target, "target": pair.source, "source_lang": pair.lang,
                "target_lang": "en", "domain": pair.domain}
    return {"id": f"{pair.id}-en2x", "source": pair.source, "target": pair.target, "source_lang": "en",
            "target_lang": pair.lang, "domain": pair.domain}


def write_mt(splits: dict[str, list[Pair]], folder: Path) -> list[Path]:
    """Write the MT files of every split, language and domain in both directions; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.jsonl"):  # a rebuild with fewer languages or domains must not leave old files
        stale.unlink()
    paths = []
    for split, pairs in splits.items():
        for (lang, domain), group in _group(pairs).items():
            paths.append(write_jsonl(folder / f"{split}_en_{lang}_{domain}.jsonl",
                                     [mt_rows(pair, to_english=False) for pair in group]))
            paths.append(write_jsonl(folder / f"{split}_{lang}_en_{domain}.jsonl",
                                     [mt_rows(pair, to_english=True) for pair in group]))
    return paths


def manifest_row(pair: Pair, result: SynthesisResult, folder: Path, target_lang: str) -> str:
    """One manifest line: ASR (`target_lang == pair.lang`: the transcript) or ST (English); the audio path is
    relative to the manifest's `folder`."""
    text = pair.target if target_lang == pair.lang else pair.source
    audio = Path(os.path.relpath(result.utterance.path, folder)).as_posix()
    values = (pair.id, audio, str(result.n_samples), text,
              f"{pair.lang}-{result.utterance.speaker.name}", pair.lang, target_lang)
    if any("\t" in value or "\n" in value for value in values):  # cleaned text has no tabs: a guard, not a filter
        raise ValueError(f"manifest values may not contain tabs or newlines: {values}")
    return "\t".join(values)


def remove_speech_manifests(folder: Path) -> int:
    """Remove the ASR and ST manifests under `folder` (an earlier build's); returns how many there were."""
    stale = [path for kind in ("asr", "st") for path in (folder / kind).glob("*.tsv")]
    for path in stale:
        path.unlink()
    return len(stale)


def write_speech_manifests(
    speech: dict[str, list[tuple[Pair, SynthesisResult]]], folder: Path
) -> list[Path]:
    """Write the ASR (`folder/asr`) and ST (`folder/st`) manifests of every split, language and domain of the
    synthesised segments (failed ones left out: they are counted in the stats); returns their paths."""
    remove_speech_manifests(folder)  # a rebuild with fewer languages or domains leaves no old file
    paths = []
    for kind in ("asr", "st"):
        (folder / kind).mkdir(parents=True, exist_ok=True)
    for split, items in speech.items():
        groups: dict[tuple[str, str], list] = defaultdict(list)
        for pair, result in items:
            if result.error is None:
                groups[(pair.lang, pair.domain)].append((pair, result))
        for (lang, domain), group in sorted(groups.items()):
            for kind, target_lang in (("asr", lang), ("st", "en")):
                path = folder / kind / f"{split}_{lang}_{target_lang}_{domain}.tsv"
                lines = ["\t".join(MANIFEST_COLUMNS)]
                lines += [manifest_row(pair, result, path.parent, target_lang) for pair, result in group]
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")
                paths.append(path)
    return paths


def text_counts(splits: dict[str, list[Pair]]) -> dict[str, dict[str, dict[str, int]]]:
    """`{split: {lang: {domain: pairs}}}`."""
    return {split: _nested_counts(pairs) for split, pairs in splits.items()}


def _nested_counts(pairs: list[Pair]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (lang, domain), group in _group(pairs).items():
        out.setdefault(lang, {})[domain] = len(group)
    return out


def speech_counts(speech: dict[str, list[tuple[Pair, SynthesisResult]]]) -> dict:
    """`{split: {lang: {domain: {"segments": n, "hours": h}}}}` of the synthesised (not failed) segments."""
    out: dict = {}
    for split, items in speech.items():
        cells = out.setdefault(split, {})
        for pair, result in items:
            if result.error is not None:
                continue
            cell = cells.setdefault(pair.lang, {}).setdefault(pair.domain, {"segments": 0, "hours": 0.0})
            cell["segments"] += 1
            cell["hours"] += result.n_samples / SAMPLING_RATE / 3600
    for cells in out.values():
        for domains in cells.values():
            for cell in domains.values():
                cell["hours"] = round(cell["hours"], 4)
    return out


def _table(header: list[str], rows: list[list[str]], numbers: bool = True) -> list[str]:
    """A Markdown table; `numbers` right-aligns every column but the first."""
    align = "|".join("---" if index == 0 or not numbers else "---:" for index in range(len(header)))
    lines = ["| " + " | ".join(header) + " |", f"|{align}|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def stats_markdown(stats: dict) -> str:
    """The README tables: text pairs and speech segments per language and domain as `train / dev / test`, with
    totals, and speech hours."""
    splits = ("train", "dev", "test")
    domains = sorted({d for split in stats["text"].values() for langs in split.values() for d in langs})
    languages = list(stats["languages"])

    def cell(counts: dict, lang: str | None, domain: str | None, key=None) -> str:
        values = []
        for split in splits:
            total = 0
            for lang_name, by_domain in counts.get(split, {}).items():
                for domain_name, value in by_domain.items():
                    if (lang is None or lang_name == lang) and (domain is None or domain_name == domain):
                        total += value[key] if key else value
            values.append(total)
        return " / ".join(f"{value:,}" if isinstance(value, int) else f"{value:.2f}" for value in values) \
            if any(values) else "–"

    header = ["language", *domains, "all domains"]
    conditions = stats.get("speech_settings", {}).get("conditions", {})
    lines = ["Domains:", ""]
    lines += _table(["domain", "package", "licence", "project", "acoustic condition"], [
        [source["domain"], f"{source['package']}=={source['version']}", source["license"], source["description"],
         conditions.get(source["domain"], {}).get("description", "–")] for source in stats["sources"]],
        numbers=False)
    lines += ["", "Translation pairs (English <-> language), train / dev / test:", ""]
    rows = [[lang, *(cell(stats["text"], lang, d) for d in domains), cell(stats["text"], lang, None)]
            for lang in languages]
    rows.append(["**all**", *(cell(stats["text"], None, d) for d in domains), cell(stats["text"], None, None)])
    lines += _table(header, rows)
    if stats.get("speech"):
        lines += ["", "Speech segments (each in an ASR and an ST manifest), train / dev / test:", ""]
        rows = [[lang, *(cell(stats["speech"], lang, d, "segments") for d in domains),
                 cell(stats["speech"], lang, None, "segments")] for lang in languages]
        rows.append(["**all**", *(cell(stats["speech"], None, d, "segments") for d in domains),
                     cell(stats["speech"], None, None, "segments")])
        rows.append(["**hours**", *(cell(stats["speech"], None, d, "hours") for d in domains),
                     cell(stats["speech"], None, None, "hours")])
        lines += _table(header, rows)
    if stats.get("supplement"):
        kept = stats["supplement"]["pairs"]
        left_out = ", ".join(f"{reason} {count:,}" for reason, count in stats["supplement"]["skipped"].items())
        lines += ["", f"Train-only supplementary pairs (`mt/supplement_*`: one-word and placeholder segments, no "
                      f"sentence shared with dev or test): {kept:,}" + (f"; left out: {left_out}." if left_out else ".")]
    if stats["skipped"]["by_reason"]:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in stats["skipped"]["by_reason"].items())
        lines += ["", f"Catalog entries skipped: {reasons}."]
    return "\n".join(lines) + "\n"
