# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Tests of the offline corpus builder (`training/offline_corpus`) on tiny catalogs and wheels made here.

Speech tests need Debian's `espeak-ng` and `sox` (`apt-get install -y espeak-ng sox`) and skip without them.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile

from headsel_recipes.arguments import DataArguments, RecipeTask
from headsel_recipes.data import load_splits
from offline_corpus import CleaningRules, CorpusConfig, PackageSource, SkipCounter, SplitRules, build_corpus
from offline_corpus.manifests import manifest_row
from offline_corpus.pairs import (DEFAULT_SNAPSHOT, SNAPSHOT_FORMAT, Pair, clean_pairs, pair_id, read_snapshot,
                                  read_wheel_entries, write_snapshot)
from offline_corpus.po import CatalogEntry, clean_entry, read_catalog, singular_form_index, strip_markup
from offline_corpus.sources import DEFAULT_SOURCES, LANGUAGES, download_wheels, iter_catalogs
from offline_corpus.speech import (CONDITIONS, SPEAKERS, SynthesisResult, Utterance, add_noise, missing_tools,
                                   reusable_frames, synthesis_key, synthesize, synthesize_all, write_audio)
from offline_corpus.splits import SPLITS, assign_splits, components, crossing_sentences

ASR = RecipeTask("asr", speech=True, target_field="text", metric="wer", same_language=True)
ST = RecipeTask("st", speech=True, target_field="translation", metric="bleu")
MT = RecipeTask("mt", speech=False, target_field="target", metric="bleu")
needs_speech_tools = pytest.mark.skipif(
    bool(missing_tools()), reason=f"speech synthesis needs {missing_tools()} (apt-get install -y espeak-ng sox)"
)

PO_HEADER = '''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: {plural}\\n"

'''
GERMAN_PLURAL = "nplurals=2; plural=(n != 1);"
ARABIC_PLURAL = ("nplurals=6; plural=n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 : "
                 "n%100>=11 && n%100<=99 ? 4 : 5;")
GERMAN_PAIRS = [
    ("Save the page", "Seite speichern"),
    ("Delete this image", "Dieses Bild löschen"),
    ("Edit your profile", "Profil bearbeiten"),
    ("Add a new user", "Einen neuen Benutzer hinzufügen"),
    ("Change the password", "Das Passwort ändern"),
    ("Publish the draft", "Den Entwurf veröffentlichen"),
    ("Show all results", "Alle Ergebnisse anzeigen"),
    ("Search the documentation", "Die Dokumentation durchsuchen"),
]


def po_text(entries: list[tuple[str, str]], plural: str = GERMAN_PLURAL, extra: str = "") -> str:
    """A `.po` catalog of simple `(msgid, msgstr)` entries plus raw `extra` text."""
    body = "".join(f'msgid "{source}"\nmsgstr "{target}"\n\n' for source, target in entries)
    return PO_HEADER.format(plural=plural) + body + extra


def entry(source: str, target: str, lang: str = "de", domain: str = "web") -> CatalogEntry:
    return CatalogEntry(domain, lang, "catalog.po", "", source, target)


def make_wheel(folder: Path, package: str, version: str, catalogs: dict[str, str]) -> Path:
    """A zip named like a wheel holding `pkg/locale/<code>/LC_MESSAGES/django.po` per locale code, and a licence."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{package}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for code, text in catalogs.items():
            archive.writestr(f"{package}/locale/{code}/LC_MESSAGES/django.po", text)
        archive.writestr(f"{package}-{version}.dist-info/licenses/LICENSE", f"{package} licence text")
    return path


# --------------------------------------------------------------------------------------------------------------------
# Catalogs
# --------------------------------------------------------------------------------------------------------------------


def test_read_catalog_skips_fuzzy_obsolete_and_untranslated():
    extra = ('#, fuzzy\nmsgid "A fuzzy entry here"\nmsgstr "Ein unsicherer Eintrag"\n\n'
             'msgid "Not yet translated"\nmsgstr ""\n\n'
             'msgid "Only blanks translated"\nmsgstr "   "\n\n'
             '#~ msgid "An old entry"\n#~ msgstr "Ein alter Eintrag"\n\n'
             'msgctxt "button"\nmsgid "Save the page"\nmsgstr "Seite sichern"\n')
    skipped = SkipCounter()
    entries = read_catalog(po_text(GERMAN_PAIRS[:2], extra=extra), "web", "de", "x.po", skipped)
    assert [(e.source, e.target, e.context) for e in entries] == [
        *((source, target, "") for source, target in GERMAN_PAIRS[:2]), ("Save the page", "Seite sichern", "button")]
    assert skipped.by_reason() == {"fuzzy": 1, "obsolete": 1, "untranslated": 2}
    assert skipped.nested() == {"web": {"de": {"fuzzy": 1, "obsolete": 1, "untranslated": 2}}}


@pytest.mark.parametrize("plural, expected", [(GERMAN_PLURAL, 0), (ARABIC_PLURAL, 1), (None, 0),
                                              ("nplurals=1; plural=0;", 0)])
def test_singular_form_index(plural, expected):
    assert singular_form_index(plural) == expected


def test_plural_entries_give_the_singular_pair():
    forms = "".join(f'msgstr[{i}] "form {i} of the files"\n' for i in range(6))
    extra = f'msgid "Delete one file"\nmsgid_plural "Delete many files"\n{forms}\n'
    arabic = read_catalog(po_text([], ARABIC_PLURAL, extra), "web", "ar", "x.po", SkipCounter())
    german = read_catalog(po_text([], GERMAN_PLURAL, extra.replace(forms, forms[:60])), "web", "de", "x.po",
                          SkipCounter())
    assert [(e.source, e.target) for e in arabic] == [("Delete one file", "form 1 of the files")]
    assert [(e.source, e.target) for e in german] == [("Delete one file", "form 0 of the files")]


def test_bad_plural_formula_is_a_clear_error():
    with pytest.raises(ValueError, match="Plural-Forms"):
        singular_form_index("nplurals=2; plural=n !!! 1;")


# --------------------------------------------------------------------------------------------------------------------
# Cleaning rules
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["Delete %(name)s now", "Delete %s now", "Show %d items", "Found {0} pages",
                                    "Found {count} pages", "Open {} files", "Move %1 files", "Hello ${user} there",
                                    "Hello {{ user }} there"])
def test_placeholders_skip_the_pair(source):
    assert clean_entry(entry(source, "Etwas anderes hier")) == "placeholder"
    assert clean_entry(entry("Something else here", source)) == "placeholder"


@pytest.mark.parametrize("raw, clean", [
    ("<b>Save</b> the page", "Save the page"),
    ("First line<br/>second line", "First line second line"),
    ("Pages &amp; images", "Pages & images"),
    ("Use the :ref:`search page` now", "Use the search page now"),
    ("This is **very** *important*", "This is very important"),
    ("Keep ``literal`` text", "Keep literal text"),
    ("  Lots   of\n space\u00a0here ", "Lots of space here"),
    ("100%% done", "100% done"),
    ("Pages && images", "Pages & images"),  # a literal ampersand written twice (GTK style)
    ("Cafe\u0301 ouvert", "Caf\u00e9 ouvert"),  # decomposed accents are composed (NFC)
])
def test_markup_is_stripped(raw, clean):
    assert strip_markup(raw) == clean


@pytest.mark.parametrize("raw, clean", [
    ("&Open the file", "Open the file"), ("_Save all files", "Save all files"), ("Save &As copy", "Save As copy"),
    ("Terms & conditions", "Terms & conditions"), ("Fish &chips &amp; peas", "Fish chips & peas"),
])
def test_accelerator_keys_are_removed(raw, clean):
    assert strip_markup(raw) == clean


@pytest.mark.parametrize("source, target, lang, reason", [
    ("See https://example.com now", "Siehe https://example.com jetzt", "de", "url"),
    ("Mail admin@example.org today", "Schreiben Sie admin@example.org", "de", "url"),
    ("Set the key=value pairs", "Die key=value Paare setzen", "de", "markup"),
    ("Run the setup_tools command", "Den setup_tools Befehl starten", "de", "markup"),
    ("Save", "Speichern", "de", "too_short"),
    (" ".join(["word"] * 41), "Viele Wörter", "de", "too_long"),
    ("Save the page", "Save the page!", "de", "copy"),
    ("Save the page", "Save la page", "ru", "wrong_script"),
    ("<b></b>", "<i></i>", "de", "empty"),
    # each rule looks at both sides: the problem only in the target, or only in the source
    ("See the documentation now", "Siehe https://example.com jetzt", "de", "url"),
    ("See https://example.com now", "Siehe die Dokumentation", "de", "url"),
    ("Set the value pairs", "Die key=value Paare setzen", "de", "markup"),
    ("Save the page", "<b></b>", "de", "empty"),
])
def test_cleaning_rules_name_the_reason(source, target, lang, reason):
    assert clean_entry(entry(source, target, lang)) == reason


def test_cleaning_keeps_good_pairs_and_the_length_rules_are_configurable():
    assert clean_entry(entry("Save the <b>page</b>", "Seite speichern")) == ("Save the page", "Seite speichern")
    assert clean_entry(entry("Save the page", "Сохранить страницу", "ru")) == ("Save the page", "Сохранить страницу")
    assert clean_entry(entry("Open the Django admin", "Django: открыть админку", "ru")) == (
        "Open the Django admin", "Django: открыть админку")  # one letter of the script anywhere is enough
    forty = " ".join(["word"] * 40)  # the length limits are inclusive
    assert clean_entry(entry(forty, "Viele Wörter")) == (forty, "Viele Wörter")
    assert clean_entry(entry("Save page", "Seite speichern")) == ("Save page", "Seite speichern")
    assert clean_entry(entry(forty, "Viele Wörter"), CleaningRules(max_source_words=39)) == "too_long"
    assert clean_entry(entry("Save", "Speichern"), CleaningRules(min_source_words=1)) == ("Save", "Speichern")
    with pytest.raises(ValueError, match="min_source_words"):
        CleaningRules(min_source_words=5, max_source_words=2)


def test_duplicates_are_skipped_per_domain_and_language():
    entries = [entry("Save the page", "Seite speichern"), entry("Save the page!", "Seite sichern"),
               entry("save  the PAGE", "Seite speichern", domain="cms"), entry("Save the page", "Sauver", "fr")]
    skipped = SkipCounter()
    pairs = clean_pairs(entries, CleaningRules(), skipped)
    assert [(p.domain, p.lang, p.target) for p in pairs] == [
        ("cms", "de", "Seite speichern"), ("web", "de", "Seite speichern"), ("web", "fr", "Sauver")]
    assert skipped.by_reason() == {"duplicate": 1}
    assert len({p.id for p in pairs}) == 3


def test_cleaning_skips_are_counted_by_domain_language_and_reason():
    entries = [entry("Save the page", "Seite speichern"), entry("Delete %(name)s now", "%(name)s jetzt löschen"),
               entry("Save", "Speichern"), entry("SAVE THE PAGE", "Seite sichern"),  # case: a duplicate
               entry("Back to the list →", "Zurück zur Liste"), entry("Back to the list", "Zurück"),  # symbol too
               entry("Save", "Sauver", "fr", "cms")]
    skipped = SkipCounter()
    pairs = clean_pairs(entries, CleaningRules(), skipped)
    assert {(p.source, p.target) for p in pairs} == {("Save the page", "Seite speichern"),
                                                     ("Back to the list →", "Zurück zur Liste")}
    assert skipped.by_reason() == {"placeholder": 1, "too_short": 2, "duplicate": 2}
    assert skipped.nested() == {"cms": {"fr": {"too_short": 1}},
                                "web": {"de": {"placeholder": 1, "too_short": 1, "duplicate": 2}}}


def test_skip_counter_rejects_unknown_reasons():
    with pytest.raises(ValueError, match="unknown skip reason"):
        SkipCounter().add("web", "de", "boring")


# --------------------------------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------------------------------


def synthetic_pairs(count: int) -> list[Pair]:
    """Pairs in de and fr over shared English sources, with some targets shared by two sources."""
    pairs = []
    for index in range(count):
        source = f"English sentence number {index}"
        for lang in ("de", "fr"):
            target = f"{lang} Satz {index // 2 if index % 3 == 0 else index}"  # every 3rd shares a target
            pairs.append(Pair(f"web-{lang}-{index}", "web", lang, source, target))
    return pairs


def test_splits_keep_identical_sentences_together():
    pairs = synthetic_pairs(300)
    splits = assign_splits(pairs, SplitRules(dev_fraction=0.2, test_fraction=0.3))
    assert sum(len(members) for members in splits.values()) == len(pairs)
    assert crossing_sentences(splits) == set()
    assert all(len(splits[split]) > 30 for split in ("train", "dev", "test"))
    by_source = {}  # an English source is in one split for every language
    for split, members in splits.items():
        for pair in members:
            assert by_source.setdefault(pair.source, split) == split


def test_splits_are_deterministic_and_seeded():
    pairs = synthetic_pairs(200)
    first, again = assign_splits(pairs), assign_splits(list(reversed(pairs)))
    assert first == again
    assert assign_splits(pairs, SplitRules(seed=99))["test"] != first["test"]


def test_split_sizes_follow_the_fractions():
    pairs = [Pair(f"web-de-{i}", "web", "de", f"English sentence {i}", f"Deutscher Satz {i}") for i in range(2000)]
    splits = assign_splits(pairs, SplitRules(dev_fraction=0.1, test_fraction=0.3))
    shares = {split: len(members) / len(pairs) for split, members in splits.items()}
    assert abs(shares["dev"] - 0.1) < 0.03 and abs(shares["test"] - 0.3) < 0.03, shares


def test_large_components_go_to_train():
    pairs = [Pair(f"web-de-{i}", "web", "de", f"Source sentence {i}", "Gleiches Ziel") for i in range(10)]
    assert len(components(pairs)) == 1
    splits = assign_splits(pairs, SplitRules(dev_fraction=0.45, test_fraction=0.5, max_eval_component=5))
    assert len(splits["train"]) == 10
    # a component of max_eval_component pairs may still go to dev or test
    pairs = [Pair(f"web-de-{c}-{i}", "web", "de", f"Source {c} number {i}", f"Ziel {c}")
             for c in range(20) for i in range(5)]  # 20 components of 5 pairs
    assert len(components(pairs)) == 20
    rules = dict(dev_fraction=0.45, test_fraction=0.5)
    assert len(assign_splits(pairs, SplitRules(**rules, max_eval_component=5))["train"]) < len(pairs)
    assert len(assign_splits(pairs, SplitRules(**rules, max_eval_component=4))["train"]) == len(pairs)


def test_identical_targets_of_two_languages_do_not_join_components():
    pairs = [Pair("web-de-1", "web", "de", "Hotel booking", "Hotel"), Pair("web-fr-2", "web", "fr", "Hotels", "Hotel")]
    assert len(components(pairs)) == 2


def test_crossing_sentences_finds_shared_targets_and_sources():
    train = [Pair("web-de-1", "web", "de", "Save the page", "Gleicher Satz")]
    test = [Pair("web-de-2", "web", "de", "Keep the page", "Gleicher Satz!")]
    assert crossing_sentences({"train": train, "dev": [], "test": test}) == {"de\tgleicher satz"}
    test = [Pair("web-fr-1", "web", "fr", "save the PAGE", "Sauver")]
    assert crossing_sentences({"train": train, "dev": [], "test": test}) == {"en\tsave the page"}


@pytest.mark.parametrize("dev_fraction, test_fraction", [(0.5, 0.5), (-0.1, 0.2), (0.1, -0.2)])
def test_split_fractions_are_checked(dev_fraction, test_fraction):
    with pytest.raises(ValueError, match="dev_fraction and test_fraction"):
        SplitRules(dev_fraction=dev_fraction, test_fraction=test_fraction)


# --------------------------------------------------------------------------------------------------------------------
# Wheels, snapshot, build
# --------------------------------------------------------------------------------------------------------------------


def tiny_sources(folder: Path) -> tuple[PackageSource, ...]:
    """Two tiny 'packages' (domains web and cms) as wheels in `folder`, with de, pt_BR and other locales."""
    german = po_text(GERMAN_PAIRS)
    brazilian = po_text([("Save the page", "Salvar a página"), ("Delete this image", "Excluir esta imagem"),
                         ("Edit your profile", "Editar seu perfil")])
    make_wheel(folder, "tinyweb", "1.0", {"de": german, "pt_BR": brazilian, "pt": po_text([("A b c", "X y z")]),
                                          "es_AR": po_text([("Save the page", "Guardar la página")])})
    cms_pairs = GERMAN_PAIRS[::-1][:5] + [("Preview the page", "Vorschau")]
    make_wheel(folder, "tinycms", "2.0", {"de": po_text(cms_pairs)})
    return (PackageSource("web", "tinyweb", "1.0", "MIT", "web", ("tinyweb-1.0.dist-info/licenses/LICENSE",)),
            PackageSource("cms", "tinycms", "2.0", "MIT", "cms"))


def test_iter_catalogs_maps_locales(tmp_path):
    wheel = download_wheels(tiny_sources(tmp_path), tmp_path)["web"]  # found locally, no download
    assert [(lang, name) for lang, name, _ in iter_catalogs(wheel)] == [
        ("de", "tinyweb/locale/de/LC_MESSAGES/django.po"), ("pt", "tinyweb/locale/pt_BR/LC_MESSAGES/django.po")]
    assert [(lang, name) for lang, name, _ in iter_catalogs(wheel, ("pt",))] == [
        ("pt", "tinyweb/locale/pt_BR/LC_MESSAGES/django.po")]


def test_a_failed_download_is_an_error_naming_the_package(tmp_path, monkeypatch):
    """pip's failure is reported even when it left a file behind, and so is a download that succeeded without a
    wheel (pip is replaced: no network)."""
    source = PackageSource("web", "tinyweb", "1.0", "MIT", "web")

    def pip(wheel_written: bool, returncode: int):
        def run(command, **kwargs):
            assert command[1:4] == ["-m", "pip", "download"] and "tinyweb==1.0" in command
            if wheel_written:  # e.g. pip stopped after writing the file
                (tmp_path / "wheels" / "tinyweb-1.0-py3-none-any.whl").write_bytes(b"partial")
            return subprocess.CompletedProcess(command, returncode, "", "ERROR: no network in tests")
        return run

    for written, code in ((False, 1), (True, 1), (False, 0)):
        monkeypatch.setattr("offline_corpus.sources.subprocess.run", pip(written, code))
        with pytest.raises(RuntimeError, match="could not download tinyweb==1.0"):
            download_wheels((source,), tmp_path / "wheels")
        for wheel in (tmp_path / "wheels").glob("*.whl"):
            wheel.unlink()


@pytest.mark.parametrize("domain", ["my_domain", ""])
def test_package_source_domain_names_are_checked(domain):
    with pytest.raises(ValueError, match="non-empty and contain no '_'"):
        PackageSource(domain, "pkg", "1.0", "MIT", "x")


def test_wheel_glob_matches_pypi_file_names():
    """PyPI wheel names are lower case with `_` (Django -> django-5.2.7-..., django-oscar -> django_oscar-...)."""
    assert PackageSource("django", "Django", "5.2.7", "BSD-3-Clause", "x").wheel_glob() == "django-5.2.7-*.whl"
    assert PackageSource("oscar", "django-oscar", "4.2.1", "BSD-3-Clause", "x").wheel_glob() == (
        "django_oscar-4.2.1-*.whl")


def test_snapshot_round_trip_is_byte_stable(tmp_path):
    sources = tiny_sources(tmp_path / "wheels")
    wheels = download_wheels(sources, tmp_path / "wheels")
    skipped = SkipCounter()
    entries = read_wheel_entries(wheels, ("de", "pt"), skipped)
    for domain, lang, reason, count in (("web", "de", "fuzzy", 2), ("web", "pt", "untranslated", 1),
                                        ("cms", "de", "obsolete", 3)):
        skipped.add(domain, lang, reason, count)
    write_snapshot(tmp_path / "a.jsonl.gz", entries, sources, skipped)
    write_snapshot(tmp_path / "b.jsonl.gz", entries, sources, skipped)
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert (tmp_path / "a.jsonl.gz").read_bytes()[4:8] == bytes(4)  # no gzip timestamp: the same bytes at any time
    reread = SkipCounter()
    assert read_snapshot(tmp_path / "a.jsonl.gz", sources, ("de", "pt"), reread) == entries and reread == skipped
    assert read_snapshot(tmp_path / "a.jsonl.gz", sources[:1], ("pt",), SkipCounter()) == [
        e for e in entries if e.domain == "web" and e.lang == "pt"]
    web_german = SkipCounter()  # the entries and skip counts of the requested domains and languages only
    assert read_snapshot(tmp_path / "a.jsonl.gz", sources[:1], ("de",), web_german) == [
        e for e in entries if e.domain == "web" and e.lang == "de"]
    assert web_german == SkipCounter({("web", "de", "fuzzy"): 2})
    newer = (sources[0], PackageSource("cms", "tinycms", "2.1", "MIT", "cms"))  # refused, although web matches
    with pytest.raises(ValueError, match="rebuild it"):
        read_snapshot(tmp_path / "a.jsonl.gz", newer, ("de",), SkipCounter())
    with gzip.open(tmp_path / "a.jsonl.gz", "rt") as handle:
        assert json.loads(handle.readline())["format"].startswith("hf-headsel-offline-corpus")
    with gzip.open(tmp_path / "a.jsonl.gz", "rt") as handle:  # the header, then a line that is not an entry
        damaged = handle.readline() + '{"domain": "web"}\n'
    (tmp_path / "damaged.jsonl.gz").write_bytes(gzip.compress(damaged.encode("utf-8")))
    with pytest.raises(ValueError, match="damaged.jsonl.gz has a damaged entry"):
        read_snapshot(tmp_path / "damaged.jsonl.gz", sources, ("de",), SkipCounter())


def tiny_config(tmp_path: Path, **overrides) -> CorpusConfig:
    settings = dict(output_dir=tmp_path / "corpus", source="pypi", wheel_dir=tmp_path / "wheels",
                    snapshot=tmp_path / "none.jsonl.gz", languages=("de", "pt"),
                    packages=tiny_sources(tmp_path / "wheels"), splitting=SplitRules(0.25, 0.25, seed=3),
                    progress=False)
    return CorpusConfig(**{**settings, **overrides})


def mt_args(folder: Path, split_glob: str) -> DataArguments:
    return DataArguments(train_file=[str(folder / f"{split_glob}.jsonl")])


def test_build_text_corpus_reads_with_load_splits(tmp_path):
    config = tiny_config(tmp_path)
    stats = build_corpus(config)
    mt = config.output_dir / "mt"
    files = sorted(path.name for path in mt.glob("*.jsonl"))
    assert "train_en_de_web.jsonl" in files and "train_de_en_web.jsonl" in files
    assert all(name.split("_")[0] in ("train", "dev", "test") for name in files)
    ids = []
    for path in sorted(mt.glob("*.jsonl")):  # a file's rows are of its name's languages and domain
        split, src, tgt, domain = path.stem.split("_")
        rows = [json.loads(line) for line in path.open(encoding="utf-8")]
        assert {(r["source_lang"], r["target_lang"], r["domain"]) for r in rows} == {(src, tgt, domain)}
        assert all(r["id"].endswith("-en2x" if src == "en" else "-x2en") for r in rows)
        ids += [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 2 * stats["pairs"]
    # every pair is in both directions, in exactly one split
    counted = sum(n for split in stats["text"].values() for langs in split.values() for n in langs.values())
    assert counted == stats["pairs"] == 8 + 3 + 6  # web de, web pt (pt_BR), cms de; pt and es_AR ignored
    args = DataArguments(train_file=[str(mt / "train_en_*.jsonl")], validation_file=[str(mt / "dev_en_*.jsonl")],
                         test_file=[str(mt / "test_en_*.jsonl")])
    loaded = load_splits(MT, args, ["train", "validation", "test"], "lang", cache_dir=str(tmp_path / "cache"))
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        assert len(loaded[split]) == sum(n for langs in stats["text"][name].values() for n in langs.values()) > 0
        assert set(loaded[split]["source_lang"]) == {"en"}
    sources = [set(loaded[split]["source_text"]) for split in loaded]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    assert {p[0] for p in GERMAN_PAIRS} <= set.union(*sources)
    assert set(loaded["train"]["target_lang"]) | set(loaded["test"]["target_lang"]) == {"de", "pt"}
    x2en = load_splits(MT, DataArguments(train_file=[str(mt / "*_de_en_*.jsonl")]), ["train"], "domain",
                       cache_dir=str(tmp_path / "cache"))["train"]  # every split of de->en, read as one
    assert len(x2en) == 8 + 6
    assert set(x2en["target_lang"]) == {"en"} and "Seite speichern" in x2en["source_text"]
    assert json.loads((config.output_dir / "stats.json").read_text()) == stats
    assert stats["catalog_entries"] == 17 and stats["skipped"]["by_reason"] == {}
    table = (config.output_dir / "stats.md").read_text()
    assert "| language | cms | web | all domains |" in table
    text = stats["text"]  # a language's row: its pairs per split in each domain, and their sum
    cms, web = (" / ".join(f"{text[s].get('de', {}).get(d, 0):,}" for s in SPLITS) for d in ("cms", "web"))
    total = " / ".join(f"{sum(text[s].get('de', {}).values()):,}" for s in SPLITS)
    assert f"| de | {cms} | {web} | {total} |" in table
    assert "Catalog entries skipped" not in table  # no skip, no sentence about skips
    assert stats["speech"] == {} and stats["speech_settings"]["conditions"] == {}


def test_build_is_deterministic_and_cleans_stale_files(tmp_path):
    config = tiny_config(tmp_path)
    build_corpus(config)
    (config.output_dir / "mt" / "train_en_xx_old.jsonl").write_text("{}\n")
    first = {p.name: p.read_bytes() for p in (config.output_dir / "mt").glob("*.jsonl")}
    build_corpus(config)
    again = {p.name: p.read_bytes() for p in (config.output_dir / "mt").glob("*.jsonl")}
    assert "train_en_xx_old.jsonl" in first and "train_en_xx_old.jsonl" not in again
    del first["train_en_xx_old.jsonl"]
    assert first == again


def test_build_stats_count_every_skipped_entry(tmp_path):
    config = tiny_config(tmp_path, languages=("de",))  # before the wheel changes below (tiny_config writes wheels)
    extra = ('#, fuzzy\nmsgid "A fuzzy entry here"\nmsgstr "Ein unsicherer Eintrag"\n\n'
             'msgid "Not yet translated"\nmsgstr ""\n\n')
    make_wheel(tmp_path / "wheels", "tinyweb", "1.0", {"de": po_text(
        GERMAN_PAIRS + [("Delete", "Löschen"), ("Show %s items", "%s Einträge zeigen")], extra=extra)})
    stats = build_corpus(config)
    assert stats["catalog_entries"] == 8 + 2 + 6 and stats["pairs"] == 8 + 6
    assert stats["skipped"]["by_reason"] == {"fuzzy": 1, "untranslated": 1, "placeholder": 1, "too_short": 1}
    assert stats["skipped"]["by_domain_and_language"] == {
        "web": {"de": {"fuzzy": 1, "placeholder": 1, "too_short": 1, "untranslated": 1}}}
    assert "Catalog entries skipped: fuzzy 1, untranslated 1, placeholder 1, too_short 1." in (
        tmp_path / "corpus" / "stats.md").read_text(encoding="utf-8")


def test_wheels_default_to_the_output_folder(tmp_path, monkeypatch):
    """Without `wheel_dir` the wheels are looked for (and downloaded) in OUTPUT_DIR/wheels."""
    monkeypatch.setattr("offline_corpus.sources.subprocess.run",  # a download would be a failure, not network use
                        lambda command, **kwargs: subprocess.CompletedProcess(command, 1, "", "no network in tests"))
    sources = tiny_sources(tmp_path / "corpus" / "wheels")
    stats = build_corpus(tiny_config(tmp_path, wheel_dir=None, packages=sources))
    assert stats["pairs"] == 8 + 3 + 6


@pytest.mark.parametrize("overrides, message", [
    ({"languages": ("de", "xx")}, "unknown languages"), ({"domains": ("web", "nope")}, "unknown domains"),
    ({"languages": ()}, "languages is empty"), ({"domains": ()}, "domains is empty"),
    ({"workers": 3}, "workers must be 1 or 2"), ({"source": "ftp"}, "source must be one of"),
    ({"max_speech_per_task": -1}, "max_speech_per_task"),
    # --write_snapshot's scope is checked before any download, not after it
    ({"write_snapshot": True, "languages": ("de",)}, "every language and domain"),
    ({"write_snapshot": True, "languages": LANGUAGES, "domains": ("web",)}, "every language and domain"),
    ({"write_snapshot": True, "languages": LANGUAGES, "snapshot": DEFAULT_SNAPSHOT}, "pinned default packages"),
    ({"write_snapshot": True, "languages": LANGUAGES, "source": "snapshot"}, "needs the catalogs from PyPI"),
])
def test_config_errors_name_the_rule(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tmp_path, **overrides)


def test_a_language_named_twice_is_one_language(tmp_path):
    from offline_corpus.cli import config_from_args, parser

    config = config_from_args(parser().parse_args(["--output_dir", str(tmp_path / "corpus"), "--languages", "de,de"]))
    assert config.languages == ("de",)
    stats = build_corpus(tiny_config(tmp_path, languages=("de", "de")))
    assert stats["languages"] == ["de"]
    rows = (tmp_path / "corpus" / "stats.md").read_text(encoding="utf-8").splitlines()
    assert sum(row.startswith("| de |") for row in rows) == 1


def pinned_lookalike_wheels(folder: Path) -> None:
    """Tiny wheels named like the pinned default packages, so that a `--source pypi` build of them needs no network."""
    for source in DEFAULT_SOURCES:
        wheel = source.wheel_glob().replace("*", "py3-none-any")
        make_wheel(folder, wheel.split("-")[0], source.version, {"de": po_text(GERMAN_PAIRS)})


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned packages", "other packages"])
def test_write_snapshot_puts_the_notices_beside_a_custom_snapshot(tmp_path, monkeypatch, pinned):
    shipped = tmp_path / "shipped_LICENSES.md"  # stands in for the shipped file, which no test may overwrite
    monkeypatch.setattr("offline_corpus.build.LICENSES_FILE", shipped)
    snapshot = tmp_path / "snap" / "entries.jsonl.gz"
    settings = dict(languages=LANGUAGES, snapshot=snapshot)
    if pinned:
        pinned_lookalike_wheels(tmp_path / "wheels")
        settings["packages"] = DEFAULT_SOURCES
    build_corpus(tiny_config(tmp_path, write_snapshot=True, **settings))
    notices = (tmp_path / "snap" / "entries.jsonl.gz.LICENSES.md").read_text(encoding="utf-8")
    assert not shipped.exists()
    assert ("| django | Django==5.2.7 |" if pinned else "| web | tinyweb==1.0 | MIT |") in notices
    assert f"--write_snapshot --snapshot {snapshot}" in notices and "data/catalog_entries" not in notices
    # the written snapshot builds the same corpus
    build_corpus(tiny_config(tmp_path, output_dir=tmp_path / "again", source="snapshot", **settings))
    mt = {path.name: path.read_bytes() for path in (tmp_path / "corpus" / "mt").glob("*.jsonl")}
    assert mt and mt == {path.name: path.read_bytes() for path in (tmp_path / "again" / "mt").glob("*.jsonl")}


def test_auto_source_with_write_snapshot_rereads_the_wheels(tmp_path):
    """`--write_snapshot` with `--source auto` rewrites an existing snapshot from the wheels (not from itself)."""
    snapshot = tmp_path / "snap" / "entries.jsonl.gz"
    settings = dict(languages=LANGUAGES, snapshot=snapshot, write_snapshot=True)
    first, again = tiny_config(tmp_path, **settings), tiny_config(tmp_path, source="auto", **settings)  # made
    build_corpus(first)  # before the wheel changes below (tiny_config writes the wheels)
    changed = [(s, "Seite sichern" if s == "Save the page" else t) for s, t in GERMAN_PAIRS]
    make_wheel(tmp_path / "wheels", "tinyweb", "1.0", {"de": po_text(changed)})
    assert build_corpus(again)["source"] == "pypi"
    targets = {e.target for e in read_snapshot(snapshot, again.sources, ("de",), SkipCounter())}
    assert "Seite sichern" in targets and "Seite speichern" not in targets


# --------------------------------------------------------------------------------------------------------------------
# Speech
# --------------------------------------------------------------------------------------------------------------------


def test_add_noise_reaches_the_requested_snr():
    audio = (0.5 * np.sin(np.linspace(0, 2000, 32000))).astype(np.float32)
    noisy = add_noise(audio, snr_db=10.0, seed=1)
    noise = noisy.astype(np.float64) - audio
    snr = 10 * np.log10(np.mean(audio.astype(np.float64) ** 2) / np.mean(noise ** 2))
    assert abs(snr - 10.0) < 0.3
    assert np.array_equal(noisy, add_noise(audio, 10.0, seed=1))
    assert not np.array_equal(noisy, add_noise(audio, 10.0, seed=2))


@needs_speech_tools
def test_build_speech_manifests_read_with_load_splits(tmp_path):
    config = tiny_config(tmp_path, speech=True, max_speech_per_task=2, workers=2)
    stats = build_corpus(config)
    speech = config.output_dir / "speech"
    assert {p.stem for p in (speech / "asr").glob("*.tsv")} >= {"train_de_de_web", "train_pt_pt_web"}
    assert {p.stem for p in (speech / "st").glob("*.tsv")} >= {"train_de_en_web", "train_pt_en_web"}
    segments = sum(c["segments"] for s in stats["speech"].values() for l in s.values() for c in l.values())
    assert stats["speech_settings"]["failed"] == 0 and segments > 0
    assert all(c["segments"] <= 2 for s in stats["speech"].values() for l in s.values() for c in l.values())
    asr = load_splits(ASR, DataArguments(train_file=["train_*"], manifest_dir=str(speech / "asr")), ["train"],
                      "lang", cache_dir=str(tmp_path / "cache"))["train"]
    st = load_splits(ST, DataArguments(train_file=["train_*"], manifest_dir=str(speech / "st")), ["train"],
                     "domain", cache_dir=str(tmp_path / "cache"))["train"]
    train_segments = sum(c["segments"] for l in stats["speech"]["train"].values() for c in l.values())
    assert len(asr) == len(st) == train_segments
    assert set(st["target_lang"]) == {"en"} and set(st["domain"]) <= {"web", "cms"}
    assert all(row["source_lang"] == row["target_lang"] for row in asr)
    assert sorted(map(os.path.realpath, asr["audio"])) == sorted(map(os.path.realpath, st["audio"]))  # shared audio
    german = {source: target for source, target in GERMAN_PAIRS}
    for row in st:
        info = soundfile.info(row["audio"])
        assert (info.samplerate, info.channels) == (16000, 1) and info.frames > 1600
        if row["source_lang"] == "de":
            assert row["target_text"] in german
    rows = (speech / "asr" / "train_de_de_web.tsv").read_text().splitlines()
    header, first = rows[0].split("\t"), dict(zip(rows[0].split("\t"), rows[1].split("\t")))
    assert header == ["id", "audio", "n_frames", "tgt_text", "speaker", "src_lang", "tgt_lang"]
    assert int(first["n_frames"]) == soundfile.info(str(speech / "asr" / first["audio"])).frames
    assert first["speaker"].startswith("de-") and first["tgt_text"] in german.values()
    table = (config.output_dir / "stats.md").read_text()
    assert "Speech segments" in table and "| **hours** |" in table
    # a second build reuses the audio and writes identical manifests
    before = {p.name: p.read_bytes() for p in speech.glob("*/*.tsv")}
    build_corpus(config)
    assert before == {p.name: p.read_bytes() for p in speech.glob("*/*.tsv")}


def fake_synthesis(monkeypatch, fail_first: bool = False) -> list[list[Utterance]]:
    """Replace espeak-ng and sox in `build_corpus`: every utterance gives 0.5 s of audio (with `fail_first`, the first
    of each call fails). Returns the utterances of each call."""
    calls = []

    def synthesize_all(utterances, workers, reuse, progress):
        calls.append(utterances)
        return [SynthesisResult(u, error="espeak-ng failed (1)") if fail_first and i == 0 else SynthesisResult(u, 8000)
                for i, u in enumerate(utterances)]

    monkeypatch.setattr("offline_corpus.build.missing_tools", lambda: [])
    monkeypatch.setattr("offline_corpus.build.synthesize_all", synthesize_all)
    return calls


def test_speech_build_caps_counts_and_leaves_out_failed_segments(tmp_path, monkeypatch):
    """The first `max_speech_per_task` pairs of each split, language and domain are spoken; a failed one is counted
    and in no manifest; stale manifests go."""
    calls = fake_synthesis(monkeypatch, fail_first=True)
    config = tiny_config(tmp_path, speech=True, max_speech_per_task=2)
    stale = config.output_dir / "speech" / "asr" / "train_xx_xx_old.tsv"
    stale.parent.mkdir(parents=True)
    stale.write_text("id\n")
    stats = build_corpus(config)
    failed = calls[0][0]  # the first of train (sorted by domain, language, id)
    expected = {(split, lang, domain): min(2, n) for split, langs in stats["text"].items()
                for lang, domains in langs.items() for domain, n in domains.items()}
    expected[("train", failed.lang, failed.path.parent.parent.name)] -= 1
    got = {(split, lang, domain): cell["segments"] for split, langs in stats["speech"].items()
           for lang, domains in langs.items() for domain, cell in domains.items()}
    assert got == {key: n for key, n in expected.items() if n}
    assert stats["speech_settings"]["failed"] == 1
    assert all(cell["hours"] == round(cell["segments"] * 0.5 / 3600, 4) for langs in stats["speech"].values()
               for domains in langs.values() for cell in domains.values())
    assert {name: c["name"] for name, c in stats["speech_settings"]["conditions"].items()} == {
        "cms": "clean", "web": "telephone"}  # domains not in DOMAIN_CONDITIONS take the conditions in turn
    speech = config.output_dir / "speech"
    assert not stale.exists()
    for (split, lang, domain), n in got.items():
        for kind, target in (("asr", lang), ("st", "en")):
            lines = (speech / kind / f"{split}_{lang}_{target}_{domain}.tsv").read_text(encoding="utf-8").splitlines()
            assert len(lines) == 1 + n and all(failed.id not in line for line in lines)


def test_a_text_only_rebuild_removes_the_speech_manifests(tmp_path, monkeypatch):
    """A rebuild without speech leaves no manifest of the earlier build (its splits may differ from the new ones)."""
    fake_synthesis(monkeypatch)
    build_corpus(tiny_config(tmp_path, speech=True, max_speech_per_task=0))
    manifests = tmp_path / "corpus" / "speech"
    assert len(list(manifests.glob("*/*.tsv"))) > 4
    assert build_corpus(tiny_config(tmp_path, splitting=SplitRules(0.25, 0.25, seed=4)))["speech"] == {}
    assert not list(manifests.glob("*/*.tsv"))


@pytest.mark.parametrize("target", ["Seite\nspeichern", "Seite\tspeichern"])
def test_manifest_values_may_not_hold_tabs_or_newlines(tmp_path, target):
    pair = Pair("web-de-1", "web", "de", "Save the page", target)
    utterance = Utterance(pair.id, "de", pair.target, SPEAKERS[0], CONDITIONS[0], tmp_path / "a.wav")
    with pytest.raises(ValueError, match="tabs or newlines"):
        manifest_row(pair, SynthesisResult(utterance, 16000), tmp_path, "de")


def speech_files(corpus: Path) -> dict[str, bytes]:
    """Every wav and manifest of a corpus, by path relative to it."""
    return {path.relative_to(corpus).as_posix(): path.read_bytes() for path in sorted((corpus / "speech").rglob("*"))
            if path.suffix in (".wav", ".tsv")}


@needs_speech_tools
def test_speech_rebuild_after_a_text_change_matches_a_fresh_build(tmp_path):
    """Two fresh builds write the same bytes; a rebuild after a target changed synthesises that segment again (its
    id, a hash of the English, did not change) and so equals a fresh build of the new text."""
    settings = dict(speech=True, languages=("de",), max_speech_per_task=0)
    first, second, fresh = (tiny_config(tmp_path, output_dir=tmp_path / name, **settings)
                            for name in ("first", "second", "fresh"))  # made before the wheel changes below
    build_corpus(first)
    build_corpus(second)
    audio = speech_files(first.output_dir)
    assert audio == speech_files(second.output_dir) and len(audio) > 14
    changed = [(source, "Seite sichern" if source == "Save the page" else target) for source, target in GERMAN_PAIRS]
    make_wheel(tmp_path / "wheels", "tinyweb", "1.0", {"de": po_text(changed)})
    build_corpus(first)  # reuses the other segments' audio
    build_corpus(fresh)
    rebuilt = speech_files(first.output_dir)
    assert rebuilt == speech_files(fresh.output_dir)
    assert [name for name in audio if audio[name] != rebuilt[name] and name.endswith(".wav")] == [
        f"speech/audio/web/de/{pair_id('web', 'de', 'Save the page')}.wav"]


@needs_speech_tools
def test_synthesis_reuses_only_a_whole_wav_made_from_the_same_input(tmp_path):
    utterance = Utterance("web-de-1", "de", "Seite speichern", SPEAKERS[0], CONDITIONS[1],
                          tmp_path / "web" / "de" / "web-de-1.wav")
    made = synthesize(utterance)
    audio = utterance.path.read_bytes()
    assert made.error is None and not made.reused and made.n_samples == soundfile.info(str(utterance.path)).frames
    again = synthesize(utterance)
    assert again.reused and again.n_samples == made.n_samples
    for damaged in (audio[: len(audio) // 2], b"RIFF" + b"x" * 100):  # cut short; not a wav at all
        utterance.path.write_bytes(damaged)
        redone = synthesize(utterance)
        assert (redone.error, redone.reused, redone.n_samples) == (None, False, made.n_samples)
        assert utterance.path.read_bytes() == audio
    for change in ({"text": "Seite sichern"}, {"speaker": SPEAKERS[1]}, {"condition": CONDITIONS[0]}):
        assert not synthesize(replace(utterance, **change)).reused and utterance.path.read_bytes() != audio
        assert not synthesize(utterance).reused and utterance.path.read_bytes() == audio
    (tmp_path / "a_file").write_text("")  # a wav that cannot be written is a counted failure, not a crash
    failed = synthesize(replace(utterance, path=tmp_path / "a_file" / "x.wav"))
    assert failed.error and failed.n_samples == 0
    assert not list(tmp_path.rglob("*.part"))


def test_synthesis_key_changes_with_what_is_spoken_not_where_it_is_written(tmp_path):
    """The reuse key covers text, voice, speaker and condition (the test above without the speech tools)."""
    utterance = Utterance("web-de-1", "de", "Seite speichern", SPEAKERS[0], CONDITIONS[1], tmp_path / "a.wav")
    key = synthesis_key(utterance)
    assert synthesis_key(replace(utterance, path=tmp_path / "b.wav")) == key
    for change in ({"text": "Seite sichern"}, {"lang": "fr"}, {"speaker": SPEAKERS[1]}, {"condition": CONDITIONS[0]}):
        assert synthesis_key(replace(utterance, **change)) != key, change


def test_a_wav_whose_size_changed_is_not_reused(tmp_path):
    """The record vouches for the frame count and the byte size: bytes appended to a wav (same samples) make a
    changed file."""
    path = tmp_path / "web-de-1.wav"
    audio = (0.1 * np.sin(np.arange(16000) / 10)).astype(np.float32)
    write_audio(path, audio, "key")
    assert reusable_frames(path, "key") == 16000 and reusable_frames(path, "other key") is None
    with open(path, "ab") as handle:
        handle.write(bytes(10))
    assert soundfile.info(str(path)).frames == 16000 and reusable_frames(path, "key") is None


def test_synthesis_workers_are_limited():
    with pytest.raises(ValueError, match="workers must be between 1 and 2"):
        synthesize_all([], workers=3)


# --------------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------------


def test_cli_flags_make_the_config(tmp_path):
    from offline_corpus.cli import config_from_args, parser

    args = parser().parse_args(["--output_dir", str(tmp_path), "--languages", "de, fr", "--domains", "django",
                                "--speech", "--max_speech_per_task", "7", "--test_fraction", "0.3", "--seed", "5",
                                "--min_source_words", "3", "--quiet"])
    config = config_from_args(args)
    assert config.languages == ("de", "fr") and [s.domain for s in config.sources] == ["django"]
    assert config.speech and config.max_speech_per_task == 7 and not config.progress
    assert config.splitting == SplitRules(0.1, 0.3, 5) and config.cleaning.min_source_words == 3
    defaults = config_from_args(parser().parse_args(["--output_dir", str(tmp_path)]))
    assert defaults.reuse_audio and defaults.workers == 2 and defaults.wheel_dir is None
    assert not defaults.write_snapshot and defaults.cleaning == CleaningRules()
    args = parser().parse_args(["--output_dir", str(tmp_path), "--source", "pypi", "--write_snapshot", "--snapshot",
                                str(tmp_path / "s.jsonl.gz"), "--wheel_dir", str(tmp_path / "w"),
                                "--max_source_words", "12", "--no_reuse_audio", "--workers", "1",
                                "--max_speech_per_task", "0"])
    config = config_from_args(args)
    assert config.write_snapshot and config.wheel_dir == tmp_path / "w" and config.cleaning.max_source_words == 12
    assert not config.reuse_audio and config.workers == 1 and config.max_speech_per_task == 0  # 0: no cap


@pytest.mark.parametrize("languages, message", [("de,xx", "unknown languages ['xx']"), (",", "languages is empty")])
def test_cli_rejects_bad_flags_before_building(tmp_path, capsys, languages, message):
    from offline_corpus.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--output_dir", str(tmp_path / "out"), "--languages", languages])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bad_snapshot_is_a_clear_error_before_building(tmp_path, capsys):
    from offline_corpus.cli import main

    (tmp_path / "text.gz").write_text("not gzip")
    (tmp_path / "text.jsonl.gz").write_bytes(gzip.compress(b"not json\n"))
    (tmp_path / "other.jsonl.gz").write_bytes(gzip.compress(b'{"format": "something-else/1"}\n'))
    (tmp_path / "lists.jsonl.gz").write_bytes(gzip.compress(json.dumps({"format": SNAPSHOT_FORMAT,
                                                                         "sources": []}).encode() + b"\n"))
    for name, message in (("missing.jsonl.gz", "does not exist"), ("text.gz", "is not a corpus snapshot"),
                          ("text.jsonl.gz", "is not a corpus snapshot"), ("other.jsonl.gz", "'something-else/1'"),
                          ("lists.jsonl.gz", "without its sources and catalog_skips")):
        with pytest.raises(SystemExit) as exit_info:
            main(["--output_dir", str(tmp_path / "out"), "--source", "snapshot", "--snapshot", str(tmp_path / name)])
        error = capsys.readouterr().err
        assert exit_info.value.code == 2 and str(tmp_path / name) in error and message in error
        assert "expected a gzipped JSONL file" in error
    assert not (tmp_path / "out").exists()


def test_speech_without_tools_fails_before_building(tmp_path, monkeypatch):
    monkeypatch.setattr("offline_corpus.build.missing_tools", lambda: ["sox"])
    config = tiny_config(tmp_path, speech=True)
    with pytest.raises(RuntimeError, match="apt-get install -y espeak-ng sox"):
        build_corpus(config)
    assert not config.output_dir.exists()
