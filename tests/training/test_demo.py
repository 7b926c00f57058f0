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

LANGUAGES = ("de", "fr")
DIRECTIONS = tuple(("en", lang) for lang in LANGUAGES)


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


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One tiny demo run from a tiny checkpoint: (settings, the returned summary, the checkpoint's record)."""
    root = tmp_path_factory.mktemp("demo")
    (root / "corpus" / "mt").mkdir(parents=True)
    corpus = write_tiny_corpus(root / "corpus")
    checkpoint, record = make_tiny_checkpoint(root, corpus)
    settings = demo.DemoSettings(
        output_dir=root / "out", corpus_dir=corpus, languages=LANGUAGES, checkpoint=checkpoint, max_steps=3,
        batch_size=4, warmup_steps=0, learning_rate=0.01, max_length=8, bootstrap_resamples=20,
        cache_dir=root / "cache", progress=False,
    )
    return settings, demo.run_demo(settings), record


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


def test_both_systems_trained_on_the_same_data_budget_and_seed(demo_run):
    settings, _, _ = demo_run
    group = json.loads((settings.output_dir / "run_config.json").read_text())
    shared = json.loads((settings.output_dir / demo.BASELINE_DIR / "run_config.json").read_text())
    differing = {key for key in group.keys() | shared.keys() if group.get(key) != shared.get(key)}
    assert differing == {"output_dir", *demo.SYSTEM_FLAGS["group"], *demo.SYSTEM_FLAGS["shared"]}
    assert shared["shared_baseline"] and shared["target_lang_token"] and group["target_lang_token"]
    assert group["model_name_or_path"] == shared["model_name_or_path"] == str(settings.checkpoint)
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


def test_corpus_is_complete_only_with_every_counted_file(tmp_path):
    corpus = write_tiny_corpus(tmp_path)
    assert demo.corpus_is_complete(corpus, LANGUAGES)
    assert not demo.corpus_is_complete(corpus, ("de", "es"))  # no es pairs in this corpus
    truncated = corpus / "mt" / "test_en_fr_web.jsonl"
    truncated.write_text(truncated.read_text().splitlines(keepends=True)[0])
    assert not demo.corpus_is_complete(corpus, LANGUAGES)
    (corpus / "stats.json").unlink()
    assert not demo.corpus_is_complete(corpus, ("de",))


def test_settings_reject_unknown_languages(tmp_path):
    with pytest.raises(ValueError, match="unknown languages"):
        demo.DemoSettings(output_dir=tmp_path, languages=("de", "tlh"))


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
])
def test_demo_command_line_refuses_bad_flags_before_any_work(argv, message, capsys):
    # --max_steps 0 failed with a traceback, --bootstrap_resamples -1 after the corpus and model had loaded, and
    # --make_checkpoint ignored the demo's flags and trained on data/offline_corpus/ of the current folder anyway
    from headsel_recipes.cli import demo as demo_cli

    with pytest.raises(SystemExit):
        demo_cli.parse_args(argv)
    assert message in capsys.readouterr().err
