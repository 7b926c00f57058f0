# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Where a run ran: environment.jsonl's records (the recipes' use of it: test_run_folder.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

import hf_headsel
from headsel_recipes import environment
from headsel_recipes.environment import ENVIRONMENT_LOG_NAME, describe_environment, library_commit, record_environment


def test_a_record_names_the_installed_versions_and_the_cpu_kernels_torch_uses():
    described = describe_environment()
    assert described["packages"]["transformers"] == version("transformers")
    assert described["packages"]["torch"] == torch.__version__
    assert described["packages"]["hf-headsel"] == version("hf-headsel")
    assert described["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert described["torch_threads"] == torch.get_num_threads()
    assert described["accelerators"] == [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    assert environment.package_version("no-such-distribution-here") is None


def test_records_are_appended_one_line_per_invocation(tmp_path):
    first = record_environment(tmp_path, recipe="mt", do_train=True)
    second = record_environment(tmp_path, recipe="mt", do_train=False)
    lines = [json.loads(line) for line in (tmp_path / ENVIRONMENT_LOG_NAME).read_text().splitlines()]
    assert lines == [first, second] and [line["do_train"] for line in lines] == [True, False]
    assert first.keys() >= {"time", "recipe", "packages", "hf_headsel_commit", "cpu", "cpu_capability"}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_commit_is_the_checkouts_or_none_where_git_cannot_tell(monkeypatch):
    folder = Path(hf_headsel.__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # an editable install of a clone (CI's): its commit, +dirty with changes
        assert library_commit().removesuffix("+dirty") == head.stdout.strip()
    else:  # an installed release
        assert library_commit() is None

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert library_commit() is None
