# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Reading gettext catalogs and cleaning their entries into translation pairs.

Two steps, each counting what it skips (a [`SkipCounter`] keyed by domain, language and reason) so that nothing is
dropped silently:

1. [`read_catalog`]: the translated entries of one `.po` file as [`CatalogEntry`] objects. Fuzzy, obsolete and
   untranslated entries are skipped. A plural entry gives its *singular* pair only: `msgid` with the form the
   catalog's `Plural-Forms` formula picks for n = 1 (not always form 0: Arabic's form 0 is n = 0).
2. [`clean_entry`]: one entry as a cleaned `(source, target)` pair, or the reason it is skipped. Markup (HTML tags,
   reST/Markdown emphasis), entities and accelerator keys (`&File`, `_File`) are removed; segments with
   placeholders (`%(name)s`, `%s`, `{0}`...), URLs or leftover code-like characters are skipped (they cannot be
   spoken and would teach the model to copy tokens); so are very short or very long segments, targets that merely
   copy the English, and targets in the wrong script.
"""

from __future__ import annotations

import gettext
import html
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import polib

# %(name)s, %s, %d, %.2f, %1, {0}, {name}, {}, ${var}, $1, {{ var }}
PLACEHOLDER = re.compile(
    r"%\([^)]*\)[#0\- +]*\d*(?:\.\d+)?[a-zA-Z]"
    r"|%[#0\- +]*\d*(?:\.\d+)?[sdifuxXeEgGcr]"
    r"|%\d+"
    r"|\{\{.*?\}\}|\{[^{}\s]*\}"
    r"|\$\{?\w+\}?"
)
HTML_TAG = re.compile(r"</?[a-zA-Z][^<>]*>")
BREAKING_TAG = re.compile(r"<(?:br|/?p|/?div|/?li|/?ul|/?ol|/?h\d)\b[^<>]*>", re.IGNORECASE)
URL = re.compile(r"(?:https?://|www\.|ftp://|mailto:|\S+@\S+\.\w+)", re.IGNORECASE)
# An accelerator marker: `&` or `_` right before a letter, at the start of a word, that is not an entity (&amp;).
ACCELERATOR = re.compile(r"(?<![\w&])[&_](?=[^\W\d_])(?![A-Za-z]+;|#\d+;)")
REST_ROLE = re.compile(r":[a-z]+:`([^`]*)`")
EMPHASIS = re.compile(r"(\*\*|\*|``|`)(?=\S)(.+?)(?<=\S)\1")
CODE_LIKE = re.compile(r"[<>{}\[\]\\|`=^~]|\*|__|\w_\w|\.(?:py|html|js|css|po|txt|rst)\b")
WHITESPACE = re.compile(r"\s+")
SCRIPTS = {"ar": r"[\u0600-\u06FF]", "el": r"[\u0370-\u03FF\u1F00-\u1FFF]", "ru": r"[\u0400-\u04FF]"}
"""A target in one of these languages must contain at least one letter of its script."""

SKIP_REASONS = (
    "fuzzy", "obsolete", "untranslated", "placeholder", "url", "markup", "empty", "too_short", "too_long",
    "copy", "wrong_script", "duplicate",
)
"""Every reason an entry is skipped for, in pipeline order (see the module docstring)."""


@dataclass(frozen=True)
class CatalogEntry:
    """One translated catalog entry, before cleaning."""

    domain: str
    lang: str
    catalog: str
    context: str
    source: str
    target: str


@dataclass(frozen=True)
class CleaningRules:
    """The length limits of the cleaning step (in whitespace-separated English words)."""

    min_source_words: int = 2
    max_source_words: int = 40

    def __post_init__(self):
        if not 1 <= self.min_source_words <= self.max_source_words:
            raise ValueError(
                f"need 1 <= min_source_words <= max_source_words, got {self.min_source_words} and "
                f"{self.max_source_words}"
            )


class SkipCounter(Counter):
    """Skipped entries counted by `(domain, lang, reason)`."""

    def add(self, domain: str, lang: str, reason: str, count: int = 1) -> None:
        if reason not in SKIP_REASONS:
            raise ValueError(f"unknown skip reason {reason!r}; known: {SKIP_REASONS}")
        self[(domain, lang, reason)] += count

    def by_reason(self) -> dict[str, int]:
        """Totals per reason, in pipeline order (reasons with no skip omitted)."""
        totals = Counter()
        for (_, _, reason), count in self.items():
            totals[reason] += count
        return {reason: totals[reason] for reason in SKIP_REASONS if totals[reason]}

    def nested(self) -> dict[str, dict[str, dict[str, int]]]:
        """`{domain: {lang: {reason: count}}}`, sorted, for `stats.json`."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for (domain, lang, reason), count in sorted(self.items()):
            out.setdefault(domain, {}).setdefault(lang, {})[reason] = count
        return out


def singular_form_index(plural_forms: str | None) -> int:
    """The index of the plural form used for n = 1 under a catalog's `Plural-Forms` header (0 when there is none)."""
    if not plural_forms:
        return 0
    match = re.search(r"plural\s*=\s*([^;]+)", plural_forms)
    if not match:
        return 0
    try:
        return int(gettext.c2py(match.group(1).strip())(1))
    except (ValueError, SyntaxError):
        raise ValueError(f"cannot parse the Plural-Forms formula {plural_forms!r}") from None


def read_catalog(text: str, domain: str, lang: str, catalog: str, skipped: SkipCounter) -> list[CatalogEntry]:
    """The translated, non-fuzzy, non-obsolete entries of one `.po` catalog, in file order (singular pairs)."""
    po = polib.pofile(text)
    singular = singular_form_index(po.metadata.get("Plural-Forms"))
    entries = []
    for entry in po:
        if entry.obsolete:
            skipped.add(domain, lang, "obsolete")
            continue
        if entry.fuzzy:
            skipped.add(domain, lang, "fuzzy")
            continue
        target = entry.msgstr_plural.get(singular, "") if entry.msgid_plural else entry.msgstr
        if not entry.msgid.strip() or not target.strip():
            skipped.add(domain, lang, "untranslated")
            continue
        entries.append(CatalogEntry(domain, lang, catalog, entry.msgctxt or "", entry.msgid, target))
    return entries


def strip_markup(text: str) -> str:
    """`text` without HTML tags (line-breaking ones become spaces), reST roles and emphasis markers, entities
    decoded, accelerator markers removed and whitespace collapsed."""
    text = unicodedata.normalize("NFC", text)
    text = BREAKING_TAG.sub(" ", text)
    text = HTML_TAG.sub("", text)
    text = REST_ROLE.sub(r"\1", text)
    text = EMPHASIS.sub(r"\2", text)
    text = ACCELERATOR.sub("", text)
    text = html.unescape(text).replace("&&", "&").replace("%%", "%")
    return WHITESPACE.sub(" ", text.replace("\u00a0", " ")).strip()


def raw_skip_reason(source: str, target: str, keep_placeholders: bool = False) -> str | None:
    """Why a raw pair must be skipped before markup is stripped (placeholders, unless kept; URLs), or `None`."""
    if not keep_placeholders and (PLACEHOLDER.search(source) or PLACEHOLDER.search(target)):
        return "placeholder"
    if URL.search(source) or URL.search(target):
        return "url"
    return None


def cleaned_skip_reason(source: str, target: str, lang: str, rules: CleaningRules) -> str | None:
    """Why a cleaned pair must be skipped, or `None`."""
    if not source or not target:
        return "empty"
    if CODE_LIKE.search(source) or CODE_LIKE.search(target):
        return "markup"
    words = len(source.split())
    if words < rules.min_source_words:
        return "too_short"
    if words > rules.max_source_words:
        return "too_long"
    if normalize_text(source) == normalize_text(target):
        return "copy"
    if lang in SCRIPTS and not re.search(SCRIPTS[lang], target):
        return "wrong_script"
    return None


def clean_entry(
    entry: CatalogEntry, rules: CleaningRules = CleaningRules(), keep_placeholders: bool = False
) -> tuple[str, str] | str:
    """The cleaned `(source, target)` of an entry, or the name of the rule that skips it (see [`SKIP_REASONS`]).
    `keep_placeholders`: `%(name)s`-style placeholders do not skip it (`{0}`-style ones still do, as markup)."""
    reason = raw_skip_reason(entry.source, entry.target, keep_placeholders)
    if reason:
        return reason
    source, target = strip_markup(entry.source), strip_markup(entry.target)
    return cleaned_skip_reason(source, target, entry.lang, rules) or (source, target)


def normalize_text(text: str) -> str:
    """The form under which two segments count as identical: NFKC, case-folded, punctuation removed, whitespace
    collapsed. Used for de-duplication and to keep identical sentences in one split."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(char)[0] in "PS" else char for char in text)
    return WHITESPACE.sub(" ", text).strip()
