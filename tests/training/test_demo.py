# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`make demo`'s code path (`headsel_recipes.demo`) on a tiny corpus in the offline corpus layout, with a tiny model."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import sacrebleu
import torch
import yaml
from recipe_testkit import TINY_TEXT, text_rows, write_jsonl
from transformers import MarianTokenizer

from hf_headsel import HeadSelMarianMTModel
from hf_headsel.analysis import SELECTION_LOG_NAME
from headsel_recipes import demo
from headsel_recipes.cli import demo as demo_cli

LANGUAGES = ("de", "fr")
DIRECTIONS = tuple(("en", lang) for lang in LANGUAGES)
# The tiny systems score BLEU 0 everywhere: `demo_run` raises the baseline's by this much on their way to the report, so
# that the two systems' columns differ.
SHARED_SHIFT = 7.0


def write_tiny_corpus(folder: Path) -> Path:
    """`mt/{split}_en_{lang}_{domain}.jsonl` and the `stats.json` counts, as `training/build_corpus.py` writes them."""
    counts: dict[str, dict[str, Counter]] = {}
    for split, size, seed in (("train", 64, 1), ("test", 12, 3)):
        rows = text_rows(size, seed=seed, directions=DIRECTIONS)
        for index, row in enumerate(rows):  # text_rows alternates directions and domains in step: mix them
            row["domain"] = ("news", "web")[index // 2 % 2]
        for lang in LANGUAGES:
            for domain in ("news", "web"):
                cell = [row for row in rows if row["target_lang"] == lang and row["domain"] == domain]
                write_jsonl(folder / "mt" / f"{split}_en_{lang}_{domain}.jsonl", cell)
                counts.setdefault(split, {}).setdefault(lang, Counter())[domain] = len(cell)
    (folder / "stats.json").write_text(json.dumps({"text": counts}))
    return folder


def make_tiny_checkpoint(root: Path, corpus: Path) -> tuple[Path, dict]:
    """`make demo-checkpoint`'s code path with the shipped recipe file, on the tiny corpus with a tiny model."""
    files = {split: [str(p) for lang in LANGUAGES for p in demo.corpus_files(corpus, split, lang)]
             for split in ("train", "test")}
    record = demo.make_checkpoint(
        destination=root / "checkpoint", output_dir=str(root / "checkpoint_run"), train_file=files["train"],
        test_file=files["test"], config_overrides=TINY_TEXT, vocab_size=60, max_steps=3,
        per_device_train_batch_size=4, warmup_steps=0, save_strategy="no", cache_dir=str(root / "cache"),
        disable_tqdm=True, log_level="warning")
    return root / "checkpoint", record


def shift_the_baselines_bleu(train_and_score):
    def shifted(settings, system):
        result = train_and_score(settings, system)
        if system == "shared":
            result.metrics["predict"] = {key: value + SHARED_SHIFT if key.startswith("predict_bleu") else value
                                         for key, value in result.metrics["predict"].items()}
        return result

    return shifted


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One tiny demo run from a tiny checkpoint: (settings, the returned summary, the checkpoint's record). The shared
    baseline's BLEU scores reach the report `SHARED_SHIFT` higher than its run wrote them."""
    root = tmp_path_factory.mktemp("demo")
    (root / "corpus" / "mt").mkdir(parents=True)
    corpus = write_tiny_corpus(root / "corpus")
    checkpoint, record = make_tiny_checkpoint(root, corpus)
    settings = demo.DemoSettings(
        output_dir=root / "out", corpus_dir=corpus, languages=LANGUAGES, checkpoint=checkpoint, max_steps=3,
        batch_size=4, warmup_steps=0, learning_rate=0.01, max_length=8, bootstrap_resamples=20,
        cache_dir=root / "cache", progress=False,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo, "train_and_score", shift_the_baselines_bleu(demo.train_and_score))
        summary = demo.run_demo(settings)
    return settings, summary, record


def test_a_demo_run_in_a_used_folder_starts_it_over(demo_run, tmp_path):
    # the earlier run's selection snapshots stayed in the log, read as a run resumed at step 0
    settings, _, _ = demo_run
    used = Path(shutil.copytree(settings.output_dir, tmp_path / "out"))
    snapshots = (used / SELECTION_LOG_NAME).read_text().splitlines()
    demo.run_demo(dataclasses.replace(settings, output_dir=used))
    assert (used / SELECTION_LOG_NAME).read_text().splitlines() == snapshots  # the same run again, not appended


def test_an_interrupted_demo_run_leaves_no_earlier_scores(demo_run, tmp_path, monkeypatch):
    # metrics.json and the card are written last: an interrupted rerun left the earlier run's beside its new model
    settings, _, _ = demo_run
    used = Path(shutil.copytree(settings.output_dir, tmp_path / "out"))
    baseline = used / demo.BASELINE_DIR
    earlier = [used / demo.SUMMARY_FILE, used / demo.CARD_FILE, used / "predict_results.json",
               baseline / "predict_results.json", baseline / "generated_predictions.jsonl"]
    assert all(path.is_file() for path in earlier)

    def interrupted(settings, system):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "train_and_score", interrupted)
    with pytest.raises(KeyboardInterrupt):
        demo.run_demo(dataclasses.replace(settings, output_dir=used))
    assert [path for path in earlier if path.exists()] == []


def test_checkpoint_is_a_shared_marian_model_with_its_recipe_and_scores(demo_run):
    settings, _, record = demo_run
    assert json.loads((settings.checkpoint / "config.json").read_text())["model_type"] == "marian"
    assert MarianTokenizer.from_pretrained(settings.checkpoint).convert_tokens_to_ids(">>de<<") != (
        MarianTokenizer.from_pretrained(settings.checkpoint).unk_token_id)
    written = json.loads((settings.checkpoint / demo.CHECKPOINT_RECORD).read_text())
    assert written == record
    shipped = json.loads(demo.CHECKPOINT_RECIPE.read_text())
    assert record["recipe"]["shared_baseline"] and record["recipe"]["target_lang_token"]
    assert set(record["recipe"]) - set(shipped) == {"cache_dir"}  # every other flag is the shipped file's
    overridden = {"output_dir", "train_file", "test_file", "config_overrides", "vocab_size", "max_steps",
                  "per_device_train_batch_size", "warmup_steps", "save_strategy", "disable_tqdm", "log_level"}
    assert {key: value for key, value in record["recipe"].items() if key in shipped and key not in overridden} == {
        key: value for key, value in shipped.items() if key not in overridden}  # the record holds the recipe as written
    assert record["steps"] == 3 and {"chrf", "chrf_pooled", "degenerate"} <= set(record["test_quality"])
    rows = demo.read_predictions(settings.checkpoint / "test_scores" / "generated_predictions.jsonl")
    assert len(rows) == 12 and record["predict"]["predict_samples"] == 12


def test_checkpoint_record_counts_the_steps_the_model_was_trained(demo_run, tmp_path):
    # a checkpoint-* folder shipped from a longer recipe: its own trainer_state.json says how far it was trained
    settings, _, record = demo_run
    shipped = demo.ship_checkpoint(settings.checkpoint.parent / "checkpoint_run", {**record["recipe"], "max_steps": 99},
                                   tmp_path / "shipped")
    assert shipped["steps"] == 3


def test_demo_refuses_a_missing_or_non_stock_checkpoint(demo_run, tmp_path):
    settings, _, _ = demo_run
    with pytest.raises(FileNotFoundError, match="demo-checkpoint"):
        demo.run_demo(demo.DemoSettings(output_dir=tmp_path, corpus_dir=settings.corpus_dir, checkpoint=tmp_path))
    with pytest.raises(ValueError, match="stock Marian"):
        demo.run_demo(demo.DemoSettings(output_dir=tmp_path, corpus_dir=settings.corpus_dir,
                                        checkpoint=settings.output_dir))


def test_metrics_json_holds_both_systems_per_task_and_averaged_with_intervals(demo_run):
    settings, summary, _ = demo_run
    written = json.loads((settings.output_dir / "metrics.json").read_text())
    assert written["metric"] == "bleu"
    assert written["test_sentences"] == {"en-de": 6, "en-fr": 6}
    for system in ("group", "shared"):
        scores = written[system]
        assert set(scores["per_task"]) == {"en-de", "en-fr"}
        for score in [*scores["per_task"].values(), scores["average"], scores["pooled"]]:
            assert set(score) == {"bleu", "ci_low", "ci_high"}
            assert score["ci_low"] <= score["bleu"] <= score["ci_high"]
        mean = sum(s["bleu"] for s in scores["per_task"].values()) / 2
        assert scores["average"]["bleu"] == pytest.approx(mean, abs=0.01)
    assert written["group"] == summary["group"]
    for system, shift in (("group", 0.0), ("shared", SHARED_SHIFT)):  # each system's scores are its own run's
        scored = json.loads((demo.system_dir(settings, system) / "predict_results.json").read_text())
        assert written[system]["average"]["bleu"] == pytest.approx(scored["predict_bleu"] + shift)
        assert written[system]["pooled"]["bleu"] == pytest.approx(scored["predict_bleu_pooled"] + shift)


def test_scores_read_the_mean_over_directions_and_the_pooled_score_apart():
    predict = {"predict_bleu_en-de": 10.0, "predict_bleu_en-fr": 30.0, "predict_bleu": 20.0,
               "predict_bleu_pooled": 25.0, "predict_bleu_ci_low": 18.0, "predict_bleu_ci_high": 22.0,
               "predict_samples": 12}
    scores = demo.scores_of(predict)
    assert scores["average"] == {"bleu": 20.0, "ci_low": 18.0, "ci_high": 22.0}
    assert scores["pooled"] == {"bleu": 25.0, "ci_low": None, "ci_high": None}
    assert {task: score["bleu"] for task, score in scores["per_task"].items()} == {"en-de": 10.0, "en-fr": 30.0}


def test_both_systems_trained_on_the_same_data_budget_and_seed(demo_run):
    settings, _, _ = demo_run
    group = json.loads((settings.output_dir / "run_config.json").read_text())
    shared = json.loads((settings.output_dir / demo.BASELINE_DIR / "run_config.json").read_text())
    differing = {key for key in group.keys() | shared.keys() if group.get(key) != shared.get(key)}
    assert differing == {"output_dir", *demo.SYSTEM_FLAGS["group"], *demo.SYSTEM_FLAGS["shared"]}
    assert shared["shared_baseline"] and shared["target_lang_token"] and group["target_lang_token"]
    assert group["model_name_or_path"] == shared["model_name_or_path"] == str(settings.checkpoint)
    mt = settings.corpus_dir / "mt"  # trained on the train split, scored on the test split
    assert sorted(group["train_file"]) == sorted(str(path) for path in mt.glob("train_en_*.jsonl"))
    assert sorted(group["test_file"]) == sorted(str(path) for path in mt.glob("test_en_*.jsonl"))
    baseline_config = json.loads((settings.output_dir / demo.BASELINE_DIR / "config.json").read_text())
    assert baseline_config["model_type"] == "marian"


def test_model_card_has_metadata_and_embeds_the_heatmap(demo_run):
    settings, _, _ = demo_run
    card = (settings.output_dir / "README.md").read_text()
    assert card.startswith("---\n")
    metadata = yaml.safe_load(card.split("---\n")[1])
    assert {"de", "fr"} <= set(metadata["language"])
    results = metadata["model-index"][0]["results"]
    assert {r["dataset"].get("config") for r in results} >= {"en-de", "en-fr"}
    embedded = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", card)
    assert embedded == ["head_sharing_decoder_self.png"]
    assert (settings.output_dir / embedded[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_heatmap_is_of_the_first_component_with_several_tasks(tmp_path):
    (tmp_path / "analysis.json").write_text(json.dumps({"components": {
        "encoder_self": {"tasks": ["en"]}, "decoder_self": {"tasks": ["de", "fr"]},
        "decoder_cross": {"tasks": ["de", "fr"]}}}))
    assert demo.sharing_heatmap(tmp_path) == tmp_path / "head_sharing_decoder_self.png"
    (tmp_path / "analysis.json").write_text(json.dumps({"components": {"decoder_self": {"tasks": ["de"]}}}))
    with pytest.raises(RuntimeError, match="no component with several tasks"):
        demo.sharing_heatmap(tmp_path)


def test_saved_model_reloads_with_task_and_translates_as_reported(demo_run):
    settings, summary, _ = demo_run
    tokenizer = MarianTokenizer.from_pretrained(settings.output_dir)
    model = HeadSelMarianMTModel.from_pretrained(settings.output_dir, task="fr").eval()
    assert model.config.decoder_tasks == ["de", "fr"]
    sources = summary["reloaded_translations"]["sources"]
    batch = tokenizer([f">>fr<< {source}" for source in sources], return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = model.generate(**batch, num_beams=1, max_length=settings.max_length)
    assert tokenizer.batch_decode(generated, skip_special_tokens=True) == summary["reloaded_translations"]["fr"]


def test_reload_check_refuses_a_model_that_translates_otherwise(demo_run):
    settings, _, _ = demo_run
    other = HeadSelMarianMTModel.from_pretrained(settings.output_dir)
    noise = torch.randn(other.final_logits_bias.shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # the saved model with another output bias: another translation of every sentence
        other.final_logits_bias.copy_(noise * 100)
    with pytest.raises(RuntimeError, match="translates .* as .*, the trained model as"):
        demo.check_reload(settings, other)


def test_prediction_quality_of_both_systems_matches_their_predictions(demo_run):
    settings, summary, _ = demo_run
    for system in demo.SYSTEMS:
        rows = demo.read_predictions(demo.system_dir(settings, system) / "generated_predictions.jsonl")
        quality = summary["prediction_quality"][system]
        pooled = sacrebleu.corpus_chrf([r["prediction"] for r in rows], [[r["reference"] for r in rows]]).score
        assert quality["chrf_pooled"] == pytest.approx(pooled, abs=0.01)
        assert 0.0 <= quality["degenerate"] <= 1.0
    assert demo.quality_table(summary).splitlines()[1].split()[0] == "group"


def test_results_table_lists_every_direction_and_the_average(demo_run):
    _, summary, _ = demo_run
    lines = demo.results_table(summary).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["en-de", "en-fr", "average"]
    assert lines[-1].split()[1] == "12"
    assert lines[0].split()[-3:] == ["group", "-", "shared"]
    group, shared = summary["group"], summary["shared"]  # the shared baseline's BLEU is SHARED_SHIFT higher
    pairs = [*((group["per_task"][task], shared["per_task"][task]) for task in group["per_task"]),
             (group["average"], shared["average"])]
    differences = [f"{ours['bleu'] - theirs['bleu']:+.1f}" for ours, theirs in pairs]  # group - shared
    assert [line.split()[-1] for line in lines[1:]] == differences


def test_results_table_of_scores_without_intervals():
    # --bootstrap_resamples 0 (allowed: "0: no intervals") gives scores without interval bounds
    score = {"bleu": 12.34, "ci_low": None, "ci_high": None}
    summary = {"metric": "bleu", "test_sentences": {"en-de": 5},
               "group": {"per_task": {"en-de": score}, "average": score},
               "shared": {"per_task": {"en-de": score}, "average": score}}
    assert [line.split() for line in demo.results_table(summary).splitlines()[1:]] == [
        ["en-de", "5", "12.3", "12.3", "+0.0"], ["average", "5", "12.3", "12.3", "+0.0"]]


def test_corpus_is_complete_only_with_every_counted_file(tmp_path):
    corpus = write_tiny_corpus(tmp_path)
    assert demo.corpus_is_complete(corpus, LANGUAGES)
    assert not demo.corpus_is_complete(corpus, ("de", "es"))  # no es pairs in this corpus
    grown = corpus / "mt" / "train_en_de_news.jsonl"
    counted = grown.read_text()
    grown.write_text(counted + counted.splitlines(keepends=True)[0])  # more lines than stats.json counts
    assert not demo.corpus_is_complete(corpus, LANGUAGES)
    grown.write_text(counted)
    truncated = corpus / "mt" / "test_en_fr_web.jsonl"
    truncated.write_text(truncated.read_text().splitlines(keepends=True)[0])
    assert not demo.corpus_is_complete(corpus, LANGUAGES)
    (corpus / "stats.json").unlink()
    assert not demo.corpus_is_complete(corpus, ("de",))


def test_settings_reject_unknown_languages(tmp_path):
    with pytest.raises(ValueError, match="unknown languages"):
        demo.DemoSettings(output_dir=tmp_path, languages=("de", "tlh"))
    with pytest.raises(ValueError, match="languages is empty"):
        demo.DemoSettings(output_dir=tmp_path, languages=())


def test_settings_default_and_least_steps(tmp_path):
    assert demo.DemoSettings(output_dir=tmp_path).max_steps == (1500 if torch.cuda.is_available() else 150)
    assert demo.DemoSettings(output_dir=tmp_path, max_steps=1).max_steps == 1
    for steps in (0, -1):
        with pytest.raises(ValueError, match="max_steps and batch_size must be >= 1"):
            demo.DemoSettings(output_dir=tmp_path, max_steps=steps)


def test_settings_name_each_language_once(tmp_path):
    """A language named twice would read its training files twice and print its row twice."""
    assert demo.DemoSettings(output_dir=tmp_path, languages=("fr", "de", "fr")).languages == ("fr", "de")


def test_shipped_checkpoint_is_the_one_its_recipe_makes():
    record = json.loads((demo.CHECKPOINT_DIR / demo.CHECKPOINT_RECORD).read_text())
    recipe = json.loads(demo.CHECKPOINT_RECIPE.read_text())
    assert record["recipe"] == recipe and record["steps"] == recipe["max_steps"]
    config = json.loads((demo.CHECKPOINT_DIR / "config.json").read_text())
    assert config["model_type"] == "marian"
    tokenizer = MarianTokenizer.from_pretrained(demo.CHECKPOINT_DIR)
    assert all(tokenizer.convert_tokens_to_ids(f">>{lang}<<") != tokenizer.unk_token_id for lang in demo.LANGUAGES)
    assert record["test_quality"]["degenerate"] < 0.05


@pytest.mark.parametrize("argv, message", [
    (["--max_steps", "0"], "--max_steps must be >= 1, got 0"),
    (["--bootstrap_resamples", "-1"], "--bootstrap_resamples must be >= 0"),
    (["--make_checkpoint", "--max_steps", "5", "--corpus_dir", "x"], "--max_steps and --corpus_dir set the demo's"),
    (["--make_checkpoint", "--seed", "3"], "--seed set the demo's run"),
    (["--ship_checkpoint", "run", "--output_dir", "o", "--bootstrap_resamples", "9"],
     "--output_dir and --bootstrap_resamples set the demo's run"),
    (["--make_checkpoint", "--ship_checkpoint", "run"], "not allowed with argument --make_checkpoint"),
])
def test_demo_command_line_refuses_bad_flags_before_any_work(argv, message, capsys):
    # --max_steps 0 failed with a traceback, --bootstrap_resamples -1 after the corpus and model had loaded, and
    # --make_checkpoint ignored the demo's flags and trained on data/offline_corpus/ of the current folder anyway, and
    # with --ship_checkpoint beside it the ship was ignored
    with pytest.raises(SystemExit):
        demo_cli.parse_args(argv)
    assert message in capsys.readouterr().err


def test_demo_command_line_flags_reach_the_settings():
    _, settings = demo_cli.parse_args(["--max_steps", "1", "--seed", "7", "--bootstrap_resamples", "0",
                                       "--no_progress"])  # 1 step and 0 resamples: the least each allows
    assert (settings.max_steps, settings.seed, settings.bootstrap_resamples) == (1, 7, 0)
    assert settings.progress is False and demo_cli.parse_args([])[1].progress is True


def test_make_checkpoint_writes_into_the_checkpoint_flag(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(demo, "ensure_corpus", lambda settings: None)
    monkeypatch.setattr(demo, "make_checkpoint", lambda **kwargs: calls.append(kwargs) or {"steps": 0})
    assert demo_cli.main(["--make_checkpoint", "--checkpoint", str(tmp_path / "mine")]) == {"steps": 0}
    assert calls == [{"destination": tmp_path / "mine"}]  # not over the shipped checkpoint
