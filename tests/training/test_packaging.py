# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""setup.cfg installs every package of the repository: the library (`src/`), the recipes and the corpus builder
(`training/`), with their data files."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def setup_options() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def package_roots(config: configparser.ConfigParser) -> dict[str, Path]:
    """setup.cfg's `package_dir`: package name ("" for the root of the top-level packages) -> folder."""
    roots = {}
    for line in config["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        roots[name] = ROOT / folder
    return roots


def test_every_package_folder_is_listed():
    """`packages` is an explicit list (setup.cfg's `find:` searches one folder); a new subpackage must be added."""
    config = setup_options()
    roots = package_roots(config)
    found = {
        ".".join(part for part in (name, *init.parent.relative_to(folder).parts) if part)
        for name, folder in roots.items() for init in folder.rglob("__init__.py")
        if name or init.parent.parent == folder or (init.parent.parent / "__init__.py").exists()
    }
    # A folder mapped to a package name without an __init__.py ships data only (the model card template).
    data_only = {name for name, folder in roots.items() if name and not (folder / "__init__.py").exists()}
    assert found | data_only == set(config["options"]["packages"].split())


def test_corpus_snapshot_and_notes_are_package_data():
    config = setup_options()
    patterns = config["options.package_data"]["offline_corpus"].split()
    folder = ROOT / "training" / "offline_corpus"
    shipped = {path.relative_to(folder).as_posix() for pattern in patterns for path in folder.glob(pattern)}
    assert {"data/catalog_entries.jsonl.gz", "LICENSES.md"} <= shipped


# Run from the wheel's install folder, away from the checkout: every file the packages read at run time must come
# from the wheel (the card template, the corpus snapshot and its licences, the modeling files copied for remote code).
WHEEL_SMOKE = '''
import sys
from pathlib import Path

import torch
import hf_headsel, headsel_recipes, offline_corpus
from huggingface_hub import ModelCard
from transformers import AutoModelForSeq2SeqLM
from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel
from hf_headsel.hub import template_path, write_model_card
from offline_corpus.build import LICENSES_FILE
from offline_corpus.pairs import DEFAULT_SNAPSHOT

site = Path(sys.argv[1]).resolve()
for module in (hf_headsel, headsel_recipes, offline_corpus):
    assert site in Path(module.__file__).resolve().parents, module.__file__
for path in (template_path(), DEFAULT_SNAPSHOT, LICENSES_FILE):
    assert site in path.resolve().parents and path.is_file(), path

torch.manual_seed(0)
config = HeadSelMarianConfig(vocab_size=40, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                             decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
                             max_position_embeddings=32, pad_token_id=39, decoder_start_token_id=39,
                             encoder_tasks=["en"], decoder_tasks=["fr", "it"])
model = HeadSelMarianMTModel(config).eval()
model.save_pretrained("model")
card = ModelCard.load(write_model_card("model", model, {"eval_bleu_en-fr": 20.0}, repo_id="me/tiny"))
assert card.data.language == ["en", "fr", "it"], card.data.language
reloaded = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True, task="it").eval()
ids = torch.tensor([[3, 4, 5, 0]])
with torch.no_grad():
    expected = model.generate(ids, decoder_task_ids="it", max_new_tokens=5, do_sample=False)
    assert torch.equal(reloaded.generate(ids, max_new_tokens=5, do_sample=False), expected)
print("wheel ok")
'''


def test_the_wheel_installs_everything_the_packages_read(tmp_path):
    """Build the wheel as `pip wheel .` does (from a copy of the sources, so the checkout gets no build folder), install
    it into an empty folder and use it from there: imports, the model card, remote code, the corpus snapshot."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in package_roots(setup_options()).values():  # every folder setup.cfg builds from
        shutil.copytree(folder, source / folder.relative_to(ROOT), ignore=skip)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("hf_headsel-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "hf_headsel/model_cards/headsel_model_card_template.md" in names
    assert any(".dist-info/" in name and name.endswith("/LICENSE") for name in names)  # the Apache-2.0 text
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", WHEEL_SMOKE, str(site)], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "wheel ok" in run.stdout
