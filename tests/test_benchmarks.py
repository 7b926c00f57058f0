"""The benchmark scripts still run and still check what they compare (no timing is asserted: timings belong in
`benchmarks/`, measured by hand)."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path

import pytest
import torch
import yaml
from recipe_testkit import TINY_SPEECH, TINY_TEXT, speech_rows, text_rows, write_jsonl
from safetensors.torch import save_file
from transformers import AutoModelForSpeechSeq2Seq, MarianConfig, Speech2TextTokenizer

import benchmark_tokenizers  # benchmarks/ is on the test path (`pythonpath` in setup.cfg)
import copy_source_chrf
import cost_plot
import corpus_overlap
import lane_logs
import overhead
from headsel_recipes.experiment.spec import load_experiment
from headsel_recipes.recipe import run as recipe_run
from headsel_recipes.results_keys import RUN_CONFIG_FILE
from headsel_recipes.tasks import ASR
from headsel_recipes.tokenizer import task_tag_ids
from offline_corpus import LANGUAGES
from hf_headsel import COMPONENTS, HeadSelMarianConfig

from conftest import MARIAN, randomize_selector_logits


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


def test_cost_plot_draws_what_an_overhead_run_measured(tmp_path, capsys):
    out = tmp_path / "overhead.json"
    overhead.main(["--quick", "--only", "eval forward", "--json", str(out)])
    report = json.loads(out.read_text())
    other = tmp_path / "other.json"  # a second run: the same measurements, other times
    for result in report["results"]:
        result["ratio_paired"]["headsel"] = {"median": 1.25, "low": 1.125, "high": 1.5}
    other.write_text(json.dumps(report))
    png = tmp_path / "cost.png"
    runs = cost_plot.main([str(out), str(other), "--label", "first", "--label", "second", "--output", str(png)])
    assert [run.label for run in runs] == ["first", "second"]
    printed = capsys.readouterr().out.splitlines()
    first = json.loads(out.read_text())["results"]
    assert [result["name"] for result in first] == ["eval forward, single-task", "eval forward, mixed-task"]
    for result in first:  # a row per measurement: its target, then each run's paired ratios with their intervals
        paired = result["ratio_paired"]
        measured = [f"{paired[s]['median']:.2f} [{paired[s]['low']:.2f}, {paired[s]['high']:.2f}]"
                    for s in ("headsel", "all_candidates")]
        cells = [result["name"], f"{result['target']:.2f}", *measured, "1.25 [1.12, 1.50]", measured[1]]
        assert "| " + " | ".join(cells) + " |" in printed
    assert png.read_bytes().startswith(b"\x89PNG")


def test_cost_plot_reads_older_runs_and_refuses_what_it_cannot_draw(tmp_path, capsys):
    def run_file(name: str, results: list[dict], family: str = "marian") -> str:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"environment": {"device": "cpu", "dtype": "float32", "threads": 1},
                                    "config": {"family": family}, "results": results}))
        return str(path)

    # a run before paired ratios were recorded, and a compiled one (no all-candidates reference)
    older = run_file("older", [{"name": "greedy, mixed-task", "target": 1.15,
                                "ratio_median": {"headsel": 1.2, "all_candidates": 1.3}}])
    compiled = run_file("compiled", [{"name": "greedy, mixed-task", "target": 1.15, "ratio_median": {"headsel": 1.1},
                                      "ratio_paired": {"headsel": {"median": 1.0, "low": 0.9, "high": 1.1}}}],
                        family="speech_to_text")
    runs = cost_plot.main([older, compiled])
    assert [run.label for run in runs] == ["marian, cpu float32, 1 thread", "speech_to_text, cpu float32, 1 thread"]
    assert ("| greedy, mixed-task | 1.15 | 1.20 | 1.30 | 1.00 [0.90, 1.10] | – |"
            in capsys.readouterr().out.splitlines())

    refusals = [
        ([older, run_file("retargeted", [{"name": "greedy, mixed-task", "target": 1.2, "ratio_median": {}}])],
         "the runs state different targets for 'greedy, mixed-task': [1.15, 1.2]"),
        ([run_file("not_overhead", [{"loss": 1.0}])], "not_overhead.json is not an `overhead.py --json` output"),
        ([older, older], "the runs' labels must be distinct (give --label)"),
        ([older, "--label", "a", "--label", "b"], "2 --label for 1 files: one label a file at most"),
    ]
    for argv, message in refusals:
        with pytest.raises(SystemExit):
            cost_plot.main(argv)
        assert message in capsys.readouterr().err


def stock_eval_forward_compiles_fullgraph() -> bool:
    """Whether the stock Marian model's evaluation forward, which makes its cache inside, compiles with
    `fullgraph=True` here (not on torch 2.11 with transformers 5.17: that cache deep-copies the config)."""
    try:
        with torch.no_grad():
            torch.compile(MARIAN.stock_model(), fullgraph=True, backend="eager")(
                **MARIAN.inputs(), decoder_input_ids=MARIAN.decoder_input_ids())
    except torch._dynamo.exc.Unsupported:
        return False
    return True


def test_overhead_compiled_run_times_the_compiled_stock_and_headsel_models(monkeypatch, tmp_path, capsys):
    if not stock_eval_forward_compiles_fullgraph():
        pytest.skip("the stock model's evaluation forward does not compile with fullgraph=True on this torch and "
                    "transformers")
    compiled_calls = []
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: compiled_calls.append(type(model).__name__)
                        or real_compile(model, **kw))
    out = tmp_path / "overhead.json"
    overhead.main(["--quick", "--compile", "--compile-backend", "eager", "--components", "all", "--only",
                   "eval forward, single", "--json", str(out)])
    report = json.loads(out.read_text())
    assert [r["name"] for r in report["results"]] == ["eval forward, single-task"]
    for result in report["results"]:  # the all-candidates baseline is an eager reference, not timed compiled
        assert set(result["median_ms"]) == {"stock", "headsel"} and set(result["ratio_median"]) == {"headsel"}
    # the forward passes go through torch.compile (eval and train, both systems; generation: the next test)
    assert set(compiled_calls) == {"MarianMTModel", "HeadSelMarianMTModel"}
    table = capsys.readouterr().out
    assert "compiled" in table and "all-candidates" not in table


def test_compiled_generation_takes_the_compiled_decoding_step_and_int_task_ids():
    cfg = overhead.BenchConfig(**overhead.QUICK, compile=True, compile_backend="eager", num_beams=1)
    models = overhead.build_models(cfg, torch.device("cpu"), torch.float32, cfg.systems)
    assert set(models) == {"stock", "headsel"}
    calls = overhead.measurement_calls(cfg, models, models, mixed=False, device=torch.device("cpu"))
    eager = overhead.measurement_calls(overhead.BenchConfig(**overhead.QUICK, num_beams=1), models, models,
                                       mixed=False, device=torch.device("cpu"))
    for system in ("stock", "headsel"):
        torch.testing.assert_close(calls["generate greedy"][system](), eager["generate greedy"][system]())
        assert hasattr(models[system], "_compiled_call")  # generate took its compiled decoding step
    assert overhead.task_ints({"decoder_task_ids": torch.tensor([2, 2])}) == {"decoder_task_ids": 2}
    with pytest.raises(ValueError, match="single-task"):
        overhead.task_ints({"decoder_task_ids": torch.tensor([1, 2])})


@pytest.mark.parametrize(
    "script, argv, rule",
    [
        ("overhead", ["--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
        ("overhead", ["--repeats", "0"], "--repeats: must be >= 1, got 0"),
        ("overhead", ["--warmup", "-1"], "--warmup: must be >= 0, got -1"),
        ("overhead", ["--threads", "two"], "--threads: 'two' is not an integer"),
        ("op_count", ["--tasks", "2", "0"], "--tasks: must be >= 1, got 0"),
        ("performance", ["--output", "unused", "--num-beams", "0"], "--num-beams: must be >= 1, got 0"),
        ("performance", ["--output", "unused", "--tasks", "0"], "--tasks: must be >= 1, got 0"),
        ("adapters_ab", ["--bottleneck", "0"], "--bottleneck: must be >= 1, got 0"),
        ("revision_ab", ["--rev", "no-such-revision"], "--rev 'no-such-revision': no such commit"),
        ("mechanism", ["--steps", "0"], "--steps: must be >= 1, got 0"),
    ],
)
def test_benchmark_flags_are_refused_with_their_rule(script, argv, rule, monkeypatch, capsys, tmp_path):
    # a bad flag is refused by its rule before anything is built (it was a traceback, or silently the default)
    monkeypatch.chdir(tmp_path)  # where a script that did run would write its default outputs
    module = importlib.import_module(script)
    monkeypatch.setattr(overhead.BenchConfig, "bench_family",
                        property(lambda cfg: pytest.fail("a model was built for a bad flag")))  # fmt: skip
    quick = [] if script == "mechanism" else ["--quick"]
    with pytest.raises(SystemExit) as exit_info:
        module.main([*quick, *argv])
    assert rule in f"{exit_info.value} {capsys.readouterr().err}"


def test_benchmark_configurations_refuse_empty_sizes():
    with pytest.raises(ValueError, match="must be >= 1 and warmup >= 0"):
        overhead.BenchConfig(max_new_tokens=0)
    with pytest.raises(ValueError, match="must be >= 1 and warmup >= 0"):
        overhead.BenchConfig(warmup=-1)


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
    # a dropout that is off returns its input (counted before session 49), as do the view-like ops
    dropout = torch.nn.Dropout(0.1).eval()
    assert sum(op_count.count_ops(lambda: dropout(x).view_as(x)).values()) == 0


def test_benchmark_calls_pass_new_task_ids_each_time():
    # the gathered projection keeps rows for the ids of its last call: one id tensor reused by every timed call
    # measured a cache hit that callers passing new ids with each batch never get
    routing = {"encoder_task_ids": torch.tensor([0, 1]), "decoder_task_ids": torch.tensor([1, 0])}
    kwargs = overhead.alternating_kwargs("headsel", {"input_ids": torch.ones(2, 3)}, routing)
    first, second, third = kwargs(), kwargs(), kwargs()
    for key, ids in routing.items():
        assert torch.equal(first[key], ids) and torch.equal(second[key], ids)
        assert first[key] is not second[key] and first[key] is third[key] and first[key] is not ids
    assert "encoder_task_ids" not in overhead.alternating_kwargs("stock", {"input_ids": torch.ones(2, 3)}, routing)()


def test_op_count_counts_python_calls_deterministically():
    import op_count

    def leaf():
        return len([])  # one more call: the builtin

    def twice():
        leaf(), leaf()

    def once():
        leaf()

    assert op_count.count_python_calls(twice) - op_count.count_python_calls(once) == 2
    cfg = overhead.BenchConfig(**overhead.QUICK)
    models = overhead.build_models(cfg, torch.device("cpu"), torch.float32)
    greedy = op_count.measurements(cfg, models, models, mixed=False)[f"generate greedy ({cfg.max_new_tokens} tokens)"]
    counts = [op_count.count_python_calls(greedy["headsel"]) for _ in range(2)]
    assert counts[0] == counts[1]


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


@pytest.fixture
def tiny_op_count(monkeypatch):
    """op_count.py's --quick, smaller still: one layer a side, 2 new tokens, 2 beams (the table's shape is the same)."""
    import op_count

    monkeypatch.setattr(op_count, "QUICK", {**overhead.QUICK, "layers": 1, "max_new_tokens": 2, "num_beams": 2})
    return op_count


def table_rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| measurement")]


def test_op_count_sweeps_the_number_of_tasks(tiny_op_count, capsys):
    tiny_op_count.main(["--quick", "--tasks", "2"])
    out = capsys.readouterr().out
    assert "2 + 2 tasks" in out
    rows = table_rows(out)
    # 4 calls (forward, greedy, beam, train step) x (single, mixed in each projection: auto, grouped, gathered, batched)
    assert len(rows) == 20
    assert {row.split(" | ")[2] for row in rows} == {"-", "auto (CPU)", "grouped", "gathered", "batched"}


def test_op_count_names_the_family_and_components_and_counts_beam_search(tiny_op_count, monkeypatch, capsys):
    # the header and the configuration, without profiling (the sweep above runs a whole table)
    configs = []
    monkeypatch.setattr(tiny_op_count, "count_table", lambda cfg, verbose=False: configs.append(cfg) or [])
    tiny_op_count.main(["--quick", "--family", "speech_to_text", "--components", "cross"])
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith("Speech2Text, ") and "(group; decoder_cross)" in header
    (cfg,) = configs
    assert cfg.family == "speech_to_text" and cfg.components == ("decoder_cross",)
    models = overhead.build_models(cfg, torch.device("cpu"), torch.float32)
    calls = tiny_op_count.measurements(cfg, models, models, mixed=True)
    assert list(calls) == ["eval forward", "generate greedy (2 tokens)", "generate beam 2 (2 tokens)",
                           "train forward + backward"]


def test_op_count_training_row_counts_forward_and_backward_without_the_optimizer():
    # the CPU's AdamW launches kernels per parameter (CUDA's a fixed handful): counted in, they would hide the ratio
    import op_count

    cfg = overhead.BenchConfig(**{**overhead.QUICK, "layers": 1})
    models = overhead.build_models(cfg, torch.device("cpu"), torch.float32)
    train = op_count.measurements(cfg, models, models, mixed=False)[op_count.TRAIN_ROW]["headsel"]
    before = {name: value.clone() for name, value in models["headsel"].state_dict().items()}
    counts = op_count.count_ops(train)
    assert all(torch.equal(before[name], value) for name, value in models["headsel"].state_dict().items())
    assert counts["aten::mm"] > 0 and not counts["aten::addcdiv_"] and not counts["aten::lerp_"]
    assert all(parameter.grad is None for parameter in models["headsel"].parameters())


def test_op_count_table_rows_give_headsel_over_stock_and_restore_the_projection(monkeypatch):
    """Each row: the stock and head-selection counts and headsel / stock, of kernels and of Python calls; the mixed
    rows run in each projection mode, `auto` again afterwards. The counts are given: nothing is profiled."""
    import op_count

    from hf_headsel.attention import MIXED_BATCH_PROJECTIONS, HeadSelectionAttentionMixin

    modes = []

    def measurements(cfg, models, train_models, mixed):
        modes.append(HeadSelectionAttentionMixin.mixed_batch_projection)
        return {"eval forward": {"stock": "stock", "headsel": "headsel"}}

    monkeypatch.setattr(op_count, "build_models", lambda *args: {})
    monkeypatch.setattr(op_count, "measurements", measurements)
    monkeypatch.setattr(op_count, "count_ops", lambda run: {"stock": {"aten::mm": 10},
                                                            "headsel": {"aten::mm": 12, "aten::gather": 3}}[run])
    monkeypatch.setattr(op_count, "count_python_calls", lambda run: {"stock": 100, "headsel": 150}[run])
    rows = op_count.count_table(overhead.BenchConfig(**overhead.QUICK))
    assert rows[0] == "| eval forward | single | - | 10 | 15 | 1.50 | 100 | 150 | 1.50 |"  # 15 / 10, 150 / 100
    assert len(rows) == 1 + len(MIXED_BATCH_PROJECTIONS) and modes == ["auto", *MIXED_BATCH_PROJECTIONS]
    assert HeadSelectionAttentionMixin.mixed_batch_projection == "auto"


# ---- overhead.py: families and components --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, preset, components",
    [
        ("speech_to_text", "paper", ("encoder_self", "decoder_self")),
        ("speech_to_text", "all", ("encoder_self", "decoder_self", "decoder_cross")),
        ("marian", "all", ("encoder_self", "decoder_self", "decoder_cross")),
        ("marian", "cross", ("decoder_cross",)),
    ],
)
def test_overhead_quick_run_per_family_and_components(family, preset, components, tmp_path, capsys):
    out = tmp_path / "overhead.json"
    argv = ["--quick", "--family", family, "--components", preset, "--only", "beam 5, mixed", "--json", str(out)]
    overhead.main(argv)
    report = json.loads(out.read_text())
    assert report["config"]["family"] == family and tuple(report["config"]["components"]) == components
    # the all-candidates baseline was checked equal to head selection before timing, gradients included
    assert report["equivalence"]["train_gradients_checked"] > 0
    assert [result["name"] for result in report["results"]] == ["generate beam 5, mixed-task"]
    assert report["results"][0]["target"] == overhead.TARGETS["generate beam", "mixed"]
    header = next(line for line in capsys.readouterr().out.splitlines() if "d_model" in line)
    assert header.startswith(overhead.FAMILIES[family].name + ", ") and f"(group; {', '.join(components)})" in header


@pytest.mark.parametrize("family", sorted(overhead.FAMILIES))
def test_overhead_runs_in_half_precision(family, tmp_path):
    # the GPU command (`--dtype bfloat16`): speech features must follow the bf16 weights into the convolutions
    out = tmp_path / "overhead.json"
    overhead.main(["--quick", "--family", family, "--dtype", "bfloat16", "--only", "train step, mixed",
                   "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["environment"]["dtype"] == "bfloat16"
    assert [result["name"] for result in report["results"]] == ["train step, mixed-task"]


def test_speech_to_text_inputs_subsample_to_the_source_length():
    cfg = overhead.BenchConfig(**overhead.QUICK, family="speech_to_text")
    torch.manual_seed(0)
    inputs, routing = overhead.make_inputs(cfg, 3, mixed=True, device=torch.device("cpu"), labels=True)
    assert inputs["input_features"].shape == (3, 4 * cfg.src_len, cfg.num_mel_bins)
    assert inputs["attention_mask"].shape == (3, 4 * cfg.src_len) and inputs["attention_mask"][0].all()
    assert (inputs["input_features"][inputs["attention_mask"] == 0] == 0).all()  # padded frames are silent
    assert inputs["labels"].min() >= overhead.FAMILIES["speech_to_text"].first_token  # no special token
    model = overhead.build_models(cfg, torch.device("cpu"), torch.float32)["stock"]
    assert cfg.attn_implementation == "eager"  # the only one the stock Speech2Text supports
    lengths = model.model.encoder._get_feat_extract_output_lengths(inputs["attention_mask"].sum(-1))
    assert lengths[0] == cfg.src_len


@pytest.mark.parametrize("components", [("encoder_self", "decoder_self", "decoder_cross"), ("decoder_cross",)])
def test_speech_to_text_all_candidates_baseline_equals_head_selection(components):
    from reference_attention import ALL_CANDIDATES_CLASSES, AllCandidatesSpeech2TextAttention

    from hf_headsel.families import FAMILIES

    # every family of the package has its all-candidates class
    assert set(ALL_CANDIDATES_CLASSES) == {family.model_class.attention_class for family in FAMILIES}
    cfg = overhead.BenchConfig(**overhead.QUICK, family="speech_to_text", components=components)
    models = overhead.build_models(cfg, torch.device("cpu"), torch.float32)
    swapped = [m for m in models["all_candidates"].modules() if isinstance(m, AllCandidatesSpeech2TextAttention)]
    assert len(swapped) == cfg.layers * len(components)
    report = overhead.check_equivalence(models, cfg, torch.device("cpu"), torch.float32)
    assert report["train_gradients_checked"] > 0 and report["eval_mixed_max_abs_diff"] < 1e-5


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--family", "bart"], "argument --family: invalid choice: 'bart'"),
        (["--components", "everything"], "argument --components: invalid choice: 'everything'"),
        (["--components", "all", "decoder_cross"], "a preset (paper, all, cross) stands alone"),
        (["--components", "decoder_cross", "decoder_cross"], "a component is given twice"),
    ],
)
def test_bad_family_or_components_are_refused_before_any_model_is_built(argv, message, monkeypatch, capsys):
    import op_count

    monkeypatch.setattr(overhead, "build_models", lambda *args: pytest.fail("built models for bad arguments"))
    monkeypatch.setattr(op_count, "build_models", lambda *args: pytest.fail("built models for bad arguments"))
    for script in (overhead, op_count):
        with pytest.raises(SystemExit) as exit_info:
            script.main(["--quick", *argv])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_overhead_sizes_the_head_pools_and_the_number_of_tasks(tmp_path, capsys):
    out = tmp_path / "sizes.json"
    argv = ["--quick", "--heads", "2", "--total-heads", "3", "--strategy", "subset", "--tasks", "2", "--only",
            "greedy, mixed",
            "--json", str(out)]  # fmt: skip
    assert overhead.main(argv) == 0
    config = json.loads(out.read_text())["config"]
    assert (config["heads"], config["total_heads"], config["strategy"]) == (2, 3, "subset")
    assert (config["encoder_tasks"], config["decoder_tasks"]) == (2, 2)
    assert "H = 2, H' = 3 (subset; encoder_self, decoder_self), 2+2 tasks" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--heads", "4", "--total-heads", "3"], "1 <= H <= H'"),
        (["--heads", "3"], "divide d_model"),
        (["--tasks", "0"], "--tasks: must be >= 1, got 0"),
    ],
)
def test_bad_sizes_are_refused_before_any_model_is_built(argv, message, monkeypatch, capsys):
    # refused with the rule, not a traceback
    monkeypatch.setattr(overhead, "build_models", lambda *args: pytest.fail("built models for bad arguments"))
    with pytest.raises(SystemExit) as exit_info:
        overhead.main(["--quick", *argv])
    assert message in f"{exit_info.value} {capsys.readouterr().err}"


def test_component_presets():
    parser = argparse.ArgumentParser()
    assert overhead.parse_components(parser, ["paper"]) == overhead.BenchConfig().components
    assert overhead.parse_components(parser, ["all"]) == COMPONENTS
    assert overhead.parse_components(parser, ["cross"]) == ("decoder_cross",)
    assert overhead.parse_components(parser, ["decoder_cross", "encoder_self"]) == ("encoder_self", "decoder_cross")
    assert overhead.parse_components(parser, None) is None
    with pytest.raises(ValueError, match="unknown family 'bart'"):
        overhead.BenchConfig(family="bart")


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

    # paired with a reference system over the seeds both finished: seed1 only (shared has no seed2)
    write_run(tmp_path / "mt" / "runs" / "shared" / "seed1", {"predict_loss": 3.75, "predict_bleu": 1.0}, rows[:1])
    paired = quality_tables.paired_table(tmp_path / "mt", "shared")
    chrf_difference = (100.0 + french) / 2 - 100.0
    assert f"| group | 1 | 0.250 ± 0.000 | 0 of 1 | {chrf_difference:.2f} ± 0.00 | 0 of 1 | 0.0 ± 0.0 | 0 of 1 |" in paired
    assert "| shared |" not in paired
    with pytest.raises(ValueError, match="no finished run of --paired_with 'stock'"):
        quality_tables.paired_table(tmp_path / "mt", "stock")

    # the last column: the share of empty or looping hypotheses
    assert scores["unusable"] == 0.0 and table.splitlines()[2].endswith("| unusable % |")
    write_run(tmp_path / "mt" / "runs" / "subset" / "seed1", {"predict_loss": 6.0, "predict_bleu": 0.0},
              [("en-de", "Das ist gut.", ""), ("en-fr", "C'est bon.", "bon bon bon bon"), ("en-fr", "Oui.", "Oui.")])
    subset_row = next(line for line in quality_tables.supplementary_table(tmp_path / "mt").splitlines()
                      if line.startswith("| subset |"))
    assert subset_row.endswith("| 66.7 ± 0.0 |")
    # paired, in percentage points: two of subset's three hypotheses unusable, none of shared's one
    subset_paired = quality_tables.paired_table(tmp_path / "mt", "shared").splitlines()[-1]
    assert subset_paired.startswith("| subset | 1 | 2.250 ± 0.000 | 0 of 1 |")
    assert subset_paired.endswith("| 66.7 ± 0.0 | 0 of 1 |")

    # WER experiments get CER, after the WER normalisation (case and punctuation do not count)
    write_run(tmp_path / "asr" / "runs" / "shared" / "seed1", {"predict_loss": 3.0, "predict_wer": 50.0},
              [("de", "Guten Tag!", "guten tag"), ("de", "abcd", "abxd")])
    metric, scores = quality_tables.run_scores(tmp_path / "asr" / "runs" / "shared" / "seed1")
    assert metric == "CER" and scores["de"] == pytest.approx(100 / 13)
    with pytest.raises(ValueError, match="no finished run"):
        (tmp_path / "empty" / "runs" / "x").mkdir(parents=True)
        quality_tables.supplementary_table(tmp_path / "empty")


def test_quality_tables_average_is_the_mean_over_tasks_and_cer_divides_by_the_reference(tmp_path):
    """AVG is the mean of the per-task scores (three tasks: with two, the median is the mean too), and CER is the
    edits over the reference's characters, not the hypothesis'."""
    import quality_tables

    # chrF: en-de an exact copy (100), en-es and en-fr share no character with their references (0)
    rows = [("en-de", "Das ist gut.", "Das ist gut."), ("en-es", "Hola", "xyz"), ("en-fr", "Oui", "zzz")]
    write_run(tmp_path / "mt" / "runs" / "group" / "seed1", {"predict_loss": 1.0, "predict_bleu": 1.0}, rows)
    _, scores = quality_tables.run_scores(tmp_path / "mt" / "runs" / "group" / "seed1")
    assert (scores["en-de"], scores["en-es"], scores["en-fr"]) == (pytest.approx(100.0), 0.0, 0.0)
    assert scores["AVG"] == pytest.approx(100.0 / 3)  # the median would be 0
    # "abcd" -> "ab": 2 deletions over 4 reference characters (50 %); the other way round, 2 insertions over 2 (100 %)
    write_run(tmp_path / "asr" / "runs" / "shared" / "seed1", {"predict_loss": 1.0, "predict_wer": 50.0},
              [("de", "abcd", "ab")])
    _, scores = quality_tables.run_scores(tmp_path / "asr" / "runs" / "shared" / "seed1")
    assert scores["de"] == pytest.approx(50.0)


def test_quality_tables_rows_columns_and_seed_counts(tmp_path, monkeypatch):
    """Rows in sorted system-folder order, whatever order the filesystem lists them in; the seeds column counts the
    system's finished `seed*` runs (not its tasks, not another folder); the task columns are the prediction groups,
    the unusable share its own last column."""
    import quality_tables

    rows = [("en-de", "Das ist gut.", "Das ist gut."), ("en-fr", "Oui.", "Oui.")]
    runs = tmp_path / "mt" / "runs"
    for system, seeds in (("adapters", 1), ("group", 3), ("shared", 1)):  # group: three seeds, two tasks
        for seed in range(1, seeds + 1):
            write_run(runs / system / f"seed{seed}", {"predict_loss": 2.0, "predict_bleu": 1.0}, rows)
    write_run(runs / "group" / "backup", {"predict_loss": 9.0, "predict_bleu": 1.0}, rows)  # finished, not a seed
    listed = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda folder: iter(sorted(listed(folder), reverse=True)))  # out of order
    lines = quality_tables.supplementary_table(tmp_path / "mt").splitlines()
    assert lines[2] == "| System (run folder) | seeds | test loss | chrF AVG | en-de | en-fr | unusable % |"
    assert [line.split(" | ")[0] for line in lines[4:]] == ["| adapters", "| group", "| shared"]
    assert lines[5] == "| group | 3 | 2.00 ± 0.00 | 100.0 ± 0.0 | 100.0 ± 0.0 | 100.0 ± 0.0 | 0.0 ± 0.0 |"


def test_quality_tables_train_loss_column_reads_each_runs_training_results(tmp_path):
    """With `train_loss` the table gives, after the test loss, the mean ± std of `train_loss_eval_mode` over the runs
    whose `train_results.json` holds it ("–" for a system where none does); without it the columns are unchanged."""
    import quality_tables

    rows = [("en-de", "Das ist gut.", "Das ist gut.")]
    runs = tmp_path / "mt" / "runs"
    for seed, train_loss in ((1, 1.5), (2, 2.5)):
        write_run(runs / "group" / f"seed{seed}", {"predict_loss": 5.0, "predict_bleu": 1.0}, rows)
        (runs / "group" / f"seed{seed}" / "train_results.json").write_text(
            json.dumps({"train_loss": 9.0, "train_loss_eval_mode": train_loss}))
    write_run(runs / "shared" / "seed1", {"predict_loss": 4.0, "predict_bleu": 1.0}, rows)  # no train_results.json
    lines = quality_tables.supplementary_table(tmp_path / "mt", train_loss=True).splitlines()
    assert lines[2] == ("| System (run folder) | seeds | test loss | train loss (eval mode) | chrF AVG | en-de "
                        "| unusable % |")
    assert lines[3] == "|---|---:|---:|---:|---:|---:|---:|"
    assert lines[4] == "| group | 2 | 5.00 ± 0.00 | 2.00 ± 0.71 | 100.0 ± 0.0 | 100.0 ± 0.0 | 0.0 ± 0.0 |"
    assert lines[5].startswith("| shared | 1 | 4.00 ± 0.00 | – | 100.0 ± 0.0 |")
    # not a task column, and no column at all without the flag
    plain = quality_tables.supplementary_table(tmp_path / "mt").splitlines()
    assert plain[2] == "| System (run folder) | seeds | test loss | chrF AVG | en-de | unusable % |"


def test_quality_tables_score_a_run_without_generation_scores_by_its_recorded_recipe(tmp_path):
    """A run scored again without generation (`plain_test_loss.py`: the loss only, no WER or BLEU in its results) is
    scored by the metric of the recipe its `environment.jsonl` names last: CER for ASR, chrF for ST and MT."""
    import quality_tables

    for recipe, metric in (("asr", "CER"), ("st", "chrF"), ("mt", "chrF")):
        run = tmp_path / recipe / "runs" / "shared" / "seed1"
        write_run(run, {"predict_loss": 3.0}, [("de", "abcd", "abxd")])
        (run / "environment.jsonl").write_text(json.dumps({"recipe": "mt"}) + "\n" + json.dumps({"recipe": recipe}))
        assert quality_tables.run_scores(run)[0] == metric


def test_quality_tables_pairs_compare_each_system_with_its_own_reference(tmp_path, capsys):
    """`--pair SYSTEM REFERENCE`: one row per pair, the system minus its own reference over the seeds both finished
    (two systems at each value of a setting); a pair naming a system without finished runs is refused by name."""
    import quality_tables

    rows = [("en-de", "Das ist gut.", "Das ist gut.")]
    runs = tmp_path / "mt" / "runs"
    losses = {"shared": (5.0, 5.2), "group": (4.9, 5.0), "shared_dropout_0": (5.5, 5.4), "group_dropout_0": (5.6, 5.6)}
    for system, seeds in losses.items():
        for seed, loss in enumerate(seeds, 1):
            write_run(runs / system / f"seed{seed}", {"predict_loss": loss, "predict_bleu": 1.0}, rows)
    quality_tables.main([str(tmp_path / "mt"), "--pair", "group", "shared", "--pair", "group_dropout_0",
                         "shared_dropout_0"])
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("**mt**: each system minus its reference, paired by seed (mean ± std of the differences; "
                        "*ahead* counts the seeds where the system is better)")
    assert lines[start + 2].startswith("| System minus reference (run folders) | seeds | test loss | ahead |")
    # group: -0.1, -0.2 (ahead in both); group_dropout_0: +0.1, +0.2 (behind in both)
    assert lines[start + 4].startswith("| group − shared | 2 | -0.150 ± 0.071 | 2 of 2 |")
    assert lines[start + 5].startswith("| group_dropout_0 − shared_dropout_0 | 2 | 0.150 ± 0.071 | 0 of 2 |")
    assert len(lines) == start + 6 + 1  # the two rows, then the blank line print ends with
    with pytest.raises(ValueError, match="no finished run of --pair 'adapters'"):
        quality_tables.pairs_table(tmp_path / "mt", [("adapters", "shared")])


def test_quality_tables_name_the_environments_of_runs_trained_in_more_than_one(tmp_path):
    """The runs' `environment.jsonl` records, read as the runner's report reads them: nothing when every run
    recorded one environment (or none did), the runs of each environment named when they differ."""
    import quality_tables

    rows = [("en-de", "Das ist gut.", "Das ist gut.")]
    runs = tmp_path / "mt" / "runs"
    record = {"do_train": True, "hf_headsel_commit": "abc", "packages": {"torch": "2.13.0"}, "cpu_capability": "AVX2"}
    for system, seed, commit in (("group", 1, "abc"), ("group", 2, "abc"), ("shared", 1, "abc")):
        write_run(runs / system / f"seed{seed}", {"predict_loss": 2.0, "predict_bleu": 1.0}, rows)
        (runs / system / f"seed{seed}" / "environment.jsonl").write_text(
            json.dumps({**record, "hf_headsel_commit": commit}) + "\n")
    assert "environments" not in quality_tables.supplementary_table(tmp_path / "mt")
    (runs / "shared" / "seed1" / "environment.jsonl").write_text(json.dumps({**record, "hf_headsel_commit": "def"}))
    table = quality_tables.supplementary_table(tmp_path / "mt")
    assert "**Runs trained in 2 environments**" in table
    assert "- hf_headsel_commit abc: group (seed1), group (seed2)" in table
    assert "- hf_headsel_commit def: shared (seed1)" in table


def test_quality_tables_refuse_an_experiment_scored_by_both_metrics(tmp_path):
    """One experiment has one metric: WER-scored and BLEU-scored runs together are refused by that rule."""
    import quality_tables

    write_run(tmp_path / "x" / "runs" / "a" / "seed1", {"predict_loss": 1.0, "predict_bleu": 1.0}, [("de", "a", "a")])
    write_run(tmp_path / "x" / "runs" / "b" / "seed1", {"predict_loss": 1.0, "predict_wer": 1.0}, [("de", "a", "a")])
    with pytest.raises(ValueError, match="scored by both WER and BLEU"):
        quality_tables.supplementary_table(tmp_path / "x")


def test_quality_plot_pairs_losses_by_seed_and_draws_the_panels(tmp_path, capsys):
    import quality_plot

    rows = [("en-de", "Das ist gut.", "Das ist gut.")]
    losses = {"shared": {1: 4.0, 2: 4.2, 3: 4.1}, "group": {1: 3.9, 2: 4.0, 4: 3.0}, "adapters": {3: 4.3}}
    for system, by_seed in losses.items():
        for seed, loss in by_seed.items():
            write_run(tmp_path / "mt" / "runs" / system / f"seed{seed}", {"predict_loss": loss}, rows)
    (tmp_path / "mt" / "runs" / "group" / "seed3").mkdir()  # not finished: left out
    # group's seed4 has no reference run to pair with: left out too
    assert quality_plot.paired_differences(tmp_path / "mt", "group", "shared") == pytest.approx(
        {"seed1": -0.1, "seed2": -0.2})
    output = tmp_path / "plot.png"
    differences = quality_plot.main(["--panel", "MT", str(tmp_path / "mt"), "--system", "group", "Group",
                                     "--system", "adapters", "Adapters", "--system", "subset", "Subset",
                                     "--output", str(output)])
    assert list(differences["MT"]) == ["Group", "Adapters"]  # no finished subset run: not drawn
    printed = capsys.readouterr().out
    assert "| Group | -0.150 ± 0.071 (2) |" in printed and "| Adapters | +0.200 ± 0.000 (1) |" in printed
    assert output.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="no finished run of the reference 'stock'"):
        quality_plot.main(["--panel", "MT", str(tmp_path / "mt"), "--system", "group", "Group", "--reference",
                           "stock"])


def test_quality_plot_names_the_environments_of_the_runs_it_pairs(tmp_path, capsys):
    """As the quality tables do: nothing when the paired runs recorded one environment, the runs of each environment
    named after the table when they differ; a run paired with nothing (no reference seed) is not among them."""
    import quality_plot

    rows = [("en-de", "Das ist gut.", "Das ist gut.")]
    runs = tmp_path / "mt" / "runs"
    record = {"do_train": True, "hf_headsel_commit": "abc", "packages": {"torch": "2.13.0"}, "cpu_capability": "AVX2"}
    for system, seed, commit in (("group", 1, "abc"), ("group", 2, "abc"), ("shared", 1, "abc"), ("shared", 2, "abc"),
                                 ("group", 3, "zzz")):  # group's seed3: no reference run to pair with
        write_run(runs / system / f"seed{seed}", {"predict_loss": 2.0}, rows)
        (runs / system / f"seed{seed}" / "environment.jsonl").write_text(
            json.dumps({**record, "hf_headsel_commit": commit}) + "\n")
    argv = ["--panel", "MT, 1,000\nupdates", str(tmp_path / "mt"), "--system", "group", "Group"]
    quality_plot.main(argv)
    assert "environments" not in capsys.readouterr().out
    (runs / "shared" / "seed2" / "environment.jsonl").write_text(json.dumps({**record, "hf_headsel_commit": "def"}))
    quality_plot.main(argv)
    printed = capsys.readouterr().out
    assert "**Runs trained in 2 environments**" in printed
    assert ("- hf_headsel_commit abc: MT, 1,000 updates: group (seed1), MT, 1,000 updates: group (seed2), "
            "MT, 1,000 updates: shared (seed1)") in printed
    assert "- hf_headsel_commit def: MT, 1,000 updates: shared (seed2)" in printed and "zzz" not in printed


def test_quality_plot_table_keeps_a_system_drawn_in_any_panel():
    """A system paired in one panel only keeps its row, with "–" in the panel that lacks it."""
    import quality_plot

    differences = {"MT": {"Group": {"seed1": -0.25, "seed2": -0.75}, "Adapters": {"seed1": 0.5}},
                   "ASR": {"Group": {"seed1": 0.125}}}
    assert quality_plot.drawn_labels(differences, ["Group", "Adapters", "Subset"]) == ["Group", "Adapters"]
    rows = quality_plot.table(differences, ["Group", "Adapters"], "shared").splitlines()[2:]
    spread = statistics.stdev([-0.25, -0.75])  # 0.354
    assert rows == [f"| Group | -0.500 ± {spread:.3f} (2) | +0.125 ± 0.000 (1) |",
                    "| Adapters | +0.500 ± 0.000 (1) | – |"]


def test_quality_plot_table_writes_a_title_of_two_lines_on_one_header_row():
    """A panel title may break its line for the plot; the Markdown table's header stays one row."""
    import quality_plot

    differences = {"MT, 6 + 6 layers\n(CPU, 5 seeds)": {"Group": {"seed1": 0.5}}}
    lines = quality_plot.table(differences, ["Group"], "shared").splitlines()
    assert lines == ["| test cross-entropy minus shared's, paired by seed | MT, 6 + 6 layers (CPU, 5 seeds) |",
                     "|---|---:|", "| Group | +0.500 ± 0.000 (1) |"]


def import_depth_script(monkeypatch, name: str):
    """A script of the depth folder (`benchmarks/results/quality/mt_one_to_many_deep/`), imported as its own folder's
    script is (beside collapse.py, which route_swap.py imports)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks/results/quality/mt_one_to_many_deep"))
    return importlib.import_module(name)


@pytest.fixture
def route_swap(monkeypatch):
    return import_depth_script(monkeypatch, "route_swap")


def route_swap_batches(model) -> list[dict[str, torch.Tensor]]:
    """A batch per decoder task, labelled, its examples routed to their own task."""
    return [dict(MARIAN.inputs(seed=index), labels=MARIAN.labels(seed=10 + index),
                 encoder_task_ids=torch.zeros(4, dtype=torch.long), decoder_task_ids=torch.full((4,), index))
            for index in range(len(model.config.decoder_tasks))]


def test_route_swap_routes_each_task_to_the_next_and_its_own_route_is_the_models_loss(route_swap):
    model = MARIAN.model(encoder_tasks=["en"], head_selection_kl_weight=0.0)
    randomize_selector_logits(model)  # the three decoder tasks select different heads
    batches = route_swap_batches(model)
    losses = route_swap.routed_losses(model, batches, ("decoder",))
    tokens = [int((inputs["labels"] != -100).sum()) for inputs in batches]
    with torch.no_grad():
        own = sum(model(**inputs).loss.item() * count for inputs, count in zip(batches, tokens)) / sum(tokens)
    assert list(losses) == [0, 1, 2] and losses[0] == pytest.approx(own, rel=1e-6)
    assert abs(losses[1] - losses[0]) > 1e-3 and abs(losses[2] - losses[0]) > 1e-3
    by_hand = [route_swap.summed_cross_entropy(model, dict(inputs, decoder_task_ids=(inputs["decoder_task_ids"] + 1)
                                                           % 3)) for inputs in batches]  # shift 1: each to the next
    assert losses[1] == pytest.approx(sum(total for total, _ in by_hand) / sum(count for _, count in by_hand),
                                      rel=1e-6)
    with torch.no_grad():  # every task selecting the first task's heads: misrouting changes nothing
        logits = model.head_selection["decoder_self"].logits
        logits.copy_(logits[:1].expand_as(logits))
    model.clear_head_selection_cache()
    losses = route_swap.routed_losses(model, batches, ("decoder",))
    assert losses[1] == pytest.approx(losses[0], rel=1e-6) and losses[2] == pytest.approx(losses[0], rel=1e-6)


def test_route_swap_shifts_each_side_alone_and_both_where_they_hold_the_same_tasks(route_swap):
    assert route_swap.shifted_sides(MARIAN.config(encoder_tasks=["en"])) == [("decoder",)]
    assert route_swap.shifted_sides(MARIAN.config(decoder_tasks=["en"])) == [("encoder",)]
    assert route_swap.shifted_sides(MarianConfig()) == []  # the shared model: nothing routed
    assert route_swap.shifted_sides(MARIAN.config()) == [("encoder",), ("decoder",)]  # different tasks
    same = MARIAN.config(encoder_tasks=["es", "fr", "it"], decoder_tasks=["es", "fr", "it"])
    assert route_swap.shifted_sides(same) == [("encoder",), ("decoder",), ("encoder", "decoder")]


def test_route_swap_refuses_what_it_cannot_shift(route_swap):
    model = MARIAN.model(encoder_tasks=["en"])
    with pytest.raises(ValueError, match=r"no example of the decoder task\(s\) \['[^']+'\]"):
        route_swap.routed_losses(model, route_swap_batches(model)[:2], ("decoder",))
    with pytest.raises(ValueError, match="hold different tasks"):
        route_swap.routed_losses(MARIAN.model(), route_swap_batches(model), ("encoder", "decoder"))
    with pytest.raises(ValueError, match="MT routed on both sides"):
        route_swap.text_batches(Path("run"), None, MARIAN.model(), [("encoder",), ("decoder",)])


def train_speech_run(run: Path, corpus: Path, **extra) -> None:
    """A tiny ASR run as the experiment runner trains one (its flags in `run_config.json`, read by the recipe): es and
    fr on both sides, group head selection in the decoder's attentions only (the encoder's task is read nowhere);
    `extra` flags on top."""
    if not (corpus / "train.jsonl").exists():
        write_jsonl(corpus / "train.jsonl", speech_rows(corpus, "train", 8, seed=1))
        write_jsonl(corpus / "test.jsonl", speech_rows(corpus, "test", 6, seed=2))
    flags = dict(output_dir=str(run), cache_dir=str(corpus / "cache"), config_overrides=TINY_SPEECH, vocab_size=60,
                 max_steps=2, per_device_train_batch_size=4, learning_rate=0.01, save_strategy="no", use_cpu=True,
                 disable_tqdm=True, report_to="none", seed=0, do_train=True, task_tag=True,
                 train_file=[str(corpus / "train.jsonl")], test_file=[str(corpus / "test.jsonl")],
                 head_selection_strategy="group", head_selection_components=["decoder_self", "decoder_cross"],
                 total_decoder_attention_heads=4, **extra)
    run.mkdir(parents=True)
    (run / RUN_CONFIG_FILE).write_text(json.dumps(flags))
    recipe_run(ASR, [str(run / RUN_CONFIG_FILE)])


def test_route_swap_scores_a_speech_run_on_its_prepared_test_split_each_side_and_both(route_swap, tmp_path, capsys):
    """A speech run's test split comes as its recipe prepares it (every example, both sides' task ids, three es and
    three fr), batched by length; the encoder's task, read nowhere, costs nothing misrouted (the control); the
    decoder's does, and both together cost what the decoder alone does."""
    run = tmp_path / "asr" / "runs" / "group" / "seed1"
    train_speech_run(run, tmp_path / "corpus")
    model = AutoModelForSpeechSeq2Seq.from_pretrained(run)
    randomize_selector_logits(model)  # two steps leave es and fr selecting alike
    model.save_pretrained(run)
    # 6 examples: one batch, shortest first
    [inputs] = route_swap.speech_batches(run, Speech2TextTokenizer.from_pretrained(run), model)
    assert inputs["encoder_task_ids"].tolist() == inputs["decoder_task_ids"].tolist()
    assert sorted(inputs["decoder_task_ids"].tolist()) == [0, 0, 0, 1, 1, 1]
    lengths = inputs["attention_mask"].sum(dim=1).tolist()
    assert lengths == sorted(lengths) and len(set(lengths)) > 1
    costs = route_swap.main([str(tmp_path / "asr")])
    assert set(costs) == {("group", side) for side in ("encoder", "decoder", "encoder and decoder")}
    assert costs[("group", "encoder")] == [0.0]
    assert abs(costs[("group", "decoder")][0]) > 1e-3
    assert costs[("group", "encoder and decoder")] == pytest.approx(costs[("group", "decoder")], abs=1e-6)
    table = capsys.readouterr().out
    assert "| runs/group/seed1 | encoder and decoder (2 tasks) |" in table
    assert "| group | encoder | 1 | +0.000 ± 0.000 | 0 of 1 |" in table


def test_plain_test_loss_scores_each_run_again_without_label_smoothing(route_swap, monkeypatch, tmp_path):
    """Each finished run (head selection, and the shared model, whose tasks come from its training data) is scored
    again by its recipe: at the training's label smoothing it repeats the run's own test loss, and without it gives
    the plain cross-entropy that route_swap computes by hand; the hypotheses are copied beside, so the tables read it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS / "results/quality/baselines"))
    plain_test_loss = importlib.import_module("plain_test_loss")
    import quality_tables

    experiment, corpus = tmp_path / "asr", tmp_path / "corpus"
    for system, extra in (("group", {}), ("shared", {"shared_baseline": True})):
        train_speech_run(experiment / "runs" / system / "seed1", corpus, do_predict=True, generation_max_length=4,
                         generation_num_beams=1, label_smoothing_factor=0.1, **extra)
    monkeypatch.setitem(plain_test_loss.PLAIN_SCORING, "label_smoothing_factor", 0.1)
    plain_test_loss.main([str(experiment), str(tmp_path / "smoothed")])
    monkeypatch.setitem(plain_test_loss.PLAIN_SCORING, "label_smoothing_factor", 0.0)
    plain_test_loss.main([str(experiment), str(tmp_path / "plain")])
    loss = {}
    for name in ("asr", "smoothed", "plain"):
        for system in ("group", "shared"):
            run = tmp_path / name / "runs" / system / "seed1"
            assert quality_tables.is_finished(run)
            assert quality_tables.run_scores(run)[0] == "CER"  # scored without generation too: its recipe's metric
            loss[name, system] = json.loads((run / "predict_results.json").read_text())["predict_loss"]
    for system in ("group", "shared"):
        assert loss["smoothed", system] == pytest.approx(loss["asr", system], rel=1e-6)
        assert loss["plain", system] < loss["asr", system]
    # the training results travel with the plain scores (copied again where missing when a run is skipped), so the
    # table's train-loss column reads the training run's own figure
    trained = tmp_path / "plain" / "runs" / "group" / "seed1" / "train_results.json"
    recorded = json.loads((experiment / "runs" / "group" / "seed1" / "train_results.json").read_text())
    assert json.loads(trained.read_text()) == recorded
    trained.unlink()
    plain_test_loss.main([str(experiment), str(tmp_path / "plain")])
    assert f"{recorded['train_loss_eval_mode']:.2f} ± 0.00" in quality_tables.supplementary_table(
        tmp_path / "plain", train_loss=True).splitlines()[4]
    run = experiment / "runs" / "group" / "seed1"
    model = AutoModelForSpeechSeq2Seq.from_pretrained(run)
    batches = route_swap.speech_batches(run, Speech2TextTokenizer.from_pretrained(run), model)
    assert route_swap.routed_losses(model, batches, ("decoder",))[0] == pytest.approx(loss["plain", "group"], rel=1e-5)


@pytest.fixture
def rerun_check(monkeypatch):
    return import_depth_script(monkeypatch, "rerun_check")


def test_rerun_check_counts_the_tensors_that_differ_and_the_largest_difference(rerun_check, tmp_path, capsys):
    weights = {"a": torch.zeros(3), "b": torch.ones(2, 2), "c": torch.arange(4.0)}
    changed = dict(weights, b=torch.ones(2, 2) + torch.tensor([[0.0, 2e-5], [0.0, 0.0]]), c=torch.arange(4.0) - 0.5)
    for name, tensors in {"reference": weights, "same": weights, "changed": changed}.items():
        (tmp_path / name).mkdir()
        save_file(tensors, tmp_path / name / "model.safetensors")
    rows = rerun_check.main([str(tmp_path / name) for name in ("reference", "same", "changed")])
    assert rows == [(0, 0.0), (2, 0.5)]
    assert "| changed | 2 | 0.5 |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="other tensors"):
        rerun_check.differences(weights, {"a": torch.zeros(3)})


def test_rerun_check_writes_a_short_training_only_copy_of_a_run_config(rerun_check, tmp_path):
    source = tmp_path / "run_config.json"
    source.write_text(json.dumps({"seed": 1, "max_steps": 1000, "logging_steps": 100, "do_predict": True,
                                  "output_dir": "elsewhere", "cache_dir": "elsewhere/cache"}))
    written = rerun_check.short_config(source, tmp_path / "short" / "run", 50)
    assert written == tmp_path / "short" / "run" / "run_config.json"
    assert json.loads(written.read_text()) == {
        "seed": 1, "max_steps": 50, "logging_steps": 10, "do_predict": False,
        "output_dir": str(tmp_path / "short" / "run"), "cache_dir": str(tmp_path / "short" / "cache")}


@pytest.fixture
def lane_log_pairs(monkeypatch):
    return import_depth_script(monkeypatch, "lane_log_pairs")


def lane_log(runs: list[tuple[str, int, float | None]], unusable: bool = True) -> str:
    """A lane log as `experiment_in_two_lanes` writes one: each run's output folder, then its test scores (none for
    a run that stopped; no unusable share with `unusable=False`, as the recipes before session 32 printed)."""
    text = ""
    for system, seed, loss in runs:
        text += f"output_dir=outputs/benchmark/x/runs/{system}/seed{seed},\nINFO - training ...\n"
        if loss is not None:
            text += f"  predict_loss                =     {loss}\n"
            text += "  predict_unusable            =     0.5\n" if unusable else ""
    return text


def test_lane_log_pairs_pairs_runs_by_seed_across_logs_and_leaves_out_stopped_runs(lane_log_pairs, tmp_path):
    (tmp_path / "first_lane1.log").write_text(lane_log([("shared", 1, 4.7), ("group", 1, 4.5), ("group", 2, 4.0)]))
    (tmp_path / "second_lane1.log").write_text(lane_log([("shared", 2, 4.6), ("group", 3, None), ("shared", 3, 4.0)]))
    scores = lane_logs.read_scores(sorted(tmp_path.glob("*.log")))
    assert scores[("group", 2)] == {"loss": 4.0, "unusable": 50.0}
    assert ("group", 3) not in scores  # stopped: no test scores
    table = lane_log_pairs.main([str(tmp_path / "*_lane*.log"), "--pair", "group", "shared"])
    assert "| group − shared | 2 | -0.400 ± 0.283 | 2 of 2 | -0.200 (1) / -0.600 (2) | 0.0 ± 0.0 | 0 of 2 |" in table


def test_lane_log_pairs_pair_the_unusable_share_only_where_both_logs_printed_it(lane_log_pairs, tmp_path):
    (tmp_path / "old_lane1.log").write_text(lane_log([("shared", 1, 4.7), ("group", 1, 4.5)], unusable=False))
    (tmp_path / "new_lane1.log").write_text(lane_log([("shared", 2, 4.6), ("group", 2, 4.0), ("adapters", 2, 4.1)]))
    (tmp_path / "older_lane1.log").write_text(lane_log([("adapters", 1, 4.4)], unusable=False))
    table = lane_log_pairs.main([str(tmp_path / "*_lane*.log"), "--pair", "group", "shared",
                                 "--pair", "adapters", "shared"])
    assert "| group − shared | 2 | -0.400 ± 0.283 | 2 of 2 | -0.200 (1) / -0.600 (2) | 0.0 ± 0.0 | 0 of 1 |" in table
    scores = lane_logs.read_scores([tmp_path / "old_lane1.log", tmp_path / "older_lane1.log"])
    assert "| adapters − shared | 1 | -0.300 ± 0.000 | 1 of 1 | -0.300 (1) | – | – |" in lane_log_pairs.pairs_table(
        scores, [("adapters", "shared")])


def test_lane_logs_read_a_reproduced_run_once_and_refuse_one_found_twice_with_other_scores(tmp_path):
    (tmp_path / "a.log").write_text(lane_log([("shared", 1, 4.7)]))
    (tmp_path / "again.log").write_text(lane_log([("shared", 1, 4.7), ("group", 1, 4.5)]))
    (tmp_path / "b.log").write_text(lane_log([("shared", 1, 4.6), ("group", 2, 4.5)]))
    assert lane_logs.read_scores([tmp_path / "a.log", tmp_path / "again.log"]) == {
        ("shared", 1): {"loss": 4.7, "unusable": 50.0}, ("group", 1): {"loss": 4.5, "unusable": 50.0}}
    with pytest.raises(ValueError, match="shared seed 1 is in .*a.log and in .*b.log with other scores"):
        lane_logs.read_scores([tmp_path / "a.log", tmp_path / "b.log"])


def test_lane_log_pairs_refuses_a_pair_without_a_common_seed(lane_log_pairs, tmp_path):
    (tmp_path / "b.log").write_text(lane_log([("shared", 1, 4.6), ("group", 2, 4.5)]))
    scores = lane_logs.read_scores([tmp_path / "b.log"])
    with pytest.raises(ValueError, match="no seed has runs of both 'group' and 'shared'"):
        lane_log_pairs.pairs_table(scores, [("group", "shared")])


def test_quality_plot_reads_a_panel_from_lane_logs_in_the_order_given(tmp_path, capsys):
    """A panel whose run folders are not kept pairs the test losses its lane logs printed, seed by seed, as a panel of
    run folders pairs its runs'; panels keep the order given, whichever option gave them."""
    import quality_plot

    for system, seed, loss in (("shared", 1, 4.0), ("group", 1, 3.9), ("shared", 2, 4.2), ("group", 2, 4.0)):
        write_run(tmp_path / "mt" / "runs" / system / f"seed{seed}", {"predict_loss": loss}, [("en-de", "a", "a")])
    (tmp_path / "asr_lane1.log").write_text(lane_log([("shared", 1, 4.5), ("group", 1, 4.25)]))
    (tmp_path / "asr_lane2.log").write_text(lane_log([("shared", 2, 4.5), ("group", 2, 4.75), ("group", 3, None)]))
    differences = quality_plot.main(["--panel_logs", "ASR", str(tmp_path / "asr_lane*.log"), "--panel", "MT",
                                     str(tmp_path / "mt"), "--system", "group", "Group"])
    assert list(differences) == ["ASR", "MT"]
    assert differences["ASR"]["Group"] == pytest.approx({"seed1": -0.25, "seed2": 0.25})  # seed 3 stopped
    assert differences["MT"]["Group"] == pytest.approx({"seed1": -0.1, "seed2": -0.2})
    assert "| test cross-entropy minus shared's, paired by seed | ASR | MT |" in capsys.readouterr().out
    for argv, error in (([str(tmp_path / "none*.log")], "no lane log matches"), ([], "name the panel's lane logs")):
        with pytest.raises(SystemExit):
            quality_plot.main(["--panel_logs", "ASR", *argv, "--system", "group", "Group"])
        assert error in capsys.readouterr().err


def test_quality_plot_refuses_repeated_panel_titles_and_system_labels(tmp_path, capsys):
    import quality_plot

    rows = [("en-de", "a", "a")]
    for system in ("shared", "group", "subset"):
        write_run(tmp_path / "mt" / "runs" / system / "seed1", {"predict_loss": 4.0}, rows)
    panels = ["--panel", "MT", str(tmp_path / "mt")]
    for argv, repeated in ((panels + panels + ["--system", "group", "Group"], "--panel titles"),
                           (panels + ["--system", "group", "HS", "--system", "subset", "HS"], "--system labels")):
        with pytest.raises(SystemExit):  # collect would key both by one name: one silently replaces the other
            quality_plot.main(argv)
        assert f"{repeated} must be distinct; repeated: ['" in capsys.readouterr().err


def test_quality_plot_and_tables_pair_the_same_finished_seeds(tmp_path):
    import quality_plot
    import quality_tables

    rows = [("en-de", "Das ist gut.", "Das ist gut.")]
    for seed, (shared, group) in enumerate([(4.0, 3.9), (4.2, 4.6), (4.1, 4.0)], 1):
        for system, loss in (("shared", shared), ("group", group)):
            write_run(tmp_path / "mt" / "runs" / system / f"seed{seed}", {"predict_loss": loss, "predict_bleu": 1.0},
                      rows)
    (tmp_path / "mt" / "runs" / "group" / "seed2" / "generated_predictions.jsonl").unlink()  # scores, no hypotheses
    (tmp_path / "mt" / "runs" / "group" / "seed3" / "generated_predictions.jsonl").write_text("")  # cut short
    assert quality_plot.paired_differences(tmp_path / "mt", "group", "shared") == pytest.approx({"seed1": -0.1})
    assert quality_tables.paired_table(tmp_path / "mt", "shared").splitlines()[-1].startswith(
        "| group | 1 | -0.100 ± 0.000 |")


def test_quality_scripts_explain_what_they_cannot_use(tmp_path, capsys):
    import quality_plot
    import quality_tables

    (tmp_path / "not_an_experiment").mkdir()
    with pytest.raises(ValueError, match="no finished run"):  # no runs/ folder
        quality_tables.supplementary_table(tmp_path / "not_an_experiment")
    run = tmp_path / "mt" / "runs" / "shared" / "seed1"
    write_run(run, {"predict_loss": 3.0, "predict_bleu": 0.0}, [])
    for blank in ("", "\n \n"):  # an empty predictions file, or one of blank lines: nothing to score
        (run / "generated_predictions.jsonl").write_text(blank)
        assert not quality_tables.is_finished(run)
        with pytest.raises(ValueError, match="no finished run"):
            quality_tables.supplementary_table(tmp_path / "mt")

    write_run(tmp_path / "asr" / "runs" / "shared" / "seed1", {"predict_loss": 4.0}, [("de", "a", "a")])
    with pytest.raises(SystemExit):  # no group run to pair: nothing to draw
        quality_plot.main(["--panel", "ASR", str(tmp_path / "asr"), "--system", "group", "Group", "--output",
                           str(tmp_path / "plot.png")])
    assert "no system has a seed paired with the reference 'shared'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no system has a seed paired with the reference 'shared'"):
        quality_plot.plot({"ASR": {}}, ["Group"], "shared", tmp_path / "plot.png")
    assert not (tmp_path / "plot.png").exists()


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
    row = after["selections"]["decoder_self"][next(iter(after["selections"]["decoder_self"]))][0]
    row[0] = next(head for head in range(2 * len(row)) if head not in row)  # one head swapped for an unselected one
    (run / SELECTION_LOG_NAME).write_text(json.dumps(before) + "\n" + json.dumps(after) + "\n")
    (run / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 10, "loss": 2.5}, {"x": 1}]}))
    (run / "predict_results.json").write_text(json.dumps({"predict_loss": 2.25}))

    summaries = recipe_curves.collect(tmp_path / "experiment")
    summary = summaries["group"]
    assert summary["loss"] == [(10, 2.5)] and summary["test_loss"] == 2.25
    assert summary["changes"] == [(10, 1)]
    low, high = summary["logit_range"]
    assert low == -3.0 and high >= 0.5
    assert "| group | 2.250 | 2.500 |" in recipe_curves.table(summaries)
    summary["loss"] = []  # a run shorter than its logging interval logs no training loss
    assert "| group | 2.250 | – |" in recipe_curves.table(summaries)


def write_selection_log(folder: Path, *selections: dict) -> None:
    """The selection log of a head-selection run: decoder_self's `{task: rows}` at steps 0, 10, 20, ..."""
    from hf_headsel.analysis import SELECTION_LOG_NAME

    (folder / SELECTION_LOG_NAME).write_text("\n".join(
        json.dumps({"step": 10 * i, "selections": {"decoder_self": s}}) for i, s in enumerate(selections)) + "\n")


def write_curve_run(run: Path, test_loss: float, losses: list[float], *selections: dict) -> None:
    """A finished run for recipe_curves: the trainer log of `losses` (steps 10, 20, ...), the test loss and, given
    `selections`, their log and selection logits in [-1, 0.5]; without: a stock run."""
    run.mkdir(parents=True)
    history = [{"step": 10 * (i + 1), "loss": loss} for i, loss in enumerate(losses)] + [{"train_runtime": 1.0}]
    (run / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (run / "predict_results.json").write_text(json.dumps({"predict_loss": test_loss}))
    if not selections:
        save_file({"model.shared.weight": torch.zeros(2, 2)}, str(run / "model.safetensors"))
        return
    save_file({"head_selection.decoder_self.logits": torch.tensor([[[-1.0, 0.5, 0.0, 0.0]]])},
              str(run / "model.safetensors"))
    write_selection_log(run, *selections)


def test_recipe_curves_table_reads_the_first_finished_seed_totals_and_the_last_loss(tmp_path):
    """Per system: the first *finished* seed (one still training is skipped, later seeds ignored); the selection
    changes column sums every step's changes; the training loss is the last logged; a run without a selection log
    shows "–", not 0."""
    import recipe_curves

    runs = tmp_path / "exp" / "runs"
    (runs / "group" / "seed0").mkdir(parents=True)  # still training: no predict_results.json
    write_curve_run(runs / "group" / "seed1", 2.25, [3.0, 2.5], {"de": [[0, 1]]}, {"de": [[2, 3]]})  # two at once
    write_curve_run(runs / "group" / "seed2", 9.0, [9.0], {"de": [[0, 1]]}, {"de": [[0, 1]]})
    write_curve_run(runs / "shared" / "seed1", 2.0, [1.75, 1.5])
    summaries = recipe_curves.collect(tmp_path / "exp")
    assert summaries["group"]["changes"] == [(10, 2)] and summaries["group"]["total_changes"] == 2
    assert recipe_curves.table(summaries).splitlines()[2:] == ["| group | 2.250 | 2.500 | 2 | [-1.00, 0.50] |",
                                                               "| shared | 2.000 | 1.500 | – | – |"]


def test_recipe_curves_main_writes_its_files_and_refuses_an_experiment_without_finished_runs(tmp_path, capsys):
    """main writes curves.json, curves.md and curves.png, and refuses an experiment with no finished run."""
    import recipe_curves

    (tmp_path / "empty" / "runs" / "group" / "seed1").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no finished run"):
        recipe_curves.main([str(tmp_path / "empty"), "--output_dir", str(tmp_path / "out_empty")])
    assert not (tmp_path / "out_empty").exists()
    write_curve_run(tmp_path / "exp" / "runs" / "group" / "seed1", 2.25, [2.5], {"de": [[0, 1]]}, {"de": [[2, 1]]})
    recipe_curves.main([str(tmp_path / "exp"), "--output_dir", str(tmp_path / "out")])
    assert json.loads((tmp_path / "out" / "curves.json").read_text())["group"]["test_loss"] == 2.25
    expected = recipe_curves.table(recipe_curves.collect(tmp_path / "exp"))
    assert (tmp_path / "out" / "curves.md").read_text() == expected + "\n"
    assert (tmp_path / "out" / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert "| group | 2.250 | 2.500 | 1 |" in capsys.readouterr().out


def test_grouping_ab_times_stock_grouped_and_ungrouped(capsys):
    import grouping_ab

    measurement = grouping_ab.main(["--quick", "--repeats", "2", "--family", "speech_to_text"])
    assert set(measurement.seconds) == {"stock", "grouped", "ungrouped"}
    assert all(len(seconds) == 2 for seconds in measurement.seconds.values())
    assert "vs stock" in capsys.readouterr().out


def untimed(after_call=lambda system: None):
    """A stand-in for `overhead.time_systems`: each system called once, in order, untimed; `after_call(system)` after
    each call."""

    def time_systems(name, systems, cfg, device):
        for system, call in systems.items():
            call()
            after_call(system)
        return overhead.Measurement(name, None, {system: [1.0] for system in systems})

    return time_systems


def test_grouping_ab_times_headsel_grouped_and_ungrouped_as_named(monkeypatch):
    """The `grouped` system runs with `group_mixed_batches` on, `ungrouped` with it off."""
    import grouping_ab

    models, grouping = {}, {}
    build_models = overhead.build_models
    monkeypatch.setattr(overhead, "build_models", lambda *args: models.update(build_models(*args)) or models)
    monkeypatch.setattr(overhead, "time_systems", untimed(
        lambda system: grouping.update({system: models["headsel"].group_mixed_batches})))
    grouping_ab.main(["--quick", "--repeats", "1"])
    assert list(grouping) == ["stock", "grouped", "ungrouped"]
    assert (grouping["grouped"], grouping["ungrouped"]) == (True, False)


def test_decoding_caches_ab_times_compiled_generation_with_and_without_the_caches(capsys):
    import decoding_caches_ab
    from transformers import GenerationMixin

    measurements = decoding_caches_ab.main(["--quick", "--repeats", "1", "--compile-backend", "eager"])
    assert [m.name for m in measurements] == ["generate greedy, single-task", "generate greedy, mixed-task"]
    for measurement in measurements:
        assert set(measurement.seconds) == {"stock", "headsel", "headsel_uncached"}
        assert all(len(seconds) == 1 for seconds in measurement.seconds.values())
    model = overhead.build_models(overhead.BenchConfig(**overhead.QUICK), torch.device("cpu"), torch.float32,
                                  ("headsel",))["headsel"]
    uncached = decoding_caches_ab.without_decoding_caches(model)
    assert uncached.prepare_inputs_for_generation.__func__ is GenerationMixin.prepare_inputs_for_generation
    assert model.prepare_inputs_for_generation.__func__ is not GenerationMixin.prepare_inputs_for_generation
    assert "vs stock" in capsys.readouterr().out


def test_projection_ab_times_the_stock_model_and_each_projection_of_a_mixed_batch(capsys):
    import projection_ab

    from hf_headsel.attention import HeadSelectionAttentionMixin

    measurement = projection_ab.main(["--quick", "--repeats", "1", "--measurement", "generate beam",
                                      "--modes", "gathered", "batched"])
    assert measurement.name == "generate beam 5, mixed-task"
    assert set(measurement.seconds) == {"stock", "gathered", "batched"}
    assert all(len(seconds) == 1 for seconds in measurement.seconds.values())
    assert HeadSelectionAttentionMixin.mixed_batch_projection == "auto"  # set for each call, then restored
    assert "batched / gathered: paired median" in capsys.readouterr().out


def test_read_floor_ab_times_a_stock_model_reading_every_candidates_rows(capsys):
    import read_floor_ab

    measurement = read_floor_ab.main(["--quick", "--repeats", "1", "--family", "speech_to_text",
                                      "--total-heads", "6", "--strategy", "subset", "--tasks", "3"])  # fmt: skip
    assert measurement.name == "generate greedy, mixed-task"
    assert set(measurement.seconds) == {"stock", "stock_wide", "headsel"}
    assert all(len(seconds) == 1 for seconds in measurement.seconds.values())
    out = capsys.readouterr().out
    assert "headsel / stock_wide: paired median" in out
    assert "H = 4, H' = 6 (subset;" in out and "3+3 tasks" in out and "stock_wide reads 1.5x the stock q/k/v rows" in out


@pytest.mark.parametrize("factor", [2, 1.5])
def test_wide_stock_model_reads_more_rows_and_gives_the_stock_outputs(factor):
    import read_floor_ab

    cfg = overhead.BenchConfig(**overhead.QUICK)
    stock = overhead.build_models(cfg, torch.device("cpu"), torch.float32, ("stock",))["stock"]
    wide = read_floor_ab.widened(stock, factor)
    stock_layers = [m for m in stock.modules() if hasattr(m, "q_proj")]
    wide_layers = [m for m in wide.modules() if hasattr(m, "q_proj")]
    assert len(wide_layers) == len(stock_layers) > 0
    for stock_layer, wide_layer in zip(stock_layers, wide_layers):
        for name in read_floor_ab.PROJECTIONS:
            linear, wide_linear = getattr(stock_layer, name), getattr(wide_layer, name)
            assert wide_linear.weight.shape == (factor * linear.out_features, linear.in_features)
            x = torch.randn(3, 5, linear.in_features)
            torch.testing.assert_close(wide_linear(x), linear(x), rtol=1e-6, atol=1e-6)
    inputs, _ = overhead.make_inputs(cfg, 2, True, torch.device("cpu"), labels=False)
    with torch.no_grad():
        torch.testing.assert_close(wide(**inputs).logits, stock(**inputs).logits, rtol=1e-5, atol=1e-5)


def test_adapters_ab_times_stock_head_selection_and_adapters_of_as_many_parameters(capsys):
    import adapters_ab

    results = adapters_ab.main(["--quick", "--repeats", "1", "--measurements", "generate greedy", "train step"])
    assert [m.name for m in results] == ["generate greedy, single-task", "train step, single-task",
                                         "generate greedy, mixed-task", "train step, mixed-task"]
    assert all(set(m.seconds) == {"stock", "headsel", "adapters"} for m in results)
    assert "adapters / headsel: paired median" in capsys.readouterr().out


def test_adapters_ab_matches_the_head_selection_models_parameters():
    import adapters_ab

    cfg = overhead.BenchConfig(**overhead.QUICK, components=COMPONENTS)
    headsel = overhead.build_models(cfg, torch.device("cpu"), torch.float32, ("headsel",))["headsel"]
    bottleneck = adapters_ab.matching_bottleneck(headsel, cfg)
    counts = {b: adapters_ab.parameter_count(adapters_ab.adapter_model(headsel, cfg, b)) for b in
              (bottleneck - 1, bottleneck, bottleneck + 1)}
    target = adapters_ab.parameter_count(headsel)
    assert min(counts, key=lambda b: abs(counts[b] - target)) == bottleneck  # the nearest count to headsel's
    adapters = adapters_ab.adapter_model(headsel, cfg, bottleneck)
    assert adapters.config.total_encoder_attention_heads == cfg.heads and adapters.config.task_adapter_dim == bottleneck
    ups = [p for name, p in adapters.named_parameters() if name.endswith("task_adapter.up_weight")]
    assert ups and all(p.abs().sum() > 0 for p in ups)  # a trained adapter's arithmetic, not a fresh one's zeros


def test_adapters_ab_reports_parameters_over_the_stock_model(monkeypatch, capsys):
    """Parameters over stock: head selection holds more than the stock model, and the matched adapters about as many
    as head selection."""
    import adapters_ab

    monkeypatch.setattr(overhead, "time_systems", untimed())
    adapters_ab.main(["--quick", "--repeats", "1", "--measurements", "eval forward"])
    ratios = dict(re.findall(r"(stock|headsel|adapters) (\d+\.\d+)x", capsys.readouterr().out))
    assert float(ratios["stock"]) == 1.0 and float(ratios["headsel"]) > 1.0
    assert float(ratios["adapters"]) == pytest.approx(float(ratios["headsel"]), rel=0.02)


def test_revision_ab_times_the_stock_model_an_earlier_revision_and_the_checkout(capsys):
    import revision_ab
    from transformers import AutoConfig

    import hf_headsel

    measurement = revision_ab.main(["--rev", "HEAD", "--quick", "--repeats", "1", "--mixed"])
    assert set(measurement.seconds) == {"stock", "earlier", "headsel"}
    assert all(len(seconds) == 1 for seconds in measurement.seconds.values())
    out = capsys.readouterr().out
    assert "earlier = HEAD" in out and "headsel / earlier: paired median" in out
    # the earlier package was imported under its own name, and the Auto classes map to the checkout's again
    assert sys.modules[revision_ab.EARLIER].__name__ == revision_ab.EARLIER
    assert AutoConfig.for_model("headsel_marian").__class__ is hf_headsel.HeadSelMarianConfig


def test_revision_ab_twin_runs_the_earlier_revisions_classes_with_the_same_weights(tmp_path):
    """The earlier twin is built from the earlier package's classes (not the checkout's) and carries the model's
    weights: at `--rev HEAD` it computes exactly what the model computes, mixed tasks and every component selecting."""
    import revision_ab

    for name in [name for name in sys.modules if name.split(".")[0] == revision_ab.EARLIER]:
        del sys.modules[name]  # imported afresh from this test's folder
    revision_ab.import_revision("HEAD", tmp_path)
    model = MARIAN.model(head_selection_components=list(COMPONENTS))
    twin = revision_ab.earlier_twin(model, "marian")
    assert type(twin).__module__ == f"{revision_ab.EARLIER}.modeling_headsel_marian" and not twin.training
    routing = dict(encoder_task_ids=torch.tensor([0, 1, 0, 1]), decoder_task_ids=torch.tensor([0, 1, 2, 0]))
    inputs = dict(MARIAN.inputs(), decoder_input_ids=MARIAN.decoder_input_ids(), **routing)
    with torch.no_grad():
        torch.testing.assert_close(twin(**inputs).logits, model(**inputs).logits, rtol=0, atol=0)


def test_the_paired_ratio_compares_each_round_with_its_own_stock_call():
    # the stock model drifts 2x across rounds; head selection costs 1.1x its own round's stock call in all but one
    stock = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0]
    headsel = [1.1 * t for t in stock[:-1]] + [3.0]
    median, low, high = overhead.paired_ratio({"stock": stock, "headsel": headsel}, "headsel", "stock")
    assert median == pytest.approx(1.1) and low == pytest.approx(1.1) and high <= 3.0
    measurement = overhead.Measurement("generate greedy, mixed-task", 1.15, {"stock": stock, "headsel": headsel})
    assert measurement.ratio("headsel") == pytest.approx(2.2)  # ratio of medians: fooled by the drift
    header, _, row = overhead.format_table([measurement]).splitlines()
    assert "headsel / stock, paired [95%]" in header and " 1.100 [1.100, 1.100] | <= 1.15 | NO |" in row


def test_a_target_is_a_maximum_ratio_met_when_equalled():
    """`ok`: the ratio of medians is at most the target (equal meets it); the A/B lines give the ratio of the minima
    beside that of the medians."""
    assert overhead.Measurement("eval forward, single-task", 1.5, {"stock": [2.0], "headsel": [3.0]}).ok is True
    assert overhead.Measurement("eval forward, single-task", 1.5, {"stock": [2.0], "headsel": [3.002]}).ok is False
    assert overhead.Measurement("x", None, {"stock": [2.0], "headsel": [3.0]}).ok is None
    # medians 2.0 and 2.5 (ratio 1.25), minima 1.0 and 2.0 (ratio 2.0)
    measurement = overhead.Measurement("x", None, {"stock": [1.0, 3.0], "headsel": [2.0, 3.0]})
    headsel_line = overhead.ratio_lines(measurement)[1]
    assert headsel_line.startswith("headsel ") and headsel_line.endswith("vs stock 1.250 (min 2.000)")


def test_overhead_json_and_strict_exit_report_head_selection_against_the_stock_model(monkeypatch, tmp_path):
    """The JSON's ratios are system / stock (the paired one too), for the non-stock systems only, and `--strict` exits
    1 when a target is missed (0 without it). The timings are given: no model is built."""
    # per round headsel / stock: 3.0, 1.5, 0.5 -> paired median 1.5; medians 3.0 / 2.0 -> 1.5 (> 1.03: missed)
    seconds = {"stock": [1.0, 2.0, 4.0], "headsel": [3.0, 3.0, 2.0], "all_candidates": [1.0, 2.0, 4.0]}
    measurement = overhead.Measurement("eval forward, single-task", overhead.TARGETS["eval forward", "single"],
                                       seconds)
    monkeypatch.setattr(overhead, "build_models", lambda *args, **kwargs: {})
    monkeypatch.setattr(overhead, "check_equivalence", lambda *args: {"train_gradients_checked": 1})
    monkeypatch.setattr(overhead, "benchmark", lambda *args, **kwargs: [measurement])
    out = tmp_path / "overhead.json"
    argv = ["--quick", "--only", "eval forward, single", "--json", str(out)]
    assert overhead.main(argv + ["--strict"]) == 1
    assert overhead.main(argv) == 0
    (result,) = json.loads(out.read_text())["results"]
    assert result["ok"] is False
    assert result["ratio_median"] == {"headsel": 1.5, "all_candidates": 1.0}
    assert result["ratio_paired"]["headsel"]["median"] == 1.5
    assert result["ratio_paired"]["all_candidates"] == {"median": 1.0, "low": 1.0, "high": 1.0}


def write_recipe_run(folder: Path, loss: float, bleu: float, german: str) -> None:
    """A finished MT recipe run with its test scores and two predictions: en-es exact, en-de `german` for `Hello`."""
    write_run(folder, {"predict_loss": loss, "predict_bleu": bleu},
              [("en-es", "Hola mundo", "Hola mundo"), ("en-de", "Hallo", german)])


def write_head_sharing(folder: Path, tasks: list[str], sharing: list[list[float]]) -> None:
    """The analysis of a head-selection run: decoder_self's head sharing between `tasks`."""
    from hf_headsel.analysis import ANALYSIS_NAME

    (folder / ANALYSIS_NAME).write_text(json.dumps({"components": {"decoder_self": {"tasks": tasks,
                                                                                   "sharing": sharing}}}))


def write_selection_record(folder: Path, changed: bool) -> None:
    """The analysis, selection log and logits of a head-selection run: three target languages, one choice changed or
    not."""
    save_file({"head_selection.decoder_self.logits": torch.tensor([[[-5.0, 0.5, 0.0, -1.0]]] * 3),
               "model.shared.weight": torch.full((2, 2), 9.0)}, str(folder / "model.safetensors"))
    tasks = ["de", "es", "fr"]  # es-fr: the Romance pair; de-es, de-fr: the others
    write_head_sharing(folder, tasks, [[1.0, 0.25, 0.5], [0.25, 1.0, 0.75], [0.5, 0.75, 1.0]])
    before = {task: [[0, 1]] for task in tasks}
    write_selection_log(folder, before, before, {**before, "fr": [[2, 1]] if changed else [[0, 1]]})


def test_demo_seeds_leaves_out_a_sharing_row_without_pairs_of_its_kind(tmp_path):
    """A demo of languages with fewer than two Romance ones has no Romance pair: no row (a mean of nothing raised)."""
    import demo_seeds

    write_selection_record(tmp_path, changed=False)
    write_head_sharing(tmp_path, ["de", "el", "es"], [[1.0, 0.25, 0.5], [0.25, 1.0, 0.75], [0.5, 0.75, 1.0]])
    summary = demo_seeds.selection_summary(tmp_path)
    assert "decoder_self sharing, Romance pairs" not in summary
    assert summary["decoder_self sharing, other pairs"] == pytest.approx((0.25 + 0.5 + 0.75) / 3)


def test_demo_seeds_selection_summary_counts_events_last_change_and_mean_sharing(tmp_path):
    """Change events sum every logged step's changes (a step moving two choices is two); the last change is the step
    of the last one, not the first; head sharing is the mean over the pairs, not the median."""
    import demo_seeds

    write_selection_record(tmp_path, changed=False)  # its log and analysis replaced:
    # step 10: fr moves one choice; step 20: nothing; step 30: de moves two
    write_selection_log(tmp_path, {"de": [[0, 1]], "fr": [[0, 1]]}, {"de": [[0, 1]], "fr": [[2, 1]]},
                        {"de": [[0, 1]], "fr": [[2, 1]]}, {"de": [[3, 2]], "fr": [[2, 1]]})
    # the Romance pair: es-fr; the five others: de-es, de-fr, de-ru (nothing shared: their median is 0), es-ru, fr-ru
    write_head_sharing(tmp_path, ["de", "es", "fr", "ru"], [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.75, 0.5],
                                                           [0.0, 0.75, 1.0, 1.0], [0.0, 0.5, 1.0, 1.0]])
    summary = demo_seeds.selection_summary(tmp_path)
    assert summary["selection change events"] == 1 + 2
    assert summary["last change at step"] == 30
    assert summary["decoder_self sharing, Romance pairs"] == 0.75
    assert summary["decoder_self sharing, other pairs"] == pytest.approx((0 + 0 + 0 + 0.5 + 1.0) / 5)


def test_a_change_undone_is_two_events_and_no_net_change(tmp_path):
    import recipe_curves

    write_selection_log(tmp_path, {"de": [[0, 1]]}, {"de": [[2, 1]]}, {"de": [[0, 1]]})
    assert recipe_curves.selection_changes(tmp_path) == [(10, 1), (20, 1)]
    assert recipe_curves.net_selection_changes(tmp_path) == 0
    assert recipe_curves.net_selection_changes(tmp_path / "no_log") is None


def test_demo_seeds_pairs_the_systems_run_by_run_and_reads_what_the_selection_learned(tmp_path, capsys):
    import demo_seeds

    runs = [tmp_path / "seed1", tmp_path / "seed2"]
    for run, group_loss, german in ((runs[0], 3.5, "Hallo"), (runs[1], 3.7, "Hallo")):
        write_recipe_run(run, group_loss, 6.0 if run == runs[0] else 7.0, german)
        write_selection_record(run, changed=run == runs[0])
    write_recipe_run(runs[0] / "shared_baseline", 3.6, 5.0, german="aaaaaaa")  # a degenerate output
    write_recipe_run(runs[1] / "shared_baseline", 3.6, 5.0, german="Hallo")
    assert demo_seeds.system_scores(runs[1]) == {
        "test loss (label-smoothed)": 3.7, "BLEU avg": 7.0, "chrF pooled": 100.0, "chrF avg": 100.0,
        "degenerate outputs (%)": 0.0, "chrF en-de": 100.0, "chrF en-es": 100.0}
    assert demo_seeds.selection_summary(runs[0]) == {
        "selection choices changed, first to last": 1, "selection change events": 1, "last change at step": 20,
        "lowest selection logit": -5.0, "highest selection logit": 0.5,
        "decoder_self sharing, Romance pairs": 0.75, "decoder_self sharing, other pairs": 0.375}
    assert demo_seeds.selection_summary(runs[1])["last change at step"] == 0

    output = tmp_path / "summary.md"
    demo_seeds.main([str(run) for run in runs] + ["--output", str(output)])
    report = output.read_text()
    assert report.strip() == capsys.readouterr().out.strip()
    # losses: group 3.5 / 3.7, shared 3.6 / 3.6; differences -0.1 / +0.1 (lower is better: group wins once)
    assert "| test loss (label-smoothed) | 3.600 ± 0.141 | 3.600 ± 0.000 | 0.000 ± 0.141 | 1 of 2 |" in report
    assert "| BLEU avg | 6.50 ± 0.71 | 5.00 ± 0.00 | 1.50 ± 0.71 | 2 of 2 |" in report
    assert "| degenerate outputs (%) | 0.00 ± 0.00 | 25.00 ± 35.36 | -25.00 ± 35.36 | 1 of 2 |" in report
    assert "| selection choices changed, first to last | 0.500 ± 0.707 | 1, 0 |" in report
    # chrF per direction (no row of SCORES): higher is better, so group's German beats seed1's degenerate one, and a
    # tie is no win
    german = next(line for line in report.splitlines() if line.startswith("| chrF en-de |"))
    assert german.startswith("| chrF en-de | 100.00 ± 0.00 |") and german.endswith("| 1 of 2 |")
    assert "| chrF en-es | 100.00 ± 0.00 | 100.00 ± 0.00 | 0.00 ± 0.00 | 0 of 2 |" in report

    # a probe's head-selection runs pair with the demo folders' baselines, in order
    probe = tmp_path / "probe_seed1"
    write_recipe_run(probe, 3.4, 6.0, "Hallo")
    write_selection_record(probe, changed=False)
    demo_seeds.main([str(runs[0]), "--group", str(probe)])
    paired = capsys.readouterr().out
    assert "| test loss (label-smoothed) | 3.400 ± 0.000 | 3.600 ± 0.000 | -0.200 ± 0.000 | 1 of 1 |" in paired
    stopped = tmp_path / "stopped_while_writing"  # its scores written, its hypotheses file still empty
    write_recipe_run(stopped, 3.4, 6.0, "Hallo")
    (stopped / "generated_predictions.jsonl").write_text("")
    unscored = tmp_path / "unscored"  # its hypotheses written, not its test scores
    write_recipe_run(unscored, 3.4, 6.0, "Hallo")
    (unscored / "predict_results.json").unlink()
    not_finished = "not finished runs (no predict_results.json, or no generated_predictions.jsonl or an empty one): "
    for argv, message in (([str(tmp_path / "missing")], "not finished runs"),
                          ([str(runs[0]), "--group", str(stopped)], f"{not_finished}{stopped}"),
                          ([str(runs[0]), "--group", str(unscored)], f"{not_finished}{unscored}"),
                          ([*map(str, runs), "--group", str(probe)], "pairs one run with each demo folder"),
                          ([str(runs[0]), str(runs[0])], "runs names a folder twice")):  # one run as two seeds
        with pytest.raises(SystemExit):
            demo_seeds.main(argv)
        assert message in capsys.readouterr().err


def test_benchmark_tokenizers_have_every_task_tag_as_one_piece_and_are_built_once(tmp_path):
    corpus, out = tmp_path / "corpus", tmp_path / "tokenizers"
    with pytest.raises(SystemExit, match="no asr training manifests"):
        benchmark_tokenizers.main(["--corpus", str(corpus), "--output_dir", str(out), "--kinds", "asr"])
    folder = corpus / "speech" / "asr"
    folder.mkdir(parents=True)
    for task in benchmark_tokenizers.KINDS["asr"][1]:
        rows = [f"{task}-{i}\tclip.wav\t16000\twords of {task} number {i}" for i in range(20)]
        (folder / f"train_{task}_{task}_django.tsv").write_text("id\taudio\tn_frames\ttgt_text\n" + "\n".join(rows))
    benchmark_tokenizers.main(["--corpus", str(corpus), "--output_dir", str(out), "--kinds", "asr"])
    tokenizer = Speech2TextTokenizer.from_pretrained(str(out / "asr"))
    tasks = benchmark_tokenizers.KINDS["asr"][1]
    assert len(set(task_tag_ids(tokenizer, "lang", tasks).values())) == len(tasks)  # what --task_tag needs
    assert "<lang:fr>" in tokenizer.tokenize("<lang:fr> words")
    built = (out / "asr" / "vocab.json").stat().st_mtime_ns
    benchmark_tokenizers.main(["--corpus", str(corpus), "--output_dir", str(out), "--kinds", "asr"])
    assert (out / "asr" / "vocab.json").stat().st_mtime_ns == built  # there already: not built again


def load_baselines_script(name: str):
    """A script of `benchmarks/results/quality/baselines/` (a results folder, not on the test path)."""
    path = Path(__file__).resolve().parents[1] / f"benchmarks/results/quality/baselines/{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def write_selection_run(run: Path, candidates: int | None, *selections: dict, logits: torch.Tensor | None = None):
    """A finished run folder: the saved config (`None`: the stock model), the selection log and, given `logits`
    (`[tasks, layers, H']` of the decoder self-attention), the saved selection logits."""
    run.mkdir(parents=True)
    sizes = dict(vocab_size=16, d_model=16, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=8, decoder_ffn_dim=8)
    config = MarianConfig(**sizes) if candidates is None else HeadSelMarianConfig(
        **sizes, decoder_tasks=["fr", "it"], head_selection_components=["decoder_self"],
        total_decoder_attention_heads=candidates)
    config.save_pretrained(run)
    lines = [json.dumps({"step": 10 * i, "selections": s}) for i, s in enumerate(selections)]
    (run / "head_selection_log.jsonl").write_text("\n".join(lines) + "\n")
    if logits is not None:
        save_file({"head_selection.decoder_self.logits": logits}, run / "model.safetensors")


def test_selection_changes_counts_choices_moved_since_the_first_snapshot(tmp_path, capsys):
    selection_changes = load_baselines_script("selection_changes")
    start = {"decoder_self": {"fr": [[0, 1, 2, 7], [4, 5, 2, 3]], "it": [[4, 5, 6, 3], [0, 1, 6, 7]]}}
    moved = {"decoder_self": {"fr": [[0, 5, 2, 7], [4, 5, 2, 3]], "it": [[4, 5, 6, 3], [0, 1, 2, 3]]}}
    lowest = {"decoder_self": {"fr": [[0, 1, 2, 3], [0, 1, 2, 3]], "it": [[0, 1, 2, 3], [0, 1, 2, 3]]}}
    write_selection_run(tmp_path / "exp/runs/group/seed1", 8, start, start, moved)
    write_selection_run(tmp_path / "exp/runs/group/seed2", 8, lowest)  # a choice, though every task holds its lowest
    write_selection_run(tmp_path / "exp/runs/adapters/seed1", 4, lowest)  # H' = H: nothing to choose
    write_selection_run(tmp_path / "exp/runs/shared/seed1", None, lowest)
    (tmp_path / "exp/runs/training/seed1").mkdir(parents=True)  # still training: a log, no saved model yet
    (tmp_path / "exp/runs/training/seed1/head_selection_log.jsonl").write_text(json.dumps(
        {"step": 0, "selections": start}) + "\n")
    assert selection_changes.net_changes(tmp_path / "exp/runs/group/seed1/head_selection_log.jsonl") == (
        20, {"decoder_self": (3, 16)})
    selection_changes.main([str(tmp_path / "exp")])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert rows == ["| exp | group | 1 | 20 | decoder_self: 3 / 16 |", "| exp | group | 2 | 0 | decoder_self: 0 / 16 |"]


def test_logit_travel_measures_margins_against_the_frozen_runs_initial_logits(tmp_path, capsys):
    selection_changes = load_baselines_script("selection_changes")
    initial = torch.zeros(2, 2, 8)
    initial[..., 4:] = -1.0  # every slot chooses its first candidate (0..3), by a margin of 1
    initial[1, 1, 6] = 0.5  # task 1, layer 1, slot 2: candidate 6, by 0.5
    final = initial.clone()
    final[0, 0, 0] -= 1.5  # slot 0's chosen candidate falls 0.5 below its rival: the choice changes
    final[0, 0, 1] -= 0.5  # slot 1 keeps its choice, by 0.5
    final[1] -= 2.0  # a shift of every candidate alike: no choice changes
    chosen = [[[0, 1, 2, 3], [0, 1, 2, 3]], [[0, 1, 2, 3], [0, 1, 6, 3]]]
    first = {"decoder_self": {"fr": chosen[0], "it": chosen[1]}}
    write_selection_run(tmp_path / "exp/runs/frozen/seed1", 8, first, logits=initial)
    write_selection_run(tmp_path / "exp/runs/group/seed1", 8, first, logits=final)
    travel = selection_changes.logit_travel(tmp_path / "exp/runs/group/seed1", tmp_path / "exp/runs/frozen/seed1")
    m = travel["decoder_self"]
    assert m["abs_change"] == pytest.approx((1.5 + 0.5 + 2.0 * 16) / 32)
    assert m["mean_change"] == pytest.approx(-(1.5 + 0.5 + 2.0 * 16) / 32)
    assert m["initial_margin"] == pytest.approx((15 * 1.0 + 0.5) / 16)
    assert m["margin_change"] == pytest.approx(-(1.5 + 0.5) / 16)
    assert m["abs_margin_change"] == pytest.approx((1.5 + 0.5) / 16)
    assert (m["changed"], m["choices"]) == (1, 16)
    selection_changes.main([str(tmp_path / "exp"), "--initial", "frozen"])
    rows = [row for row in capsys.readouterr().out.splitlines() if "| 1 | decoder_self |" in row]
    assert rows == ["| exp | group | 1 | decoder_self | 1.062 | -1.062 | 0.969 | -0.125 | 0.125 | 1 / 16 |"]

    other = {"decoder_self": {"fr": chosen[1], "it": chosen[0]}}  # not the frozen run's initial selection
    write_selection_run(tmp_path / "exp/runs/other_seed/seed1", 8, other, logits=final)
    with pytest.raises(ValueError, match="do not give the run's first logged selection"):
        selection_changes.logit_travel(tmp_path / "exp/runs/other_seed/seed1", tmp_path / "exp/runs/frozen/seed1")


def test_param_match_counts_adapter_sets_in_use_and_the_bottleneck_matching_group(tmp_path, capsys, monkeypatch):
    param_match = load_baselines_script("param_match")
    write_jsonl(tmp_path / "data/train.jsonl", text_rows(48, seed=1))  # en-de, en-fr, de-en
    heads = {"total_encoder_attention_heads": 2, "total_decoder_attention_heads": 2}
    experiment = {
        "name": "tiny", "recipe": "mt", "output_dir": str(tmp_path / "out"), "seeds": [1],
        "flags": {"train_file": [str(tmp_path / "data/train.jsonl")], "config_overrides": TINY_TEXT, "vocab_size": 60,
                  "use_cpu": True, "bf16": True, "cache_dir": str(tmp_path / "cache")},  # bf16: a GPU file's flag
        "systems": [
            {"name": "Shared", "flags": {"shared_baseline": True}},
            {"name": "Group", "flags": {"head_selection_strategy": "group", "total_encoder_attention_heads": 4,
                                        "total_decoder_attention_heads": 4}},
            {"name": "Adapters", "flags": {"task_adapter_dim": 8, **heads}},
            {"name": "Adapters by task", "flags": {"task_adapter_dim": 8, "task_adapter_key": "task", **heads}},
            {"name": "Adapters on Shared", "init_from": "Shared", "flags": {"task_adapter_dim": 8, **heads}},
        ],
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(experiment))
    tasks, counts = param_match.count_systems(load_experiment(tmp_path / "tiny.yaml"))
    assert tasks == (["de", "en"], ["de", "en", "fr"], {("en", "de"), ("en", "fr"), ("de", "en")})
    assert "Adapters on Shared" not in counts  # its model is Shared's plus its flags': counted as "Adapters"
    per_set = 3 * 32 + 2 * 32 * 8 + 8  # layer norm, down and up projections with biases, at d_model 32
    total, in_use, bottleneck = counts["Adapters"]
    assert bottleneck == 8 and total - in_use == (6 - 3) * per_set * 2  # 3 of 6 directions, 1 + 1 layers
    total, in_use, _ = counts["Adapters by task"]
    assert total == in_use  # every encoder task (de, en) and decoder task (de, en, fr) is trained
    assert counts["Adapters @ b+1"][1] - counts["Adapters"][1] == 3 * 2 * (2 * 32 + 1)  # linear in the bottleneck
    assert counts["Group"][2] is None and counts["Shared"][0] == counts["Shared"][1]

    monkeypatch.setattr(sys, "argv", ["param_match.py", str(tmp_path / "tiny.yaml")])
    param_match.main()
    rows = {row.split(" | ")[0].strip("| "): row for row in capsys.readouterr().out.splitlines() if row.startswith("| ")}
    matching = next(name for name in rows if name.startswith("Adapters, bottleneck"))
    bottleneck = int(matching.split("bottleneck ")[1].split()[0])
    in_use = counts["Adapters"][1] + (bottleneck - 8) * 3 * 2 * (2 * 32 + 1)
    assert abs(in_use - counts["Group"][1]) <= 3 * 2 * (2 * 32 + 1) / 2  # the nearest bottleneck to Group's count
    assert f"| {in_use:,} |" in rows[matching]


def test_copy_source_chrf_scores_the_source_as_the_output_of_every_direction(tmp_path):
    (tmp_path / "mt").mkdir()
    for lang in LANGUAGES:  # German's target equals its source: a perfect copy; the others share nothing with it
        target = "Add a site" if lang == "de" else "xyz qvw"
        write_jsonl(tmp_path / "mt" / f"test_en_{lang}_django.jsonl", [{"source": "Add a site", "target": target}])
    scores = copy_source_chrf.main(["--corpus_dir", str(tmp_path), "--output", str(tmp_path / "copy.json")])
    assert scores["test_sentences"] == len(LANGUAGES) and scores["chrf_en-de"] == 100.0
    assert all(scores[f"chrf_en-{lang}"] == 0.0 for lang in LANGUAGES if lang != "de")
    assert json.loads((tmp_path / "copy.json").read_text()) == scores

    (tmp_path / "mt" / f"test_en_{LANGUAGES[0]}_django.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match=f"test_en_{LANGUAGES[0]}"):
        copy_source_chrf.main(["--corpus_dir", str(tmp_path)])


def test_copy_source_chrf_scores_the_source_as_the_hypothesis_and_counts_every_pair(tmp_path):
    """The source is the hypothesis and the target the reference (chrF weighs recall: the order matters), and
    `test_sentences` counts the pairs, not the directions."""
    import sacrebleu

    for lang in LANGUAGES:
        rows = [{"source": "Add a site", "target": "Add a site now"}]
        write_jsonl(tmp_path / "mt" / f"test_en_{lang}_django.jsonl", rows * (2 if lang == "de" else 1))
    scores = copy_source_chrf.main(["--corpus_dir", str(tmp_path)])
    assert scores["test_sentences"] == len(LANGUAGES) + 1
    as_output = sacrebleu.corpus_chrf(["Add a site"], [["Add a site now"]]).score
    as_reference = sacrebleu.corpus_chrf(["Add a site now"], [["Add a site"]]).score
    assert as_output < as_reference  # a copy shorter than its reference misses recall
    assert scores["chrf_en-de"] == pytest.approx(as_output, abs=0.01)


def test_corpus_overlap_counts_near_duplicates_of_training_sentences(tmp_path):
    mt = tmp_path / "mt"
    write_jsonl(mt / "train_en_fr_shop.jsonl", [{"source": "Shipping methods", "target": "x"},
                                                {"source": "Delete the basket", "target": "x"}])
    write_jsonl(mt / "test_en_fr_shop.jsonl", [{"source": "Shipping method", "target": "y"},  # plural
                                               {"source": "Delete this basket!", "target": "y"},  # an edit
                                               {"source": "Something else", "target": "y"}])
    write_jsonl(mt / "test_en_de_shop.jsonl", [{"source": "Something else", "target": "z"}])  # multi-parallel
    write_jsonl(mt / "test_fr_en_shop.jsonl", [{"source": "Shipping method", "target": "w"}])  # x->en: not read
    rows = corpus_overlap.overlap_rows(corpus_overlap.read_pairs(tmp_path))
    shop, everything = [row for row in rows if row["split"] == "test"]
    assert shop == dict(everything, domain="shop")
    assert (shop["pairs"], shop["english"], shop["variant"], shop["ratio"]) == (4, 3, 1, 1)


def test_corpus_overlap_variant_key_strips_articles_and_plural_s_only():
    """Articles go; a plural -s goes from words of 4+ letters, not from -ss words nor short ones (its, has)."""
    assert corpus_overlap.variant_key("The shipping methods") == "shipping method"
    assert corpus_overlap.variant_key("Its class has an address") == "its class has address"


def test_corpus_overlap_reads_every_evaluation_split_and_tables_shares_of_the_pairs(tmp_path):
    """Rows for dev and test; a share is of the split's pairs, not of its distinct English sentences."""
    mt = tmp_path / "mt"
    write_jsonl(mt / "train_en_fr_shop.jsonl", [{"source": "Shipping methods", "target": "x"}])
    write_jsonl(mt / "dev_en_fr_shop.jsonl", [{"source": "Shipping method", "target": "y"}])
    for lang in ("de", "fr"):  # one English sentence in two languages, and one more in French
        write_jsonl(mt / f"test_en_{lang}_shop.jsonl", [{"source": "Shipping method", "target": "y"}]
                    + ([{"source": "Something else", "target": "z"}] if lang == "fr" else []))
    rows = corpus_overlap.overlap_rows(corpus_overlap.read_pairs(tmp_path))
    assert [(row["split"], row["domain"]) for row in rows] == [("dev", "shop"), ("dev", "all"), ("test", "shop"),
                                                               ("test", "all")]
    test_shop = rows[2]
    # fuzz.ratio("shipping method", "shipping methods") = 100 * 2 * 15 / 31 = 96.8 >= 95: a near-duplicate too
    assert (test_shop["pairs"], test_shop["english"], test_shop["variant"], test_shop["ratio"]) == (3, 2, 2, 2)
    # 2 of 3 pairs (66.7 %), not 2 of 2 distinct sentences (100 %)
    assert "| test | shop | 3 | 2 | 2 (66.7 %) | 2 (66.7 %) |" in corpus_overlap.table(rows, "cmd")


def test_performance_quick_sweep_reports_both_systems_and_the_tasks_a_batch_holds(tmp_path, capsys):
    import performance

    out = tmp_path / "perf"
    performance.main(["--quick", "--output", str(out), "--tasks", "2", "8", "--total-heads", "8", "--no-memory",
                      "--repeats", "1", "--warmup", "0"])
    report = json.loads(out.with_suffix(".json").read_text())
    points = {(p["tasks"], p["total_heads"]): p for p in report["points"]}
    assert set(points) == {(2, 8), (8, 8), (4, 8)}  # the task sweep at the base H', the H' sweep at the base tasks
    for point in points.values():
        assert set(point["cost_ratio"]) == {"train step", "generate greedy", "generate beam 5"}
        assert all(len(seconds) == 1 for timings in point["seconds"].values() for seconds in timings.values())
    # --quick's batches hold 4 examples: 8 tasks per side put 4 tasks into one (the table says so, not 8)
    assert points[(8, 8)]["tasks_per_batch"] == {"train": 4, "generate": 4}
    assert points[(2, 8)]["tasks_per_batch"] == {"train": 2, "generate": 2}
    table = out.with_suffix(".md").read_text()
    assert "| 8 | 8 | 4 / 4 |" in table and table in capsys.readouterr().out


def test_performance_point_ratios_and_report_columns():
    """Cost ratio headsel / stock of the medians, tokens per second of the median step, memory ratio headsel / stock,
    and the report's stock-then-headsel columns."""
    import performance

    mib = performance.MIB
    seconds = {"train step": {"stock": [1.0, 2.0, 3.0], "headsel": [2.0, 2.5, 4.0]},  # medians 2.0, 2.5
               "generate greedy": {"stock": [0.010], "headsel": [0.012]},
               "generate beam 5": {"stock": [0.020], "headsel": [0.030]}}
    result = performance.PointResult(performance.Point(2, 8, ("tasks",)), 100, {"train": 2, "generate": 2},
                                     seconds, {"train step": {"stock": 2 * mib, "headsel": 3 * mib},
                                               "generate beam 5": {"stock": 4 * mib, "headsel": 5 * mib}},
                                     {"stock": 10 * mib, "headsel": 11 * mib})
    assert result.cost_ratio("train step") == 1.25
    assert (result.tokens_per_s("stock"), result.tokens_per_s("headsel")) == (50.0, 40.0)  # 100 tokens a step
    assert result.memory_ratio("train step") == 1.5 and result.memory_ratio("generate beam 5") == 1.25
    cfg = overhead.BenchConfig(**overhead.QUICK)
    environment = dict(device="cpu", dtype="float32", batch_kind="mixed", torch="t", transformers="tf", threads=1)
    report = performance.report([result], cfg, environment, "peak RSS")
    assert "| 2 | 8 | 2 / 2 | 50 | 40 | 1.250 | 10.0 | 12.0 | 1.200 | 20.0 | 30.0 | 1.500 |" in report
    assert "| 2 | 8 | 10.0 | 11.0 | 2.0 | 3.0 | 1.500 | 4.0 | 5.0 | 1.250 |" in report


def test_performance_refuses_a_total_heads_the_group_strategy_cannot_split():
    """The group strategy needs H' a multiple of H (H = 4: 6 is refused, 8 is not)."""
    import performance

    base = overhead.BenchConfig()
    assert [p.total_heads for p in performance.sweep_points(base, [4], [4, 8])] == [8, 4]
    with pytest.raises(SystemExit, match="--total-heads 6"):
        performance.sweep_points(base, [4], [6])


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
#: This project's importable code: the package, the recipes, the corpus builder, the benchmark modules.
OWN_MODULES = {"hf_headsel", "headsel_recipes", "offline_corpus"} | {path.stem for path in BENCHMARKS.glob("*.py")}


def _project_imports(script: Path) -> list[tuple[str, str | None]]:
    """`(module, name)` for every import in `script` of this project's code ([`OWN_MODULES`]); `name` is None for
    a plain `import module`."""
    found = []
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in OWN_MODULES:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] in OWN_MODULES]
    return found


def test_every_benchmark_script_imports_names_that_exist():
    # The scripts under benchmarks/results/ are kept to rerun a recorded measurement; most are not run by any other
    # test, so a name moved in the package or the recipes would break them unseen (collapse.py's `lang_token` did).
    missing = []
    for script in sorted(BENCHMARKS.rglob("*.py")):
        for module, name in _project_imports(script):
            imported = importlib.import_module(module)
            if name is not None and name != "*" and not hasattr(imported, name):
                try:  # `from package import submodule`
                    importlib.import_module(f"{module}.{name}")
                except ModuleNotFoundError:
                    missing.append(f"{script.relative_to(BENCHMARKS)}: from {module} import {name}")
    assert not missing, missing
