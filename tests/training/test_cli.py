# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The command lines (`headsel_recipes.cli`): `headsel-train` dispatch, the console scripts, and the old script paths
under `training/`, which only call them."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from headsel_recipes import recipe
from headsel_recipes.cli import command, console_script
from headsel_recipes.cli.train import main as train
from headsel_recipes.tasks import MT, TASKS

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPTS = {
    "headsel-train": "headsel_recipes.cli.train",
    "headsel-experiment": "headsel_recipes.cli.experiment",
    "headsel-demo": "headsel_recipes.cli.demo",
    "headsel-build-corpus": "offline_corpus.cli",
    "headsel-push-to-hub": "headsel_recipes.cli.push_to_hub",
    "headsel-export-tasks": "headsel_recipes.cli.export_task_models",
}
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_train_lists_the_recipes_and_refuses_unknown_ones(flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train([flag])
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    assert all(f"  {name} " in usage for name in TASKS) and list(TASKS) == ["asr", "st", "mt"]
    with pytest.raises(SystemExit, match="unknown recipe 'xx'"):
        train(["xx", "--do_train"])
    with pytest.raises(SystemExit) as exit_info:
        train([])
    assert exit_info.value.code == 2


def test_train_hands_the_recipe_the_flags_after_its_name(monkeypatch):
    calls = []
    monkeypatch.setattr(recipe, "run", lambda task, argv: calls.append((task, argv)) or "result")
    assert train(["mt", "run_config.json"]) == "result"
    assert calls == [(MT, ["run_config.json"])]


def test_console_scripts_are_installed_and_return_no_result(monkeypatch):
    installed = {ep.name: ep for ep in entry_points(group="console_scripts") if ep.name.startswith("headsel-")}
    assert set(installed) == set(CONSOLE_SCRIPTS)
    for name, ep in installed.items():
        called = []
        # the module's `console`, not `main`: an entry-point wrapper passes the return value to sys.exit
        monkeypatch.setattr(importlib.import_module(CONSOLE_SCRIPTS[name]), "console", lambda: called.append(name))
        assert ep.load()() is None and called == [name]


def test_console_script_reads_the_command_line_and_returns_nothing():
    received = []

    def main(argv):
        received.append(argv)
        return {"a": "result"}  # an entry-point wrapper would pass it to sys.exit: printed, exit status 1

    assert console_script(main)() is None
    assert received == [None]  # None: main reads sys.argv[1:] itself


def test_a_console_script_without_the_training_extras_says_how_to_install_them():
    script = ("import sys; sys.modules['datasets'] = None; sys.argv = ['headsel-experiment', '--help']\n"
              "from headsel_recipes.cli import headsel_experiment; headsel_experiment()")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120)
    assert completed.returncode == 1 and "Traceback" not in completed.stderr, completed.stderr[-3000:]
    assert completed.stderr.strip().endswith("the headsel-* commands need the training extras: pip install "
                                             "'hf-headsel[train]'")
    assert "'datasets' is not installed" in completed.stderr


def test_a_module_of_this_distribution_missing_is_a_packaging_error_not_a_missing_extra():
    # only another distribution's package missing means the training extras are not installed
    with pytest.raises(ModuleNotFoundError, match="headsel_recipes.cli.no_such_command"):
        command("headsel_recipes.cli.no_such_command", "headsel-x")()


def test_headsel_train_help_answers_without_loading_torch():
    script = Path(sys.executable).parent / "headsel-train"
    if not script.exists():
        pytest.skip("the package is not installed into this interpreter's environment (pip install -e .)")
    completed = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=ENV, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("usage: headsel-train {asr,st,mt}")


@pytest.mark.parametrize(("script", "expected"), [
    ("run_mt.py", "--head_selection_strategy"),
    ("run_experiment.py", "--tables_only"),
    ("demo.py", "--make_checkpoint"),
    ("build_corpus.py", "--max_speech_per_task"),
])
def test_old_script_paths_still_run(script, expected):
    completed = subprocess.run([sys.executable, str(ROOT / "training" / script), "--help"], capture_output=True,
                               text=True, env=ENV, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert expected in completed.stdout


@pytest.mark.parametrize("script", sorted((ROOT / "training").glob("*.py")), ids=lambda path: path.name)
def test_old_scripts_are_thin_wrappers(script):
    """The scripts under training/ only import a command's `main` from the installed packages and call it."""
    code = [line for line in script.read_text().splitlines() if line and not line.startswith(("#", " ", '"""'))]
    imports = [line for line in code if line.startswith(("from ", "import "))]
    assert any(line.startswith(("from headsel_recipes.cli", "from offline_corpus.cli")) for line in imports), imports
    assert "path.insert" not in script.read_text()
    assert len(script.read_text().splitlines()) <= 20
