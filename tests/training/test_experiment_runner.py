# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment runner (`headsel_recipes.experiment.runner`): a tiny experiment end to end, planning, parts and
`init_from`, resuming, and the lanes that share an experiment's runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from recipe_testkit import TINY_TEXT, text_rows, write_jsonl

import headsel_recipes.cli.experiment as experiment_cli
import headsel_recipes.experiment.runner as runner_module
from headsel_recipes import run
from headsel_recipes.cli.experiment import main as run_experiment_command
from headsel_recipes.environment import ENVIRONMENT_LOG_NAME
from headsel_recipes.experiment.runner import CLAIM_FILE, Lane, plan_runs, run_experiment, run_flags, train_all
from headsel_recipes.experiment.lanes import LOCK_FILE, LOCK_STALE_SECONDS, STALE_SECONDS
from headsel_recipes.experiment.spec import parse_experiment
from headsel_recipes.experiment.tables import UNSUPPORTED
from headsel_recipes.results_keys import TRAIN_LOSS_EVAL_MODE, TRAIN_LOSS_TRAIN_MODE, score_key, unusable_key
from headsel_recipes.tasks import TASKS

ALL_LAYOUTS = ["avg_high_low", "per_task", "per_domain", "train_zero_shot", "components", "sweep"]


def tiny_experiment(folder: Path, data: Path) -> dict:
    """Three systems (shared baseline, adapters on top of it, group strategy) x 2 seeds on a tiny MT corpus whose
    test set has a zero-shot direction (de-fr)."""
    return {
        "name": "tiny", "recipe": "mt", "output_dir": str(folder), "seeds": [1, 2],
        "flags": {
            "train_file": [str(data / "train.jsonl")], "test_file": [str(data / "test.jsonl")],
            "config_overrides": TINY_TEXT, "vocab_size": 60, "generation_max_length": 8, "generation_num_beams": 2,
            "per_device_eval_batch_size": 16, "use_cpu": True, "save_strategy": "no", "disable_tqdm": True,
            "target_lang_token": True, "bootstrap_resamples": 100, "cache_dir": str(folder / "cache"),
        },
        "budget": {"max_steps": 2, "per_device_train_batch_size": 4, "learning_rate": 0.01},
        "groups": {"high": ["en-de", "en-fr"], "low": ["de-en"], "zero_shot": ["de-fr"]},
        "systems": [
            {"name": "Transformer", "flags": {"shared_baseline": True}},
            # the paper's adapter recipe: the trained shared model, frozen, plus per-direction adapters (H' = H)
            {"name": "Adapter", "init_from": "Transformer",
             "flags": {"config_overrides": None, "task_adapter_dim": 8, "train_only_adapters": True,
                       "total_encoder_attention_heads": 2, "total_decoder_attention_heads": 2}},
            {"name": "Group", "labels": {"strategy": "group", "components": "encoder+decoder", "H'": 4},
             "flags": {"head_selection_strategy": "group"}},
        ],
        "tables": ALL_LAYOUTS,
    }


@pytest.fixture
def zero_shot_corpus(tmp_path) -> Path:
    folder = tmp_path / "data"
    write_jsonl(folder / "train.jsonl", text_rows(48, seed=1))
    write_jsonl(folder / "test.jsonl", text_rows(9, seed=3) + text_rows(3, seed=4, directions=(("de", "fr"),)))
    return folder


def test_tiny_experiment_end_to_end_and_resume(zero_shot_corpus, tmp_path):
    out = tmp_path / "experiment"
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_experiment(out, zero_shot_corpus)))
    results = run_experiment_command([str(path)])

    runs = sorted(p.relative_to(out / "runs").as_posix() for p in (out / "runs").glob("*/seed*"))
    assert runs == [f"{system}/seed{seed}" for system in ("adapter", "group", "transformer") for seed in (1, 2)]
    # identical data, budget and seeds: the same flags but the system's own
    configs = {run: json.loads((out / "runs" / run / "run_config.json").read_text()) for run in runs}
    assert configs["group/seed2"]["seed"] == configs["transformer/seed2"]["data_seed"] == 2
    assert configs["group/seed1"]["max_steps"] == configs["adapter/seed1"]["max_steps"] == 2
    assert configs["adapter/seed1"]["model_name_or_path"] == str(out / "runs/transformer/seed1")

    assert [table["layout"] for table in results["tables"]] == ALL_LAYOUTS
    systems = results["systems"]
    assert systems["Adapter"]["zero_shot"] is False and systems["Group"]["zero_shot"] is True
    scores = systems["Group"]["seeds"]["1"]["scores"]
    assert set(scores) == {"de-en", "de-fr", "en-de", "en-fr"}
    low, high = systems["Group"]["seeds"]["1"]["ci"]["en-de"]
    assert low <= scores["en-de"] <= high

    table4 = results["tables"][3]
    assert table4["header"] == ["System", "AVG-A", "AVG-T", "AVG-Z"]
    adapter_row = next(row for row in table4["rows"] if row["label"] == "Adapter")
    assert [cell.get("note") for cell in adapter_row["cells"]] == [UNSUPPORTED, None, UNSUPPORTED]
    group_row = next(row for row in table4["rows"] if row["label"] == "Group")
    training = ("de-en", "en-de", "en-fr")
    per_seed = [np.mean([s["scores"][g] for g in training]) for s in systems["Group"]["seeds"].values()]
    assert group_row["cells"][1]["mean"] == pytest.approx(np.mean(per_seed))
    assert group_row["cells"][1]["std"] == pytest.approx(np.std(per_seed, ddof=1))

    markdown = (out / "results.md").read_text()
    for title in ("Table 1", "Table 2", "Tables 3 and 5", "Table 4", "Table 6", "Figure 2", "Bootstrap 95%"):
        assert title in markdown
    assert all((out / "runs" / run / ENVIRONMENT_LOG_NAME).is_file() for run in runs)
    assert "environments" not in markdown  # every run trained here, in one environment
    assert (out / results["tables"][5]["figure"]).stat().st_size > 0
    assert json.loads((out / "results.json").read_text())["tables"] == results["tables"]

    # finished runs are skipped: a second pass trains nothing and gives the same tables
    def must_not_train(task, args):
        raise AssertionError(f"retrained {args}")

    again = run_experiment(parse_experiment(tiny_experiment(out, zero_shot_corpus)), TASKS, must_not_train)
    assert again["tables"] == results["tables"]


def fake_recipe(scores_by_system: dict[str, dict[str, float]], calls: list, unusable: dict[str, float] | None = None,
                split: str = "predict"):
    """A recipe stand-in: writes `{split}_results.json` (the system's scores + seed, and its share of unusable
    hypotheses where `unusable` gives one) and a `config.json`."""

    def run(task, args):
        flags = json.loads(Path(args[0]).read_text())
        out = Path(flags["output_dir"])
        calls.append(out)
        system = out.parts[out.parts.index("runs") + 1]
        part_scores = scores_by_system[system if out.name.startswith("seed") else f"{system}/{out.name}"]
        results = {score_key("bleu", g, split=split): v + flags["seed"] for g, v in part_scores.items()}
        if unusable and system in unusable:
            results[unusable_key(split)] = unusable[system]
        (out / f"{split}_results.json").write_text(json.dumps(results))
        config = {"task_type": "lang", "task_adapter_dim": flags.get("task_adapter_dim", 0),
                  "task_adapter_key": flags.get("task_adapter_key", "direction")}
        (out / "config.json").write_text(json.dumps(config))

    return run


def test_parts_init_from_order_and_resume(tmp_path):
    values = {
        "recipe": "st", "output_dir": str(tmp_path / "exp"), "seeds": [0, 10],
        "flags": {"train_file": ["all.jsonl"]}, "budget": {"max_steps": 5},
        "systems": [
            {"name": "Adapter", "init_from": "Joint", "flags": {"task_adapter_dim": 4, "task_adapter_key": "task"}},
            {"name": "Joint", "flags": {"shared_baseline": True}},
            {"name": "Separate", "flags": {"shared_baseline": True},
             "parts": {"tedx": {"train_file": ["tedx.jsonl"]}, "covost": {"train_file": ["covost.jsonl"]}}},
        ],
        "tables": ["per_domain"],
    }
    experiment = parse_experiment(values)
    order = [(run.system.name, run.seed, run.part) for run in plan_runs(experiment)]
    assert order[:2] == [("Joint", 0, None), ("Joint", 10, None)]  # the init_from source first
    assert ("Separate", 10, "covost") in order and len(order) == 8
    separate = next(run for run in plan_runs(experiment) if run.part == "covost")
    assert run_flags(experiment, separate)["train_file"] == ["covost.jsonl"]
    assert run_flags(experiment, separate)["max_steps"] == 5
    assert run_flags(experiment, separate)["resume_from_checkpoint"] == "last"  # an interrupted run resumes

    scores = {"joint": {"tedx": 10.0, "covost": 20.0}, "adapter": {"tedx": 12.0, "covost": 21.0},
              "separate/tedx": {"tedx": 8.0}, "separate/covost": {"covost": 22.0}}
    calls = []
    results = run_experiment(experiment, TASKS, fake_recipe(scores, calls))
    assert len(calls) == 8
    row = next(r for r in results["tables"][0]["rows"] if r["label"] == "Separate")
    assert [c["mean"] for c in row["cells"]] == [20.0, 27.0, 13.0]  # AVG, covost, tedx: seeds 0 and 10 add 0 / 10
    assert row["cells"][0]["std"] == pytest.approx(np.std([15.0, 25.0], ddof=1))
    assert results["systems"]["Adapter"]["zero_shot"] is True  # adapters per task, not per direction

    # a lost run is redone, the others are kept
    (tmp_path / "exp/runs/separate/seed10/tedx/predict_results.json").unlink()
    calls.clear()
    run_experiment(experiment, TASKS, fake_recipe(scores, calls))
    assert calls == [tmp_path / "exp/runs/separate/seed10/tedx"]


def test_run_flags_layer_shared_budget_system_part_and_start_from_the_same_seed_and_part(tmp_path):
    """A system's flags override the shared flags and budget (e.g. fewer steps for adapters on a trained model), a
    part's the system's; an `init_from` run starts from its source's run of the same seed and part."""
    experiment = parse_experiment({
        "recipe": "st", "output_dir": str(tmp_path / "exp"), "seeds": [1, 2],
        "flags": {"train_file": ["all.jsonl"]}, "budget": {"max_steps": 5, "learning_rate": 0.01},
        "systems": [{"name": "Separate", "parts": {"tedx": {}, "covost": {}}},
                    {"name": "Adapted", "init_from": "Separate", "flags": {"max_steps": 2, "task_adapter_dim": 4},
                     "parts": {"tedx": {"train_file": ["tedx.jsonl"], "max_steps": 3}, "covost": {}}}]})
    flags = {(run.system.name, run.seed, run.part): run_flags(experiment, run) for run in plan_runs(experiment)}
    assert flags["Separate", 2, "covost"]["max_steps"] == 5
    assert flags["Adapted", 2, "covost"]["max_steps"] == 2  # the system's budget over the shared one
    assert flags["Adapted", 2, "covost"]["learning_rate"] == 0.01  # the rest of the shared budget kept
    assert (flags["Adapted", 2, "tedx"]["max_steps"], flags["Adapted", 2, "tedx"]["train_file"]) == (3, ["tedx.jsonl"])
    for seed in (1, 2):
        for part in ("tedx", "covost"):
            run = flags["Adapted", seed, part]
            assert run["model_name_or_path"] == str(tmp_path / f"exp/runs/separate/seed{seed}/{part}")
            assert (run["seed"], run["data_seed"]) == (seed, seed)


def test_a_dry_run_lists_only_the_runs_left_to_train(tmp_path, capsys):
    experiment = lanes_experiment(tmp_path)
    run_experiment(experiment, TASKS, fake_recipe(LANES_SCORES, []))
    (tmp_path / "exp/runs/group/seed2/predict_results.json").unlink()  # lost: the one run to train again
    capsys.readouterr()
    assert run_experiment(experiment, TASKS, fake_recipe(LANES_SCORES, calls := []), dry_run=True) is None
    assert calls == []
    assert capsys.readouterr().out.splitlines() == [
        f"headsel-train st {tmp_path / 'exp/runs/group/seed2/run_config.json'}  # Group, seed 2"]


def test_systems_option_trains_only_those_and_their_sources(tmp_path):
    """`--systems`: the named systems and what they start from are trained; the tables list every system, the
    others as missing; an unknown name fails before anything trains."""
    experiment = lanes_experiment(tmp_path)
    scores = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 11.0}}
    calls = []
    with pytest.raises(ValueError, match="unknown system 'Nope'.*Joint"):
        run_experiment(experiment, TASKS, fake_recipe(scores, calls), systems=["Adapter", "Nope"])
    assert calls == []
    assert [(r.system.name, r.seed) for r in plan_runs(experiment, ["Adapter"])] == [
        ("Joint", 1), ("Joint", 2), ("Adapter", 1), ("Adapter", 2)]

    results = run_experiment(experiment, TASKS, fake_recipe(scores, calls), systems=["Adapter"])
    assert sorted(path.relative_to(tmp_path / "exp/runs").as_posix() for path in calls) == [
        "adapter/seed1", "adapter/seed2", "joint/seed1", "joint/seed2"]
    cells = {row["label"]: row["cells"] for row in results["tables"][0]["rows"]}
    assert cells["Group"][0] == {"note": "missing"}
    assert cells["Adapter"][0]["mean"] == 13.5  # seeds 1 and 2 add 1 and 2 to 12

    calls.clear()
    run_experiment(experiment, TASKS, fake_recipe(scores, calls))  # the rest, later: only Group is left
    assert sorted(path.parent.name for path in calls) == ["group", "group"]


def lanes_experiment(tmp_path, output_dir: Path | None = None, **changes):
    """Joint, Adapter (from Joint) and Group x seeds 1 and 2 (`changes`: keys of the file to set otherwise)."""
    return parse_experiment({
        "recipe": "st", "output_dir": str(tmp_path / "exp"), "seeds": [1, 2], "budget": {"max_steps": 5},
        "systems": [{"name": "Joint", "flags": {"shared_baseline": True}},
                    {"name": "Adapter", "init_from": "Joint", "flags": {"task_adapter_dim": 4}},
                    {"name": "Group", "flags": {"head_selection_strategy": "group"}}],
        "tables": ["per_domain"], **changes}, output_dir)


LANES_SCORES = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 11.0}}


def test_runs_trained_with_other_flags_stop_the_experiment_before_any_run_trains(tmp_path):
    """An experiment file edited after some runs trained: skipping its finished runs (or resuming one from its
    checkpoint) would put two settings in one table, so it is an error naming the runs and changed flags, also for
    the tables alone. A moved experiment folder, or runs only planned (a dry run), change nothing."""
    run_experiment(lanes_experiment(tmp_path), TASKS, fake_recipe(LANES_SCORES, calls := []))
    (tmp_path / "exp/runs/group/seed2/predict_results.json").unlink()  # interrupted: its last checkpoint is left
    (tmp_path / "exp/runs/group/seed2/checkpoint-3").mkdir()
    calls.clear()
    edited = lanes_experiment(tmp_path, budget={"max_steps": 500})
    for tables_only in (False, True):
        with pytest.raises(ValueError) as error:
            run_experiment(edited, TASKS, fake_recipe(LANES_SCORES, calls), tables_only=tables_only)
        message = str(error.value)
        assert "6 run(s) trained with other flags than the experiment file now gives them" in message
        assert f"{tmp_path / 'exp/runs/group/seed2'}: max_steps 5 -> 500" in message
        assert "its own folder" in message and "delete those run folders" in message
    assert calls == []

    shutil.copytree(tmp_path / "exp", tmp_path / "moved")  # Adapter's source path moves with the folder
    run_experiment(lanes_experiment(tmp_path, tmp_path / "moved"), TASKS, fake_recipe(LANES_SCORES, calls))
    assert calls == [tmp_path / "moved/runs/group/seed2"]  # only the interrupted run

    planned = lanes_experiment(tmp_path, tmp_path / "planned")
    assert run_experiment(planned, TASKS, fake_recipe(LANES_SCORES, calls), dry_run=True) is None
    calls.clear()
    run_experiment(lanes_experiment(tmp_path, tmp_path / "planned", budget={"max_steps": 500}), TASKS,
                   fake_recipe(LANES_SCORES, calls))
    assert len(calls) == 6


# A flag the file no longer sets falls back to the recipe's default: the runs trained with it are changed too.
def test_a_flag_removed_from_the_file_after_runs_trained_is_a_change(tmp_path):
    run_experiment(lanes_experiment(tmp_path, flags={"label_smoothing_factor": 0.1}), TASKS,
                   fake_recipe(LANES_SCORES, []))
    with pytest.raises(ValueError, match=r"label_smoothing_factor 0\.1 -> unset"):
        run_experiment(lanes_experiment(tmp_path), TASKS, fake_recipe(LANES_SCORES, calls := []))
    assert calls == []


def test_systems_option_still_checks_every_run_the_tables_read(tmp_path):
    """`--systems Adapter` trains Joint and Adapter, but the tables also read Group's runs: trained with other flags
    than the file now gives them, they are an error too."""
    run_experiment(lanes_experiment(tmp_path), TASKS, fake_recipe(LANES_SCORES, []))
    edited = lanes_experiment(tmp_path, systems=[
        {"name": "Joint", "flags": {"shared_baseline": True}},
        {"name": "Adapter", "init_from": "Joint", "flags": {"task_adapter_dim": 4}},
        {"name": "Group", "flags": {"head_selection_strategy": "subset"}}])
    with pytest.raises(ValueError, match=r"runs/group/seed1: head_selection_strategy 'group' -> 'subset'"):
        run_experiment(edited, TASKS, fake_recipe(LANES_SCORES, calls := []), systems=["Adapter"])
    assert calls == []


def test_runs_whose_source_never_finished_are_named(tmp_path, caplog):
    """A run whose `init_from` source failed is not started, and the log says so."""
    def joint_fails(task, args):  # Joint's runs end without results
        if Path(json.loads(Path(args[0]).read_text())["output_dir"]).parent.name != "joint":
            fake_recipe(LANES_SCORES, [])(task, args)

    with caplog.at_level("WARNING", logger="headsel_recipes.experiment"):
        trained = train_all(lanes_experiment(tmp_path), TASKS["st"], joint_fails, poll_seconds=0.01)
    assert sorted((run.system.name, run.seed) for run in trained) == [("Group", 1), ("Group", 2), ("Joint", 1),
                                                                      ("Joint", 2)]
    assert "2 run(s) not started, their init_from source never finished" in caplog.text
    assert f"{tmp_path / 'exp/runs/adapter/seed1'} (from Joint)" in caplog.text


def test_runs_that_did_not_learn_are_named_in_the_report(tmp_path, caplog):
    """A run whose hypotheses are mostly empty or looping is named above the tables (and logged): its scores compare
    nothing. Runs below the share, or that did not record it, are not."""
    experiment = lanes_experiment(tmp_path)
    scores = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 0.0}}
    with caplog.at_level("WARNING", logger="headsel_recipes.experiment"):
        results = run_experiment(experiment, TASKS, fake_recipe(scores, [], unusable={"group": 0.9, "joint": 0.1}))
    markdown = (tmp_path / "exp/results.md").read_text()
    warning = markdown[markdown.index("**Runs that did not learn their task**"):markdown.index("###")]
    assert "- Group (seed 1): 90% of the hypotheses empty or looping" in warning and "Group (seed 2)" in warning
    assert "Joint" not in warning and "Adapter" not in warning
    assert "2 run(s) did not learn their task" in caplog.text
    assert results["systems"]["Group"]["seeds"]["1"]["unusable"] == 0.9
    assert results["systems"]["Joint"]["seeds"]["2"]["unusable"] == 0.1
    assert results["systems"]["Adapter"]["seeds"]["1"]["unusable"] is None

    caplog.clear()
    for seed in (1, 2):  # once the runs learned, no warning
        path = tmp_path / f"exp/runs/group/seed{seed}/predict_results.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), unusable_key("predict"): 0.2}))
    run_experiment(experiment, TASKS, fake_recipe(scores, []), tables_only=True)
    assert "did not learn" not in (tmp_path / "exp/results.md").read_text() and "did not learn" not in caplog.text

    # a run from before the key: its share is read off its test predictions
    write_jsonl(tmp_path / "exp/runs/adapter/seed1/generated_predictions.jsonl", [
        {"id": str(i), "group": "tedx", "reference": "ok", "prediction": hypothesis}
        for i, hypothesis in enumerate(["", "da da da da", "ok"])])
    results = run_experiment(experiment, TASKS, fake_recipe(scores, []), tables_only=True)
    assert results["systems"]["Adapter"]["seeds"]["1"]["unusable"] == 0.6667
    assert "- Adapter (seed 1): 67% of the hypotheses empty or looping" in (tmp_path / "exp/results.md").read_text()


def write_environment(folder: Path, *records: dict) -> None:
    """`folder`'s environment.jsonl: a record per invocation, on top of one environment (torch 2.13, AVX512)."""
    base = {"hf_headsel_commit": "abc1234", "packages": {"torch": "2.13.0", "transformers": "5.24.0"},
            "cpu": "EPYC", "cpu_capability": "AVX512", "accelerators": [], "do_train": True}
    (folder / ENVIRONMENT_LOG_NAME).write_text("".join(json.dumps({**base, **record}) + "\n" for record in records))


def test_runs_trained_in_other_environments_are_named_in_the_report(tmp_path, caplog):
    """Runs trained with other code, library versions or CPU kernels round differently: the report names each
    environment's runs (by the values that vary among them) and the runs without records; nothing when all agree or
    none says."""
    experiment = lanes_experiment(tmp_path)
    scores = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 11.0}}
    run_experiment(experiment, TASKS, fake_recipe(scores, []))
    assert "environments" not in (tmp_path / "exp/results.md").read_text()  # no run says where it ran
    runs = tmp_path / "exp/runs"
    for folder in ("joint/seed1", "joint/seed2", "group/seed1", "group/seed2", "adapter/seed1"):
        write_environment(runs / folder, {}, {"do_train": False, "cpu_capability": "AVX2"})  # scored elsewhere
    with caplog.at_level("WARNING", logger="headsel_recipes.experiment"):
        run_experiment(experiment, TASKS, fake_recipe(scores, []), tables_only=True)
    markdown = (tmp_path / "exp/results.md").read_text()
    section = markdown[markdown.index("**Runs trained in 2 environments**"):markdown.index("###")]
    assert "- no record (trained before runs said where they ran): Adapter (seed 2)" in section
    assert "trained in 2 environments" in caplog.text

    write_environment(runs / "adapter/seed2", {})
    with open(runs / "adapter/seed2" / ENVIRONMENT_LOG_NAME, "a") as log:
        log.write('{"do_train": true, "cpu_capa\n')  # cut short: skipped, with a warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="headsel_recipes.experiment"):
        run_experiment(experiment, TASKS, fake_recipe(scores, []), tables_only=True)  # one environment: nothing
    assert "environments" not in (tmp_path / "exp/results.md").read_text()
    assert "line 2 is not JSON; skipped" in caplog.text

    write_environment(runs / "adapter/seed2", {"cpu_capability": "AVX2", "packages": {"torch": "2.14.1",
                                                                                      "transformers": "5.24.0"}})
    write_environment(runs / "group/seed2", {}, {"hf_headsel_commit": "def5678"})  # resumed with other code
    run_experiment(experiment, TASKS, fake_recipe(scores, []), tables_only=True)
    section = (tmp_path / "exp/results.md").read_text().split("**Runs trained in 3 environments**")[1].split("###")[0]
    assert ("- hf_headsel_commit abc1234, cpu_capability AVX512, torch 2.13.0: Joint (seed 1), Joint (seed 2), "
            "Adapter (seed 1), Group (seed 1)") in section
    assert "- hf_headsel_commit abc1234, cpu_capability AVX2, torch 2.14.1: Adapter (seed 2)" in section
    assert ("- hf_headsel_commit def5678, cpu_capability AVX512, torch 2.13.0 (resumed in 2 environments): "
            "Group (seed 2)") in section


def test_runs_that_work_only_with_their_training_noise_are_named_in_the_report(tmp_path):
    """A run whose model scores its training examples far worse in evaluation mode than in training mode is named
    above the tables with both losses, which `results.json` keeps; a run with the usual small gap is not."""
    experiment = lanes_experiment(tmp_path)
    scores = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 11.0}}
    run_experiment(experiment, TASKS, fake_recipe(scores, []))
    for system, losses in (("group", (6.67, 4.71)), ("joint", (4.60, 4.70))):
        (tmp_path / f"exp/runs/{system}/seed1/train_results.json").write_text(json.dumps(
            {TRAIN_LOSS_EVAL_MODE: losses[0], TRAIN_LOSS_TRAIN_MODE: losses[1]}))
    results = run_experiment(experiment, TASKS, fake_recipe(scores, []), tables_only=True)
    markdown = (tmp_path / "exp/results.md").read_text()
    warning = markdown[markdown.index("**Runs that did not learn their task**"):markdown.index("###")]
    assert ("- Group (seed 1): works only with its training-time noise (loss on training examples 6.67 in "
            "evaluation mode, 4.71 in training mode)") in warning
    assert "Joint" not in warning and "Group (seed 2)" not in warning
    assert results["systems"]["Joint"]["seeds"]["1"]["mode_losses"] == [4.60, 4.70]
    assert results["systems"]["Group"]["seeds"]["2"]["mode_losses"] is None


def test_lanes_share_the_runs_and_wait_for_init_from_sources(tmp_path):
    """Two lanes on one experiment: every run trained once, and an `init_from` run only after its source ended."""
    experiment = lanes_experiment(tmp_path)
    scores = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 11.0}}
    calls, finished, lock = [], [], threading.Lock()
    write_results = fake_recipe(scores, calls)

    def slow_recipe(task, args):
        out = Path(json.loads(Path(args[0]).read_text())["output_dir"])
        assert (out / CLAIM_FILE).exists()  # held while training
        if out.parts[-2] == "adapter":
            with lock:
                assert out.parent.parent / "joint" / out.name in finished  # the source run ended first
        time.sleep(0.05)
        write_results(task, args)
        with lock:
            finished.append(out)

    lanes = [threading.Thread(target=train_all, args=(experiment, TASKS["st"], slow_recipe),
                              kwargs={"poll_seconds": 0.01}) for _ in range(2)]
    for lane in lanes:
        lane.start()
    for lane in lanes:
        lane.join()
    assert sorted(calls) == sorted(run.output_dir for run in plan_runs(experiment))  # each run exactly once
    assert not list((tmp_path / "exp").rglob(f"{CLAIM_FILE}*"))  # claims (and their drafts) released


def test_lanes_option_trains_in_several_processes(zero_shot_corpus, tmp_path, monkeypatch):
    """`--lanes 2`: a second process of the command trains beside this one, logging to `lane2.log`; every run is
    trained once and the tables, written after both lanes ended, hold them all. Bad values fail at parsing."""
    out = tmp_path / "experiment"
    values = tiny_experiment(out, zero_shot_corpus)
    values.update(seeds=[1], systems=values["systems"][::2], tables=["per_task"])  # Transformer and Group
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(values))
    other_claim = out / "runs/group/seed1" / CLAIM_FILE
    claimed_by = []

    def wait_for_the_second_lane(task, args):  # this lane trains Transformer once lane 2 has claimed Group
        deadline = time.monotonic() + 120
        while not other_claim.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        claimed_by.append(int(other_claim.read_text().split()[1]))
        return run(task, args)

    monkeypatch.setattr(experiment_cli, "run", wait_for_the_second_lane)
    results = run_experiment_command([str(path), "--lanes", "2"])

    assert claimed_by and claimed_by[0] != os.getpid()  # Group was trained by the other process
    assert "runs/group/seed1" in (out / "lane2.log").read_text()  # whose recipe output went to its log
    assert sorted(results["systems"]) == ["Group", "Transformer"]
    assert all(entry["seeds"]["1"]["scores"] for entry in results["systems"].values())
    assert not list(out.rglob(f"{CLAIM_FILE}*"))
    for bad in (["--lanes", "0"], ["--lanes", "2", "--tables_only"]):
        with pytest.raises(SystemExit):
            run_experiment_command([str(path), *bad])


def test_other_lanes_get_the_same_folder_and_systems(tmp_path, monkeypatch):
    """`--lanes 3 --output_dir X --systems Group`: the two other lanes run this command on the same experiment folder
    and systems (without `--lanes`), and this lane trains only Group, into X."""
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"recipe": "st", "output_dir": str(tmp_path / "exp"), "seeds": [1],
                                    "budget": {"max_steps": 5}, "tables": ["per_domain"],
                                    "systems": [{"name": "Joint"}, {"name": "Group"}]}))
    started = []
    monkeypatch.setattr(experiment_cli, "start_lanes",
                        lambda count, args, output_dir: started.append((count, args, output_dir)) or [])
    monkeypatch.setattr(experiment_cli, "run", fake_recipe(LANES_SCORES, calls := []))
    moved = tmp_path / "moved"
    run_experiment_command([str(path), "--lanes", "3", "--output_dir", str(moved), "--systems", "Group"])
    assert started == [(2, [str(path), "--output_dir", str(moved), "--systems", "Group"], moved)]
    assert calls == [moved / "runs/group/seed1"]


@pytest.mark.parametrize("code, status", [
    ("raise SystemExit(3)", 3),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),  # killed (e.g. out of memory)
])
def test_a_failed_lane_is_an_error_naming_its_log(code, status, tmp_path, monkeypatch):
    experiment = lanes_experiment(tmp_path)
    log = tmp_path / "exp/lane2.log"
    failing = [(subprocess.Popen([sys.executable, "-c", code]), log)]
    monkeypatch.setattr(experiment_cli, "start_lanes", lambda count, args, output_dir: failing)
    scores = {"joint": {"tedx": 10.0}, "adapter": {"tedx": 12.0}, "group": {"tedx": 11.0}}
    monkeypatch.setattr(experiment_cli, "run", fake_recipe(scores, calls := []))
    with pytest.raises(RuntimeError, match=rf"1 of 2 lanes failed; their logs: {log} \(exit status {status}\)"):
        experiment_cli.train_in_lanes(experiment, experiment_cli.parse_args(["exp.yaml", "--lanes", "2"]))
    assert len(calls) == 6  # this lane still trained every run


def test_lane_claims_skip_live_lanes_and_take_over_stopped_ones(tmp_path):
    run = plan_runs(lanes_experiment(tmp_path))[0]
    run.output_dir.mkdir(parents=True)
    claim = run.output_dir / CLAIM_FILE
    lane = Lane()
    claim.write_text("another-machine 1 abc\n")  # another machine: counted as live
    assert lane.held_by_another(run) and not lane.claim(run)
    stopped = subprocess.Popen([sys.executable, "-c", "pass"])
    stopped.wait()
    claim.write_text(f"{socket.gethostname()} {stopped.pid} abc\n")  # a lane whose process has ended
    assert not lane.held_by_another(run) and lane.claim(run)
    assert claim.read_text().split()[2] == lane.id and not lane.held_by_another(run)
    assert Lane().held_by_another(run)  # this process, another lane
    lane.release(run)
    assert not claim.exists()


def test_stale_claims_are_taken_over_whatever_their_pid_or_host(tmp_path):
    """A claim is stale when its lane's process no longer runs, even where its pid runs another process (the start
    time differs), and, where the process cannot be checked (another machine, or a claim in the older format), when
    neither the claim (its heartbeat) nor the run folder changed for `STALE_SECONDS`: e.g. the claims an archive of
    finished runs carries."""
    run = plan_runs(lanes_experiment(tmp_path))[0]
    run.output_dir.mkdir(parents=True)
    claim, lane, here = run.output_dir / CLAIM_FILE, Lane(), socket.gethostname()
    long_ago = time.time() - 2 * STALE_SECONDS

    def taken_over(text: str, touched: float | None = None) -> bool:
        """Whether `lane` takes over the claim `text` (last touched at `touched`, default now)."""
        claim.write_text(text)
        if touched is not None:
            os.utime(claim, (touched, touched))
        taken = lane.claim(run)
        if taken:
            lane.release(run)
        return taken

    assert taken_over(f"{here} {os.getpid()} abc\n", long_ago)  # older format: the pid runs, no heartbeat for long
    assert not taken_over(f"{here} {os.getpid()} abc\n")
    this_process = Lane().text().split()  # host pid lane boot start
    assert taken_over(f"{here} {os.getpid()} abc {this_process[3]} 1\n")  # the pid of a process started at another time
    assert not taken_over(f"{here} {os.getpid()} abc {this_process[3]} {this_process[4]}\n", long_ago)  # it runs
    assert taken_over("other-host 557 dc47290c7b18\n", long_ago)  # another machine (or its copied folder), silent
    assert not taken_over("other-host 557 dc47290c7b18\n")  # its heartbeat is recent
    (run.output_dir / "checkpoint-100").mkdir()
    (run.output_dir / "checkpoint-100" / "trainer_state.json").write_text("{}")
    assert not taken_over("other-host 557 dc47290c7b18\n", long_ago)  # its run still progresses


def test_a_lane_waits_for_a_held_run_saying_so_and_takes_it_once_stale(tmp_path, monkeypatch, caplog):
    experiment = lanes_experiment(tmp_path, seeds=[1], systems=[{"name": "Group"}])
    run = plan_runs(experiment)[0]
    run.output_dir.mkdir(parents=True)
    claim = run.output_dir / CLAIM_FILE
    claim.write_text("other-host 557 dc47290c7b18\n")
    waits = []

    def wait(seconds):  # the other lane stops: its heartbeat ages
        waits.append(seconds)
        assert len(waits) < 3, "still waiting for a stale claim"
        os.utime(claim, (time.time() - 2 * STALE_SECONDS,) * 2)

    monkeypatch.setattr(runner_module.time, "sleep", wait)
    with caplog.at_level("INFO", logger="headsel_recipes.experiment"):
        trained = train_all(experiment, TASKS["st"], fake_recipe(LANES_SCORES, []), poll_seconds=0.5)
    assert trained == [run] and waits == [0.5]
    assert (f"waiting for 1 run(s) other lanes hold (a claim is taken over once stale, see "
            f"headsel_recipes.experiment.lanes): {run.output_dir} (lane dc47290c7b18 on other-host, pid 557"
            ) in caplog.text
    assert "taking over the stale claim of lane dc47290c7b18" in caplog.text
    assert not claim.exists()


def test_two_lanes_taking_over_one_stale_claim_hold_it_once(tmp_path, monkeypatch):
    """Lane 2 finds a claim stale, then lane 1 takes it over before lane 2 acts: lane 2 leaves the run to lane 1, and
    a lane releases only its own claim."""
    run = plan_runs(lanes_experiment(tmp_path))[0]
    run.output_dir.mkdir(parents=True)
    stopped = subprocess.Popen([sys.executable, "-c", "pass"])
    stopped.wait()
    claim = run.output_dir / CLAIM_FILE
    claim.write_text(f"{socket.gethostname()} {stopped.pid} abc\n")
    lane1, lane2 = Lane(), Lane()
    looked = Lane.held_by_another

    def looked_then_paused(self, run):
        held = looked(self, run)
        if self is lane2:
            assert lane1.claim(run)
        return held

    monkeypatch.setattr(Lane, "held_by_another", looked_then_paused)
    assert not lane2.claim(run)
    monkeypatch.undo()
    assert claim.read_text().split()[2] == lane1.id
    lane2.release(run)
    assert claim.read_text().split()[2] == lane1.id
    lane1.release(run)
    assert not list(run.output_dir.glob(f"{CLAIM_FILE}*"))


def claimed_with_a_fast_heartbeat(tmp_path):
    """A lane beating every 10 ms that has claimed the first run of `lanes_experiment`; the run and the claim's
    path."""
    run = plan_runs(lanes_experiment(tmp_path))[0]
    lane = Lane(heartbeat_seconds=0.01)
    assert lane.claim(run)
    return lane, run, run.output_dir / CLAIM_FILE


def test_a_held_run_s_claim_beats(tmp_path):
    """While a lane trains a run it touches the claim: the heartbeat lanes on other machines judge it by."""
    lane, run, claim = claimed_with_a_fast_heartbeat(tmp_path)
    with lane.holding(run):
        os.utime(claim, (0, 0))
        deadline = time.monotonic() + 10
        while claim.stat().st_mtime == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert claim.stat().st_mtime > 0
    assert not claim.exists()


def test_a_run_whose_flags_break_a_rule_stops_the_experiment_before_any_run_trains(zero_shot_corpus, tmp_path):
    values = tiny_experiment(tmp_path / "exp", zero_shot_corpus)
    values["systems"][2]["flags"]["temperature_schedule"] = "linear"  # without --final_temperature; the last system
    experiment = parse_experiment(values)
    calls = []
    with pytest.raises(ValueError, match="--temperature_schedule needs --final_temperature"):
        train_all(experiment, TASKS["mt"], lambda task, args: calls.append(args))
    assert calls == []


# `split: eval`: the runs score the validation set, not the test set, and a run with its eval_results.json is finished.
def test_a_validation_split_experiment_scores_the_validation_set_and_resumes(tmp_path):
    experiment = lanes_experiment(tmp_path, split="eval")
    results = run_experiment(experiment, TASKS, fake_recipe(LANES_SCORES, calls := [], split="eval"))
    config = json.loads((tmp_path / "exp/runs/group/seed1/run_config.json").read_text())
    assert (config["do_eval"], config["do_predict"]) == (True, False)
    assert len(calls) == 6 and results["systems"]["Group"]["seeds"]["1"]["scores"] == {"tedx": 12.0}
    calls.clear()
    run_experiment(experiment, TASKS, fake_recipe(LANES_SCORES, calls, split="eval"))
    assert calls == []


# results.md says which split its figures come from: test-set and validation scores are not interchangeable.
def test_report_names_the_split_it_scores(tmp_path):
    for split, words in (("predict", "on the test set"), ("eval", "on the validation set")):
        experiment = lanes_experiment(tmp_path, tmp_path / split, split=split)
        run_experiment(experiment, TASKS, fake_recipe(LANES_SCORES, []), tables_only=True)
        assert words in (tmp_path / split / "results.md").read_text()


# A lane that stopped while holding a run's lock must not block the run for the claims' ten minutes (or forever).
def test_a_lock_left_by_a_stopped_lane_is_broken_after_the_lock_timeout(tmp_path):
    """A lock is held for a few file operations: one untouched for `LOCK_STALE_SECONDS` (far shorter than the claims'
    `STALE_SECONDS`) is broken when a lane takes over a stale claim; a younger one is respected."""
    run = plan_runs(lanes_experiment(tmp_path))[0]
    run.output_dir.mkdir(parents=True)
    claim, lock, lane = run.output_dir / CLAIM_FILE, run.output_dir / LOCK_FILE, Lane()
    stale_claim, stale_lock = time.time() - 2 * STALE_SECONDS, time.time() - 2 * LOCK_STALE_SECONDS
    assert 2 * LOCK_STALE_SECONDS < STALE_SECONDS  # the lock is stale, yet would not be by the claims' timeout
    for lock_touched, taken in ((time.time(), False), (stale_lock, True)):
        claim.write_text("other-host 557 dc47290c7b18\n")
        os.utime(claim, (stale_claim, stale_claim))
        lock.write_text("other-host 557 dc47290c7b18\n")  # its lane stopped between two file operations
        os.utime(lock, (lock_touched, lock_touched))
        assert lane.claim(run) is taken
    assert claim.read_text().split()[2] == lane.id
    assert not lock.exists()  # released once the takeover was done
    lane.release(run)
    assert not list(run.output_dir.glob(f"{CLAIM_FILE}*"))


# The heartbeat keeps a claim alive: touching another lane's claim would keep a stopped lane's run from being taken
# over.
def test_a_heartbeat_never_touches_a_claim_another_lane_took_over(tmp_path):
    lane, run, claim = claimed_with_a_fast_heartbeat(tmp_path)
    with lane.holding(run):
        claim.write_text("other-host 557 dc47290c7b18\n")  # taken over meanwhile
        os.utime(claim, (0, 0))
        time.sleep(0.2)  # twenty heartbeats
        assert claim.stat().st_mtime == 0
    assert claim.exists()  # and the release left it
