# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""From catalogs to clean, de-duplicated translation pairs, and the snapshot of catalog entries.

The snapshot (`data/catalog_entries.jsonl.gz`) holds the translated entries of the pinned wheels *before* cleaning,
with the counts of the entries the catalog reader skipped: building from it runs exactly the cleaning code a
build from the wheels runs, without a network. Its first line is a header naming the sources it came from.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .po import CatalogEntry, CleaningRules, SkipCounter, clean_entry, normalize_text, read_catalog
from .sources import LANGUAGES, PackageSource, iter_catalogs

SNAPSHOT_FORMAT = "hf-headsel-offline-corpus-entries/1"
DEFAULT_SNAPSHOT = Path(__file__).resolve().parent / "data" / "catalog_entries.jsonl.gz"


@dataclass(frozen=True)
class Pair:
    """A clean English -> `lang` translation pair of one domain."""

    id: str
    domain: str
    lang: str
    source: str
    target: str


def pair_id(domain: str, lang: str, source: str) -> str:
    """A stable id from the normalised English source (unique within a domain and language after de-duplication)."""
    digest = hashlib.sha1(normalize_text(source).encode("utf-8")).hexdigest()[:12]
    return f"{domain}-{lang}-{digest}"


def read_wheel_entries(
    wheels: dict[str, Path], languages: tuple[str, ...], skipped: SkipCounter
) -> list[CatalogEntry]:
    """The translated entries of every catalog of `languages` in the wheels (`{domain: wheel}`), sorted by domain
    and catalog path, in file order within a catalog."""
    entries = []
    for domain in sorted(wheels):
        catalogs = list(iter_catalogs(wheels[domain], languages))
        for lang, name, text in tqdm(catalogs, desc=f"Reading {domain} catalogs", unit="catalog"):
            entries.extend(read_catalog(text, domain, lang, name, skipped))
    return entries


def clean_pairs(
    entries: Iterable[CatalogEntry], rules: CleaningRules, skipped: SkipCounter
) -> list[Pair]:
    """Clean every entry and keep the first pair of each normalised English source per domain and language
    (later ones are skipped as `duplicate`). Sorted by domain, language and id."""
    seen: set[tuple[str, str, str]] = set()
    pairs = []
    for entry in entries:
        cleaned = clean_entry(entry, rules)
        if isinstance(cleaned, str):
            skipped.add(entry.domain, entry.lang, cleaned)
            continue
        source, target = cleaned
        key = (entry.domain, entry.lang, normalize_text(source))
        if key in seen:
            skipped.add(entry.domain, entry.lang, "duplicate")
            continue
        seen.add(key)
        pairs.append(Pair(pair_id(entry.domain, entry.lang, source), entry.domain, entry.lang, source, target))
    return sorted(pairs, key=lambda pair: (pair.domain, pair.lang, pair.id))


def write_snapshot(
    path: Path, entries: list[CatalogEntry], sources: tuple[PackageSource, ...], skipped: SkipCounter
) -> None:
    """Write the catalog entries (and the catalog reader's skip counts) as deterministic gzipped JSONL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "format": SNAPSHOT_FORMAT,
        "sources": [asdict(source) for source in sources],
        "catalog_skips": [[*key, count] for key, count in sorted(skipped.items())],
    }
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as handle:  # mtime=0: same bytes each time
        for record in [header, *(asdict(entry) for entry in entries)]:
            handle.write((json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    path.write_bytes(buffer.getvalue())


SNAPSHOT_EXPECTED = (f"a gzipped JSONL file whose first line is a {SNAPSHOT_FORMAT!r} header, as written by "
                     "--source pypi --write_snapshot")


def read_snapshot_header(path: Path) -> dict:
    """The header line of the snapshot at `path`. Raises `ValueError` naming the file when it is missing or is not
    a snapshot (so that a bad `--snapshot` is reported before any work, not as a traceback)."""
    if not path.is_file():
        raise ValueError(f"the snapshot {path} does not exist: expected {SNAPSHOT_EXPECTED}")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline())
    except (OSError, EOFError, ValueError) as error:  # not gzip, not UTF-8, not JSON
        raise ValueError(f"{path} is not a corpus snapshot ({error}): expected {SNAPSHOT_EXPECTED}") from None
    if not isinstance(header, dict) or header.get("format") != SNAPSHOT_FORMAT:
        found = header.get("format") if isinstance(header, dict) else type(header).__name__
        raise ValueError(f"{path} is not a corpus snapshot (format {found!r}): expected {SNAPSHOT_EXPECTED}")
    if not isinstance(header.get("sources"), list) or not isinstance(header.get("catalog_skips"), list):
        raise ValueError(f"the snapshot {path} has a header without its sources and catalog_skips lists: expected "
                         f"{SNAPSHOT_EXPECTED}")
    return header


def check_snapshot_sources(path: Path, header: dict, sources: tuple[PackageSource, ...]) -> None:
    """Raise `ValueError` when the snapshot (its `header`) was made from other package versions than `sources`."""
    pinned = {(source.domain, source.package, source.version) for source in sources}
    recorded = {(source["domain"], source["package"], source["version"]) for source in header["sources"]}
    if not pinned <= recorded:
        raise ValueError(
            f"the snapshot {path} was built from {sorted(recorded)}, not the requested sources {sorted(pinned)}: "
            "rebuild it with --source pypi --write_snapshot"
        )


def read_snapshot(
    path: Path, sources: tuple[PackageSource, ...], languages: tuple[str, ...], skipped: SkipCounter
) -> list[CatalogEntry]:
    """The entries of a snapshot for `languages` and the domains of `sources`, with their catalog skip counts added
    to `skipped`. Raises `ValueError` when the file is not a snapshot, or was made from other package versions
    than `sources`."""
    header = read_snapshot_header(path)
    check_snapshot_sources(path, header, sources)
    domains = {source.domain for source in sources}
    for domain, lang, reason, count in header["catalog_skips"]:
        if domain in domains and lang in languages:
            skipped.add(domain, lang, reason, count)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        handle.readline()  # the header, read above
        try:
            entries = [CatalogEntry(**json.loads(line)) for line in handle]
        except (OSError, EOFError, ValueError, TypeError) as error:  # cut short, or a line that is not an entry
            raise ValueError(f"the snapshot {path} has a damaged entry ({error}): rebuild it with --source pypi "
                             "--write_snapshot") from None
    return [entry for entry in entries if entry.domain in domains and entry.lang in languages]


__all__ = ["Pair", "pair_id", "read_wheel_entries", "clean_pairs", "write_snapshot", "read_snapshot_header",
           "check_snapshot_sources", "read_snapshot", "LANGUAGES"]
