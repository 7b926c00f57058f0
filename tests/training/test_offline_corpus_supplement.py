# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Tests of the train-only supplementary pairs (`training/offline_corpus/supplement.py`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from offline_corpus import CleaningRules, CorpusConfig, SplitRules, build_corpus
from offline_corpus.pairs import Pair
from offline_corpus.po import CatalogEntry
from offline_corpus.splits import crossing_sentences
from offline_corpus.supplement import supplement_entry, supplement_pairs
from test_offline_corpus import GERMAN_PAIRS, make_wheel, po_text, tiny_config, tiny_sources


def entry(source: str, target: str, domain: str = "web", lang: str = "de") -> CatalogEntry:
    return CatalogEntry(domain, lang, "django.po", "", source, target)


def test_only_one_word_and_placeholder_segments_are_candidates():
    rules = CleaningRules()
    assert supplement_entry(entry("Save the page", "Seite speichern"), rules) is None  # the main corpus keeps it
    assert supplement_entry(entry("See https://x.org now", "Siehe https://x.org"), rules) is None  # url: not ours
    assert supplement_entry(entry("Delete", "Löschen"), rules) == ("Delete", "Löschen")
    assert supplement_entry(entry("Page %(name)s saved.", "Seite %(name)s gespeichert."), rules) == (
        "Page %(name)s saved.", "Seite %(name)s gespeichert.")
    # every other cleaning rule still applies
    assert supplement_entry(entry("Item {0} saved.", "Eintrag {0} gespeichert."), rules) == "markup"
    # the first rule that skips a candidate names it, even when its target also adds a placeholder
    assert supplement_entry(entry("Item {0} saved.", "Eintrag {0} %s gespeichert."), rules) == "markup"
    assert supplement_entry(entry("%s: see %s", "%s: siehe http://a.b/%s"), rules) == "url"
    assert supplement_entry(entry("Django", "Django"), rules) == "copy"
    assert supplement_entry(entry("Arabic", "Arabisch", lang="ar"), rules) == "wrong_script"


def test_a_target_may_drop_a_placeholder_but_not_add_one():
    rules = CleaningRules()
    assert supplement_entry(entry("a minute from now", "через %(count)s минуту", lang="ru"), rules) == (
        "extra_placeholder")
    assert supplement_entry(entry("Page %s of %s", "Seite %s von %s %s"), rules) == "extra_placeholder"  # one more
    assert supplement_entry(entry("Saved %(count)s pages", "%(count)d Seiten gespeichert"), rules) == (
        "extra_placeholder")  # another conversion breaks the formatting too
    assert supplement_entry(entry("%(size)d byte", "بايت واحد", lang="ar"), rules) == (
        "%(size)d byte", "بايت واحد")  # "one byte": the number spelt out
    assert supplement_entry(entry("%(percent)s done", "%(percent)s%% erledigt"), rules) == (
        "%(percent)s done", "%(percent)s% erledigt")  # %% is a percent sign, not a placeholder


def test_supplement_keeps_out_duplicates_and_every_dev_or_test_sentence():
    train = [Pair("web-de-1", "web", "de", "Save the page", "Seite speichern"),
             Pair("web-de-3", "web", "de", "Log in", "Anmelden")]
    dev = [Pair("web-de-4", "web", "de", "Open this image", "Öffnen")]
    test = [Pair("web-de-2", "web", "de", "Delete this image", "Löschen")]
    splits = {"train": train, "dev": dev, "test": test}
    entries = [entry("Delete", "Löschen"),  # its target is a test target: held out
               entry("Open", "Öffnen"),  # a dev target: held out too
               entry("Log-in", "Einloggen"),  # one word, but "log in" once normalised: a main-corpus pair
               entry("Image", "Bild"), entry("image", "Das Bild"),  # the second normalises to the first: duplicate
               entry("Image", "Bild", domain="cms"),  # another domain: its own pair
               entry("Edit", "Bearbeiten"), entry("Edit", "Bearbeiten", lang="ar"),  # wrong script
               entry("Save the page", "Seite speichern")]  # main corpus: not a candidate, not counted
    skipped = Counter()
    pairs = supplement_pairs(entries, CleaningRules(), splits, skipped)
    assert {(p.domain, p.source, p.target) for p in pairs} == {
        ("cms", "Image", "Bild"), ("web", "Edit", "Bearbeiten"), ("web", "Image", "Bild")}
    assert pairs == sorted(pairs, key=lambda pair: (pair.domain, pair.lang, pair.id))
    assert skipped == Counter(held_out=2, duplicate=2, wrong_script=1)
    assert crossing_sentences({**splits, "train": train + pairs}) == set()


def test_build_writes_the_supplement_on_request_beside_unchanged_splits(tmp_path):
    sources = tiny_sources(tmp_path / "wheels")
    extra = po_text(GERMAN_PAIRS + [("Delete", "Löschen"), ("Saved %(count)s pages.", "%(count)s Seiten gespeichert."),
                                    ("a minute ago", "vor %(count)s Minuten")])
    make_wheel(tmp_path / "wheels", "tinyweb", "1.0", {"de": extra})  # replaces the web wheel: three more entries
    settings = dict(source="pypi", wheel_dir=tmp_path / "wheels", snapshot=tmp_path / "none.jsonl.gz",
                    languages=("de",), packages=sources, splitting=SplitRules(0.25, 0.25, seed=3), progress=False)
    with_supplement = build_corpus(CorpusConfig(tmp_path / "with", supplement=True, **settings))
    without = build_corpus(CorpusConfig(tmp_path / "without", **settings))  # off by default
    assert with_supplement["supplement"] == {"pairs": 2, "skipped": {"extra_placeholder": 1}}
    assert without["supplement"] is None
    assert with_supplement["text"]["supplement"] == {"de": {"web": 2}} and "supplement" not in without["text"]
    rows = [json.loads(line) for line in (tmp_path / "with/mt/supplement_en_de_web.jsonl").open(encoding="utf-8")]
    assert {row["source"] for row in rows} == {"Delete", "Saved %(count)s pages."}
    assert (tmp_path / "with/mt/supplement_de_en_web.jsonl").is_file()
    for name in (path.name for path in (tmp_path / "without/mt").glob("*.jsonl")):  # the splits are unchanged
        assert (tmp_path / "with/mt" / name).read_bytes() == (tmp_path / "without/mt" / name).read_bytes()
    table = (tmp_path / "with/stats.md").read_text(encoding="utf-8")
    assert "Train-only supplementary pairs" in table and "left out: extra_placeholder 1" in table


def test_a_crossing_supplement_stops_the_build(tmp_path, monkeypatch):
    """The build checks the supplement against dev and test again (a guard: supplement_pairs keeps them apart)."""
    def crossing(entries, rules, splits, skipped):
        pair = splits["test"][0]
        return [Pair(pair.id + "x", pair.domain, pair.lang, pair.source + "!", "Etwas ganz anderes")]

    monkeypatch.setattr("offline_corpus.build.supplement_pairs", crossing)
    config = tiny_config(tmp_path, supplement=True)
    with pytest.raises(RuntimeError, match="sentences cross splits"):
        build_corpus(config)
    assert not (config.output_dir / "mt").exists()


def test_cli_flag_turns_the_supplement_on():
    from offline_corpus.cli import config_from_args, parser

    assert not config_from_args(parser().parse_args([])).supplement
    assert config_from_args(parser().parse_args(["--supplement"])).supplement
