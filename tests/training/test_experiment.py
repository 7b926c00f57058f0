# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment runner (`training/run_experiment.py`): planning, resuming, the paper's table layouts, and the
bootstrap confidence intervals of the metrics."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import transformers.training_args
import yaml
from recipe_testkit import TINY_TEXT, text_rows, write_jsonl

from headsel_recipes.cli.experiment import main as run_experiment_command
from headsel_recipes.experiment import (
    CLAIM_FILE,
    UNSUPPORTED,
    Cell,
    Lane,
    SeedScores,
    System,
    SystemScores,
    build_table,
    mean_std,
    parse_experiment,
    plan_runs,
    run_experiment as run_loaded_experiment,
    run_flags,
    supports_zero_shot,
    train_all,
)
from headsel_recipes.metrics import (
    TaskMetrics,
    bleu_statistics,
    bootstrap_interval,
    corpus_bleu,
    corpus_wer,
    wer_statistics,
)
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
    assert (out / results["tables"][5]["figure"]).stat().st_size > 0
    assert json.loads((out / "results.json").read_text())["tables"] == results["tables"]

    # finished runs are skipped: a second pass trains nothing and gives the same tables
    def must_not_train(task, args):
        raise AssertionError(f"retrained {args}")

    again = run_loaded_experiment(parse_experiment(tiny_experiment(out, zero_shot_corpus)), TASKS,
                                  must_not_train)
    assert again["tables"] == results["tables"]


# ---- planning and resuming with a stand-in recipe -------------------------------------------------------------------


def fake_recipe(scores_by_system: dict[str, dict[str, float]], calls: list):
    """A recipe stand-in: writes `predict_results.json` (the system's scores + seed) and a `config.json`."""

    def run(task, args):
        flags = json.loads(Path(args[0]).read_text())
        out = Path(flags["output_dir"])
        calls.append(out)
        system = out.parts[out.parts.index("runs") + 1]
        part_scores = scores_by_system[system if out.name.startswith("seed") else f"{system}/{out.name}"]
        results = {f"predict_bleu_{g}": v + flags["seed"] for g, v in part_scores.items()}
        (out / "predict_results.json").write_text(json.dumps(results))
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

    scores = {"joint": {"tedx": 10.0, "covost": 20.0}, "adapter": {"tedx": 12.0, "covost": 21.0},
              "separate/tedx": {"tedx": 8.0}, "separate/covost": {"covost": 22.0}}
    calls = []
    results = run_loaded_experiment(experiment, TASKS, fake_recipe(scores, calls))
    assert len(calls) == 8
    row = next(r for r in results["tables"][0]["rows"] if r["label"] == "Separate")
    assert [c["mean"] for c in row["cells"]] == [20.0, 27.0, 13.0]  # AVG, covost, tedx: seeds 0 and 10 add 0 / 10
    assert row["cells"][0]["std"] == pytest.approx(np.std([15.0, 25.0], ddof=1))
    assert results["systems"]["Adapter"]["zero_shot"] is True  # adapters per task, not per direction

    # a lost run is redone, the others are kept
    (tmp_path / "exp/runs/separate/seed10/tedx/predict_results.json").unlink()
    calls.clear()
    run_loaded_experiment(experiment, TASKS, fake_recipe(scores, calls))
    assert calls == [tmp_path / "exp/runs/separate/seed10/tedx"]


def lanes_experiment(tmp_path):
    return parse_experiment({
        "recipe": "st", "output_dir": str(tmp_path / "exp"), "seeds": [1, 2], "budget": {"max_steps": 5},
        "systems": [{"name": "Joint", "flags": {"shared_baseline": True}},
                    {"name": "Adapter", "init_from": "Joint", "flags": {"task_adapter_dim": 4}},
                    {"name": "Group", "flags": {"head_selection_strategy": "group"}}],
        "tables": ["per_domain"]})


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
    assert not list((tmp_path / "exp").rglob(CLAIM_FILE))  # claims released


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


@pytest.mark.parametrize(
    "change, rule",
    [
        ({"tables": ["table_7"]}, "unknown table layout"),
        ({"systems": [{"name": "A", "init_from": "B"}]}, "init_from 'B' is not a system"),
        ({"systems": [{"name": "A", "init_from": "B"}, {"name": "B", "init_from": "A"}]}, "cycle"),
        ({"systems": [{"name": "Group (H'=8)"}, {"name": "group h 8"}]}, "share the folder"),
        ({"tables": ["avg_high_low"]}, "groups.high"),
        ({"tables": ["components"]}, "no system has"),
        ({"seeds": []}, "seeds"),
        ({"budget": {"seed": 3}}, "sets output_dir, seed and data_seed"),
        ({"systems": [{"name": "A", "flags": {"model_name_or_path": "x"}}]}, "init_from"),
    ],
)
def test_invalid_experiments_name_the_rule(change, rule, tmp_path):
    values = {"recipe": "mt", "output_dir": str(tmp_path), "systems": [{"name": "A"}], **change}
    with pytest.raises(ValueError, match=rule):
        parse_experiment(values)


def test_sweep_expands_into_labelled_systems(tmp_path):
    experiment = parse_experiment({
        "recipe": "asr", "output_dir": str(tmp_path), "systems": [{
            "name": "Group", "labels": {"strategy": "group"}, "flags": {"head_selection_strategy": "group"},
            "sweep": {"label": "H'", "values": [4, 8],
                      "flags": ["total_encoder_attention_heads", "total_decoder_attention_heads"]}}],
        "tables": ["sweep"]})
    assert [s.name for s in experiment.systems] == ["Group (H'=4)", "Group (H'=8)"]
    assert experiment.systems[1].flags == {"head_selection_strategy": "group", "total_encoder_attention_heads": 8,
                                           "total_decoder_attention_heads": 8}
    assert experiment.systems[1].labels == {"strategy": "group", "H'": 8}


# ---- table formatting on given numbers -------------------------------------------------------------------------------


def scored(name: str, per_seed: list[dict[str, float]], zero_shot: bool = True, labels: dict | None = None):
    entry = SystemScores(System(name, labels=labels or {}), zero_shot=zero_shot)
    entry.seeds = {seed: SeedScores(groups=dict(groups)) for seed, groups in enumerate(per_seed)}
    return entry


def test_mean_std_and_cell_format():
    assert mean_std([20.0, 22.0]) == Cell(mean=21.0, std=pytest.approx(2 ** 0.5), seeds=2)
    assert mean_std([20.0]).format() == "20.0"
    assert mean_std([20.0, 22.0]).format(2) == "21.00 ± 1.41"
    assert Cell(note=UNSUPPORTED).format() == UNSUPPORTED
    assert mean_std([]).note == "missing"


def test_avg_high_low_and_unsupported_zero_shot_tables():
    experiment = parse_experiment({
        "recipe": "mt", "output_dir": "unused", "systems": [{"name": "x"}],
        "groups": {"high": ["en-de", "en-fr"], "low": ["en-gu"], "zero_shot": ["de-fr"]}})
    scores = {
        "Transformer": scored("Transformer", [{"en-de": 30, "en-fr": 34, "en-gu": 5, "de-fr": 10},
                                              {"en-de": 32, "en-fr": 36, "en-gu": 7, "de-fr": 12}]),
        "Adapter": scored("Adapter", [{"en-de": 33, "en-fr": 35, "en-gu": 8, "de-fr": 1}], zero_shot=False),
    }
    spec = experiment.tables[0].__class__("avg_high_low", "Table 1")
    table = build_table(spec, scores, experiment, "bleu")
    transformer, adapter = (dict(zip(table.header[1:], cells)) for _, cells in table.rows)
    assert transformer["High"] == Cell(mean=33.0, std=pytest.approx(np.std([32, 34], ddof=1)), seeds=2)
    assert transformer["Low"].mean == 6.0 and transformer["AVG-A"].mean == pytest.approx(np.mean([19.75, 21.75]))
    assert adapter["AVG-A"].note == UNSUPPORTED and adapter["High"].mean == 34.0

    spec4 = spec.__class__("train_zero_shot", "Table 4")
    rows = dict(build_table(spec4, scores, experiment, "bleu").rows)
    assert [c.format() for c in rows["Adapter"]] == [UNSUPPORTED, "25.3", UNSUPPORTED]
    assert rows["Transformer"][2] == Cell(mean=11.0, std=pytest.approx(2 ** 0.5), seeds=2)

    markdown = build_table(spec.__class__("per_task", "Table 2"), scores, experiment, "bleu").markdown()
    assert "| Adapter | unsupported | unsupported | **33.0** | 35.0 | **8.0** |" in markdown  # en-fr: a tie
    assert "| Transformer | 20.8 ± 1.4 | 11.0 ± 1.4 | 31.0 ± 1.4 | 35.0 ± 1.4 | 6.0 ± 1.4 |" in markdown
    assert markdown.splitlines()[2] == "| System | AVG | de-fr | en-de | en-fr | en-gu |"


def test_pivot_tables_and_lower_is_better():
    experiment = parse_experiment({"recipe": "asr", "output_dir": "unused", "systems": [
        {"name": "x", "labels": {"strategy": "group", "components": "encoder"}}]})
    scores = {}
    for strategy, values in (("group", {"encoder": 42.2, "decoder": 46.2, "both": 40.0}),
                             ("subset", {"encoder": 45.4, "both": 44.7})):
        for components, wer in values.items():
            name = f"{strategy} {components}"
            scores[name] = scored(name, [{"es": wer}], labels={"strategy": strategy, "components": components})
    spec = experiment.tables[0].__class__("components", "Table 6", rows="strategy", columns="components")
    table = build_table(spec, scores, experiment, "wer")
    assert table.header == ["strategy \\ components", "encoder", "decoder", "both"]
    assert [c.format() for c in dict(table.rows)["subset"]] == ["45.4", "-", "44.7"]
    assert "| group | **42.2** | 46.2 | **40.0** |" in table.markdown()  # lower WER is better


def test_zero_shot_support_follows_the_model_config():
    assert supports_zero_shot({"model_type": "marian"})
    assert supports_zero_shot({"head_selection_components": ["encoder_self", "decoder_self"]})
    assert not supports_zero_shot({"task_adapter_dim": 256, "task_adapter_key": "direction"})
    assert supports_zero_shot({"task_adapter_dim": 256, "task_adapter_key": "task"})
    assert not supports_zero_shot({"head_selection_strategy": "task_specific", "cross_attention_task_key": "pair",
                                   "head_selection_components": ["decoder_cross"]})
    assert supports_zero_shot({"head_selection_strategy": "task_specific", "cross_attention_task_key": "decoder",
                               "head_selection_components": ["decoder_cross"]})
    assert supports_zero_shot({"task_type": "domain", "task_adapter_dim": 8, "task_adapter_key": "direction"})


# ---- bootstrap confidence intervals --------------------------------------------------------------------------------


def noisy_corpus(size: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """References and hypotheses with about 30% of the words replaced."""
    rng = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    references = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(size)]
    hypotheses = [" ".join(w if rng.random() < 0.7 else rng.choice(words) for w in ref.split()) for ref in references]
    return references, hypotheses


@pytest.mark.parametrize("metric", ["wer", "bleu"])
def test_bootstrap_interval_contains_the_score_and_narrows_with_more_sentences(metric):
    widths = []
    for size in (50, 200, 800):
        references, hypotheses = noisy_corpus(size)
        if metric == "wer":
            stats, point = wer_statistics(references, hypotheses), corpus_wer(references, hypotheses)
        else:
            stats, point = bleu_statistics(references, hypotheses), corpus_bleu(references, hypotheses)
        low, high = bootstrap_interval(stats, metric, resamples=1000)
        assert low < point < high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(4.0, rel=0.35)  # width ~ 1 / sqrt(sentences)


def test_statistics_reproduce_the_corpus_scores():
    import jiwer
    import sacrebleu

    references, hypotheses = noisy_corpus(60, seed=5)
    hypotheses[3] = ""
    assert corpus_bleu(references, hypotheses) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    output = jiwer.process_words(references, hypotheses)
    expected = (output.substitutions + output.deletions + output.insertions) / (
        output.substitutions + output.deletions + output.hits)
    assert corpus_wer(references, hypotheses) == pytest.approx(100 * expected)


def test_task_metrics_add_intervals_per_group_mean_and_pooled():
    references, hypotheses = noisy_corpus(120, seed=2)
    groups = ["de" if i % 3 else "fr" for i in range(120)]
    plain = TaskMetrics(None, "bleu").scores(references, hypotheses, groups)
    with_ci = TaskMetrics(None, "bleu", bootstrap_resamples=300).scores(references, hypotheses, groups)
    assert {k: v for k, v in with_ci.items() if "_ci_" not in k} == plain  # the existing keys are unchanged
    for key in ("bleu_de", "bleu_fr", "bleu", "bleu_pooled"):
        assert with_ci[f"{key}_ci_low"] <= with_ci[key] <= with_ci[f"{key}_ci_high"]
    # the mean over two groups is more certain than the smaller group alone
    assert (with_ci["bleu_ci_high"] - with_ci["bleu_ci_low"]) < (with_ci["bleu_fr_ci_high"] - with_ci["bleu_fr_ci_low"])
    assert TaskMetrics(None, "bleu", bootstrap_resamples=300).scores(references, hypotheses, groups) == with_ci
    with pytest.raises(ValueError, match="bootstrap_resamples"):
        TaskMetrics(None, "wer", bootstrap_resamples=-1)


# ---- the shipped experiment files ----------------------------------------------------------------------------------


EXPERIMENTS_DIR = Path(__file__).resolve().parents[2] / "training" / "experiments"


@pytest.mark.parametrize("path", sorted(EXPERIMENTS_DIR.glob("*/*.yaml")),
                         ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_shipped_experiments_parse_and_their_run_flags_are_recipe_flags(path, tmp_path, capsys, monkeypatch):
    if path.parent.name == "benchmark_gpu":  # bf16 files: check their flags here, where no GPU says bf16 works
        monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    assert run_experiment_command([str(path), "--dry_run", "--output_dir", str(tmp_path)]) is None  # parses every run
    listed = capsys.readouterr().out.splitlines()
    experiment = parse_experiment(yaml.safe_load(path.read_text()), tmp_path)
    assert len(listed) == len(plan_runs(experiment)) >= 4
