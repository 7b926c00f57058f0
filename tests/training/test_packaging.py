# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""setup.cfg installs every package of the repository: the library (`src/`), the recipes and the corpus builder
(`training/`), with their data files."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def setup_options() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def test_every_package_folder_is_listed():
    """`packages` is an explicit list (setup.cfg's `find:` searches one folder); a new subpackage must be added."""
    config = setup_options()
    roots = {}  # package name ("" for the root of the top-level packages) -> folder
    for line in config["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        roots[name] = ROOT / folder
    found = {
        ".".join(part for part in (name, *init.parent.relative_to(folder).parts) if part)
        for name, folder in roots.items() for init in folder.rglob("__init__.py")
        if name or init.parent.parent == folder or (init.parent.parent / "__init__.py").exists()
    }
    assert found == set(config["options"]["packages"].split())


def test_corpus_snapshot_and_notes_are_package_data():
    config = setup_options()
    patterns = config["options.package_data"]["offline_corpus"].split()
    folder = ROOT / "training" / "offline_corpus"
    shipped = {path.relative_to(folder).as_posix() for pattern in patterns for path in folder.glob(pattern)}
    assert {"data/catalog_entries.jsonl.gz", "LICENSES.md"} <= shipped
