"""The benchmark scripts still run and still check what they compare (no timing is asserted: timings belong in
`benchmarks/`, measured by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import overhead  # benchmarks/ is on the test path (`pythonpath` in setup.cfg)


def test_overhead_quick_run_checks_the_all_candidates_baseline(tmp_path, capsys):
    out = tmp_path / "overhead.json"
    overhead.main(["--quick", "--only", "train step, single", "--json", str(out)])
    report = json.loads(out.read_text())
    # the all-candidates attention computes exactly what head selection computes, in eval and in training
    assert report["equivalence"]["train_gradients_checked"] > 0
    assert report["equivalence"]["eval_mixed_max_abs_diff"] < 1e-5
    assert [result["name"] for result in report["results"]] == ["train step, single-task"]
    assert report["results"][0]["name"] in overhead.measurement_names(overhead.BenchConfig())
    assert "train step, single-task" in capsys.readouterr().out


def test_overhead_only_must_match_a_measurement(monkeypatch):
    # refused before any model is built
    monkeypatch.setattr(overhead, "build_models", lambda *args: pytest.fail("built models for a bad --only"))
    with pytest.raises(SystemExit, match="matches no measurement"):
        overhead.main(["--quick", "--only", "no such measurement"])


def test_op_count_counts_the_operations_that_do_work():
    import op_count
    import torch

    linear = torch.nn.Linear(4, 3)
    x, index = torch.randn(2, 4), torch.tensor([[0], [1]])
    counts = op_count.count_ops(lambda: linear(x).view(3, 2).t().gather(0, index))
    # linear -> its addmm (or what addmm calls), view and t launch nothing, gather allocates and then works
    assert counts["aten::gather"] == 1
    assert sum(counts.values()) == 2
    assert not any(name in op_count.NO_KERNEL for name in counts)


def test_single_task_inference_launches_no_more_operations_than_the_stock_model():
    # DESIGN.md section 5: a batch of one task costs what the stock model costs. On a launch-bound GPU that cost is
    # the number of kernels: count them (deterministic) on the benchmark's tiny configuration.
    import op_count
    import torch

    cfg = overhead.BenchConfig(**overhead.QUICK)
    models = overhead.build_models(cfg, torch.device("cpu"), torch.float32)
    calls = op_count.measurements(cfg, models, models, mixed=False)
    for name in ("eval forward", f"generate greedy ({cfg.max_new_tokens} tokens)"):
        stock, headsel = (sum(op_count.count_ops(calls[name][system]).values()) for system in ("stock", "headsel"))
        assert headsel <= stock, (name, headsel, stock)


def test_op_count_sweeps_the_number_of_tasks(capsys):
    import op_count

    op_count.main(["--quick", "--tasks", "2"])
    out = capsys.readouterr().out
    assert "2 + 2 tasks" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| measurement")]
    assert len(rows) == 9  # 3 calls x (single, mixed grouped, mixed gathered)
    with pytest.raises(SystemExit, match="--tasks must be >= 1"):
        op_count.main(["--quick", "--tasks", "0"])


def write_run(folder: Path, predict_metrics: dict, rows: list[tuple[str, str, str]]) -> None:
    folder.mkdir(parents=True)
    (folder / "predict_results.json").write_text(json.dumps(predict_metrics))
    lines = [json.dumps({"id": str(i), "group": g, "reference": r, "prediction": p}) for i, (g, r, p) in enumerate(rows)]
    (folder / "generated_predictions.jsonl").write_text("\n".join(lines) + "\n")


def test_quality_tables_score_characters_per_task_and_average_over_seeds(tmp_path):
    import quality_tables
    import sacrebleu

    rows = [("en-de", "Das ist gut.", "Das ist gut."), ("en-fr", "C'est bon.", "bon"), ("en-fr", "Oui.", "Non.")]
    write_run(tmp_path / "mt" / "runs" / "group" / "seed1", {"predict_loss": 4.0, "predict_bleu": 1.0}, rows)
    write_run(tmp_path / "mt" / "runs" / "group" / "seed2", {"predict_loss": 5.0, "predict_bleu": 1.0}, rows[:1])
    metric, scores = quality_tables.run_scores(tmp_path / "mt" / "runs" / "group" / "seed1")
    assert metric == "chrF"
    french = sacrebleu.corpus_chrf(["bon", "Non."], [["C'est bon.", "Oui."]]).score
    assert scores["en-de"] == pytest.approx(100.0) and scores["en-fr"] == pytest.approx(french)
    assert scores["AVG"] == pytest.approx((100.0 + french) / 2) and scores["loss"] == 4.0
    table = quality_tables.supplementary_table(tmp_path / "mt")
    assert "| group | 2 | 4.50 ± 0.71 |" in table and "chrF ↑" in table

    # WER experiments get CER, after the WER normalisation (case and punctuation do not count)
    write_run(tmp_path / "asr" / "runs" / "shared" / "seed1", {"predict_loss": 3.0, "predict_wer": 50.0},
              [("de", "Guten Tag!", "guten tag"), ("de", "abcd", "abxd")])
    metric, scores = quality_tables.run_scores(tmp_path / "asr" / "runs" / "shared" / "seed1")
    assert metric == "CER" and scores["de"] == pytest.approx(100 / 13)
    with pytest.raises(ValueError, match="no finished run"):
        (tmp_path / "empty" / "runs" / "x").mkdir(parents=True)
        quality_tables.supplementary_table(tmp_path / "empty")


def test_recipe_curves_read_loss_selection_changes_and_logit_range(marian, tmp_path):
    import recipe_curves
    import torch

    from hf_headsel.analysis import SELECTION_LOG_NAME, selection_snapshot

    run = tmp_path / "experiment" / "runs" / "group" / "seed1"
    model = marian.model()
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.fill_(0.5)
        model.head_selection["decoder_self"].logits[0, 0, 0] = -3.0
    before = selection_snapshot(model, 0)
    model.save_pretrained(run)
    after = selection_snapshot(model, 10)
    after["selections"]["decoder_self"][next(iter(after["selections"]["decoder_self"]))][0].reverse()
    (run / SELECTION_LOG_NAME).write_text(json.dumps(before) + "\n" + json.dumps(after) + "\n")
    (run / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 10, "loss": 2.5}, {"x": 1}]}))
    (run / "predict_results.json").write_text(json.dumps({"predict_loss": 2.25}))

    summaries = recipe_curves.collect(tmp_path / "experiment")
    summary = summaries["group"]
    assert summary["loss"] == [(10, 2.5)] and summary["test_loss"] == 2.25
    slots = len(after["selections"]["decoder_self"][next(iter(after["selections"]["decoder_self"]))][0])
    assert summary["changes"] == [(10, slots - slots % 2)]  # a reversed row differs everywhere but its middle
    low, high = summary["logit_range"]
    assert low == -3.0 and high >= 0.5
    assert "| group | 2.250 | 2.500 |" in recipe_curves.table(summaries)
