# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The source projects of the corpus: pinned PyPI wheels whose gettext catalogs (`.po`) hold human translations.

Each project is one *domain*. Its wheel is downloaded with `pip download` at a pinned version (so every build reads
the same catalogs), and every `.../locale/<code>/LC_MESSAGES/*.po` file of a wanted language is read from the zip
without unpacking it.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

LANGUAGES = ("ar", "de", "el", "es", "fr", "it", "pt", "ru")
"""The corpus languages (those of the paper's speech experiments); English is the pivot."""

CATALOG_LANGUAGES = {"ar": "ar", "de": "de", "el": "el", "es": "es", "fr": "fr", "it": "it", "pt_BR": "pt", "ru": "ru"}
"""Catalog locale code -> corpus language. Portuguese is Brazilian Portuguese (`pt_BR`) in every domain: most
projects ship only `pt_BR`, and mixing it with Django's European `pt` would make `pt` two languages."""

CATALOG_PATH = re.compile(r"(?:^|/)locale/(?P<code>[^/]+)/LC_MESSAGES/(?P<name>[^/]+)\.po$")


def corpus_languages(languages: Iterable[str]) -> tuple[str, ...]:
    """`languages` once each, in their order (`de,de` is one language, not its files read twice); raises `ValueError`
    naming the rule for an empty list or a language the corpus lacks."""
    languages = tuple(dict.fromkeys(languages))
    if not languages:
        raise ValueError(f"languages is empty: name at least one of {list(LANGUAGES)}")
    unknown = sorted(set(languages) - set(LANGUAGES))
    if unknown:
        raise ValueError(f"unknown languages {unknown}: the offline corpus has {list(LANGUAGES)}")
    return languages


@dataclass(frozen=True)
class PackageSource:
    """One source project: a pinned PyPI distribution whose catalogs form one domain.

    Attributes:
        domain: the domain name used in file names and the `domain` column (no `_`: fairseq split names use it).
        package: the PyPI distribution name.
        version: the pinned version.
        license: the SPDX identifier of the licence the catalogs are distributed under.
        description: what kind of project it is, for the README.
        license_files: paths of the licence notices inside the wheel, copied into LICENSES.md.
    """

    domain: str
    package: str
    version: str
    license: str
    description: str
    license_files: tuple[str, ...] = ()

    def __post_init__(self):
        if "_" in self.domain or not self.domain:
            raise ValueError(
                f"domain names must be non-empty and contain no '_' (fairseq split names), got {self.domain!r}"
            )

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def wheel_glob(self) -> str:
        """The file-name pattern of this source's wheel (PyPI normalises names to lower case and `_`)."""
        return f"{re.sub(r'[-_.]+', '_', self.package).lower()}-{self.version}-*.whl"


DEFAULT_SOURCES = (
    PackageSource("django", "Django", "5.2.7", "BSD-3-Clause", "web framework (core and contrib apps)",
                  ("django-5.2.7.dist-info/licenses/LICENSE",)),
    PackageSource("wagtail", "wagtail", "7.1.1", "BSD-3-Clause", "content management system",
                  ("wagtail-7.1.1.dist-info/licenses/LICENSE",)),
    PackageSource("sphinx", "Sphinx", "8.2.3", "BSD-2-Clause", "documentation generator",
                  ("sphinx-8.2.3.dist-info/licenses/LICENSE.rst",)),
    PackageSource("oscar", "django-oscar", "4.2.1", "BSD-3-Clause", "e-commerce framework",
                  ("django_oscar-4.2.1.dist-info/licenses/LICENSE",)),
    PackageSource("horizon", "horizon", "27.0.0", "Apache-2.0", "OpenStack cloud dashboard",
                  ("horizon-27.0.0.dist-info/licenses/LICENSE",)),
)
"""The pinned sources. All are under permissive licences (BSD/Apache) that allow redistributing the catalogs' text
with the licence notice; see `LICENSES.md`."""


def download_wheels(sources: tuple[PackageSource, ...], wheel_dir: Path) -> dict[str, Path]:
    """The wheel of every source, downloaded with `pip download --no-deps --only-binary :all:` unless already in
    `wheel_dir`. Returns `{domain: wheel path}`; raises `RuntimeError` with pip's output when a download fails."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    wheels = {}
    for source in sources:
        found = sorted(wheel_dir.glob(source.wheel_glob()))
        if not found:
            logger.info("Downloading %s", source.requirement)
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                       "--disable-pip-version-check", "-q", source.requirement, "-d", str(wheel_dir)]
            result = subprocess.run(command, capture_output=True, text=True)
            found = sorted(wheel_dir.glob(source.wheel_glob()))
            if result.returncode != 0 or not found:
                raise RuntimeError(f"pip could not download {source.requirement}: {result.stderr.strip()}")
        wheels[source.domain] = found[0]
    return wheels


def iter_catalogs(wheel: Path, languages: tuple[str, ...] = LANGUAGES) -> Iterator[tuple[str, str, str]]:
    """`(language, catalog path, catalog text)` of every `.po` file of `languages` in a wheel (or any zip), in
    sorted path order. Catalogs of other locales (e.g. `pt`, `es_AR`) are ignored."""
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            match = CATALOG_PATH.search(name)
            if not match:
                continue
            language = CATALOG_LANGUAGES.get(match.group("code"))
            if language in languages:
                yield language, name, archive.read(name).decode("utf-8")


def read_license_notices(wheel: Path, source: PackageSource) -> str:
    """The text of the licence files of a source in its wheel (empty when the wheel has none of them)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        return "\n\n".join(archive.read(path).decode("utf-8").strip()
                           for path in source.license_files if path in names)
