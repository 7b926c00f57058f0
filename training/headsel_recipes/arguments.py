# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Command-line arguments of the recipes: what a run trains, on which data, with which head-selection settings.

Every recipe parses four dataclasses with `HfArgumentParser`: [`ModelArguments`], [`HeadSelectionArguments`],
[`DataArguments`] and `Seq2SeqTrainingArguments`. They come from flags, or from one JSON or YAML file whose keys are
the flag names. [`RECIPE_TRAINING_DEFAULTS`] replaces a few `Seq2SeqTrainingArguments` defaults with the ones a
translation/recognition recipe needs (generation-based evaluation, label smoothing 0.1 as in the paper's setup).
"""

from __future__ import annotations

import json
import sys
import threading
import typing
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path

from hf_headsel.configuration_head_selection import head_selection_keywords
from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from .audio import SpecAugment


@dataclass(frozen=True)
class RecipeTask:
    """What one entry script trains: the modality, the target text, the metric.

    Args:
        name: `"asr"`, `"st"` or `"mt"`.
        speech: whether the input is audio (Speech2Text) rather than text (Marian).
        target_field: which column flag holds the target text: `"text"`, `"translation"` or `"target"`.
        metric: `"wer"` or `"bleu"`.
        same_language: the target is in the source language (ASR): the decoder task is the source language.
    """

    name: str
    speech: bool
    target_field: str
    metric: str
    same_language: bool = False


@dataclass
class ModelArguments:
    """The model, the tokenizer and the feature extractor."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "A head-selection checkpoint (folder or Hub id) to continue from. Leave out to train from "
                          "scratch; a stock Marian / Speech2Text checkpoint is upcycled (its heads tiled H'/H times)."},
    )
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Comma-separated `key=value` overrides of the model config, e.g. "
                          "'d_model=64,encoder_layers=2'. Values are parsed as JSON when they can be. From scratch, "
                          "init_std defaults to d_model ** -0.5 (fairseq's initialisation), not 0.02. A stock "
                          "checkpoint (shared baseline or upcycled) loads with them. Head-selection settings with "
                          "flags of their own are refused here."},
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "A tokenizer folder. Default: the checkpoint's, else one trained on the data."}
    )
    feature_extractor_name: str | None = field(
        default=None,
        metadata={"help": "A feature extractor folder (speech). Default: the checkpoint's, else 80 mel bins."},
    )
    vocab_size: int = field(default=8000, metadata={"help": "Size of the sentencepiece model trained on the data."})
    tokenizer_model_type: str = field(
        default="unigram", metadata={"help": "sentencepiece model type: unigram, bpe, char or word."}
    )
    tokenizer_max_sentences: int = field(
        default=1_000_000, metadata={"help": "At most this many training sentences (a seeded sample) train the "
                                               "sentencepiece model."}
    )
    shared_baseline: bool = field(
        default=False,
        metadata={"help": "Train the stock model (Speech2Text / Marian, every head shared by every task) through the "
                          "same recipe: the baseline of the paper. Head-selection flags are ignored."},
    )
    init_encoder_from: str | None = field(
        default=None,
        metadata={"help": "A checkpoint (e.g. an ASR model) whose encoder initialises this model's encoder; encoder "
                          "selector rows are copied by task name."},
    )
    train_only_adapters: bool = field(
        default=False,
        metadata={"help": "Freeze everything but the task adapters (the paper's adapter baseline, on top of a "
                          "trained model given by --model_name_or_path)."},
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Cache folder of `datasets` and Transformers."})


# What a recipe flag adds to its config keyword's help: where an unset flag's value comes from.
UNSET_FLAG_HELP = {
    "tasks": " Unset: from the training data, sorted.",
    "structure": " Unset: a head-selection checkpoint's own value, else the package default.",
    "runtime": " Unset: the checkpoint's value, else the package default.",
}


def config_keyword_flags() -> type:
    """A dataclass with one flag per head-selection config keyword that a run may set (`tasks`, `structure` and
    `runtime` roles): named, typed and documented by the keyword's own field in
    `hf_headsel.configuration_head_selection`, so the keywords are written once. Every flag defaults to `None`
    (unset); `float | int` keywords become `float` flags (`HfArgumentParser` takes one type per flag)."""
    flags = []
    for keyword in head_selection_keywords(*UNSET_FLAG_HELP):
        types = [t for t in typing.get_args(keyword.type) if t is not type(None)] or [keyword.type]
        if float in types:
            types = [float]
        if len(types) != 1:
            raise TypeError(f"config keyword {keyword.name} has the types {types}: a recipe flag takes one")
        flag_type = types[0] | None
        metadata = {"help": keyword.help + UNSET_FLAG_HELP[keyword.role]}
        if keyword.choices is not None:
            metadata["choices"] = list(keyword.choices)  # argparse refuses other values (of every item, for a list)
        flags.append((keyword.name, flag_type, field(default=None, metadata=metadata)))
    return make_dataclass("HeadSelectionConfigFlags", flags)


@dataclass
class HeadSelectionArguments(config_keyword_flags()):
    """Head-selection settings: one flag per config keyword (`None` keeps the checkpoint's value, or the package
    default when training from scratch), then the recipe's own: the temperature and noise schedules and the optimizer
    group of the selection logits."""

    temperature_schedule: str = field(
        default="constant", metadata={"help": "constant, linear or exponential annealing of tau over training."}
    )
    final_temperature: float | None = field(
        default=None, metadata={"help": "tau at the last step (needed by the linear and exponential schedules)."}
    )
    noise_schedule: str = field(
        default="constant", metadata={"help": "constant, linear or exponential annealing of the noise scale "
                                              "(--head_selection_noise_scale, default 1) over training."}
    )
    final_noise_scale: float | None = field(
        default=None, metadata={"help": "Noise scale at the last step (needed by the linear and exponential "
                                        "schedules; 0 with linear: explore first, train the kept heads last)."}
    )
    head_selection_learning_rate: float | None = field(
        default=None,
        metadata={"help": "Peak learning rate of the selection logits phi, in an optimizer group of their own that "
                          "follows the same schedule (default: --learning_rate; 0 freezes the logits at their initial values: "
                          "the frozen-selection control)."},
    )
    head_selection_weight_decay: float = field(
        default=0.0,
        metadata={"help": "Weight decay of the selection logits (default 0: decay would pull every phi towards 0, "
                          "a selection probability of 0.5)."},
    )


@dataclass
class DataArguments:
    """Where the data comes from, which columns hold what, and how examples are filtered and sampled."""

    train_file: list[str] | None = field(
        default=None,
        metadata={"help": "Training files: JSONL/JSON, CSV, TSV or fairseq manifests (comma lists and globs "
                          "allowed; bare split names are looked up in --manifest_dir)."},
    )
    validation_file: list[str] | None = field(default=None, metadata={"help": "Validation files (as --train_file)."})
    test_file: list[str] | None = field(default=None, metadata={"help": "Test files (as --train_file)."})
    dataset_name: str | None = field(
        default=None, metadata={"help": "Anything `datasets.load_dataset` reads: a folder or a dataset name."}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "The configuration of --dataset_name."})
    train_split_name: str = field(default="train", metadata={"help": "Training split of --dataset_name."})
    validation_split_name: str = field(default="validation", metadata={"help": "Validation split of --dataset_name."})
    test_split_name: str = field(default="test", metadata={"help": "Test split of --dataset_name."})
    data_format: str = field(
        default="auto",
        metadata={"help": "auto (from the extension; a TSV with the fairseq manifest header is a manifest), json, "
                          "csv, tsv or fairseq."},
    )
    manifest_dir: str | None = field(
        default=None, metadata={"help": "Folder of fairseq manifests: --train_file may then list split names."}
    )
    audio_root: str | None = field(
        default=None, metadata={"help": "Folder relative audio paths start from (default: the data file's folder)."}
    )
    id_column: str = field(default="id", metadata={"help": "Example id column (optional)."})
    audio_column: str = field(default="audio", metadata={"help": "Audio column: a path or a datasets Audio feature."})
    text_column: str = field(default="text", metadata={"help": "Transcript column (the ASR target)."})
    translation_column: str = field(default="translation", metadata={"help": "Translation column (the ST target)."})
    source_column: str = field(default="source", metadata={"help": "MT source column; `col.key` reads a dict."})
    target_column: str = field(default="target", metadata={"help": "MT target column; `col.key` reads a dict."})
    source_lang_column: str = field(default="source_lang", metadata={"help": "Source language column."})
    target_lang_column: str = field(default="target_lang", metadata={"help": "Target language column."})
    domain_column: str = field(default="domain", metadata={"help": "Domain column."})
    source_lang: str | None = field(default=None, metadata={"help": "Source language of rows that give none."})
    target_lang: str | None = field(default=None, metadata={"help": "Target language of rows that give none."})
    domain: str | None = field(default=None, metadata={"help": "Domain of rows that give none."})
    max_duration_in_seconds: float = field(
        default=60.0, metadata={"help": "Longer training audio is skipped (counted); evaluation splits keep it."})
    min_duration_in_seconds: float = field(
        default=0.0, metadata={"help": "Shorter training audio is skipped (counted); evaluation splits keep it."})
    max_source_length: int = field(
        default=1024, metadata={"help": "Longer MT sources (tokens) are skipped in training, cut in evaluation."})
    max_target_length: int = field(
        default=1024, metadata={"help": "Longer targets (tokens) are skipped in training, cut in evaluation."})
    sampling_alpha: float = field(
        default=1.0,
        metadata={"help": "Temperature-based resampling of training tasks: p(task) ∝ n_task^alpha (1.0: the data "
                          "as is; 0.0: tasks uniform)."},
    )
    spec_augment: bool = field(default=True, metadata={"help": "SpecAugment the training features (speech)."})
    # the defaults are SpecAugment's own policy (fairseq's LD), written once, in audio.py
    freq_mask_num: int = field(default=SpecAugment.freq_mask_num,
                               metadata={"help": "SpecAugment: frequency masks per example."})
    freq_mask_width: int = field(default=SpecAugment.freq_mask_width,
                                 metadata={"help": "SpecAugment: maximum width of a frequency mask."})
    time_mask_num: int = field(default=SpecAugment.time_mask_num,
                               metadata={"help": "SpecAugment: time masks per example."})
    time_mask_width: int = field(default=SpecAugment.time_mask_width,
                                 metadata={"help": "SpecAugment: maximum width of a time mask."})
    time_mask_ratio: float = field(
        default=SpecAugment.time_mask_ratio,
        metadata={"help": "SpecAugment: a time mask covers at most this fraction of the frames."},
    )
    target_lang_token: bool = field(
        default=False,
        metadata={"help": "MT: prepend `>>tgt<<` to every source (Marian's convention), so a shared model knows the "
                          "target language."},
    )
    task_tag: bool = field(
        default=False,
        metadata={"help": "Speech: prepend the tag of the example's decoder task (`<lang:xx>` with --task_type lang, "
                          "`<domain:xx>` with domain) to every target and force it as the first decoded token "
                          "(fairseq's --prepend-tgt-lang-tag with --prefix-size 1), so a shared model is told what "
                          "head selection routes by. MT has --target_lang_token."},
    )
    encoder_task_tag: bool = field(
        default=False,
        metadata={"help": "MT: prepend the tag of the example's encoder task (`<lang:xx>`, the source language, with "
                          "--task_type lang; `<domain:xx>` with domain) to every source, so a shared model is told "
                          "what head selection routes the encoder by (many-to-one MT)."},
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for preprocessing."})
    overwrite_cache: bool = field(default=False, metadata={"help": "Recompute cached preprocessing."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N validation examples."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep the first N test examples."})
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Start over in an --output_dir that holds an earlier run's checkpoint-* folders or "
                          "tokenizer: remove its checkpoints, selection log and scores, and train a new tokenizer "
                          "(without it, a training run refuses such a folder unless it resumes it)."},
    )
    average_last_n: int = field(
        default=0, metadata={"help": "Average the last N saved checkpoints into the final model (0: no averaging)."}
    )
    bleu_tokenize: str = field(default="13a", metadata={"help": "sacrebleu tokenizer (13a, intl, zh, char, ...)."})
    bootstrap_resamples: int = field(
        default=1000,
        metadata={"help": "Bootstrap resamples of the 95-percent confidence intervals written next to every score "
                          "(`*_ci_low` / `*_ci_high`; 0: none)."},
    )
    early_stopping_patience: int | None = field(
        default=None,
        metadata={"help": "Stop when the validation score (--metric_for_best_model, default the task's WER or BLEU "
                          "average) has not improved for this many evaluations (the paper: 10 epochs)."},
    )


ALL_ARGUMENT_CLASSES = (ModelArguments, HeadSelectionArguments, DataArguments, Seq2SeqTrainingArguments)

# Seq2SeqTrainingArguments defaults a recipe changes (a flag or a config file key still wins).
RECIPE_TRAINING_DEFAULTS = {
    "predict_with_generate": True,
    "generation_num_beams": 5,
    "generation_max_length": 200,
    "label_smoothing_factor": 0.1,
    "remove_unused_columns": False,
    "ddp_find_unused_parameters": False,
    "report_to": "none",
}

STRATEGY_KEYS = ("eval_strategy", "save_strategy", "logging_strategy")
LIST_FIELDS = (
    "encoder_tasks", "decoder_tasks", "head_selection_components", "train_file", "validation_file", "test_file",
)


def split_commas(values: list[str] | str | None) -> list[str] | None:
    """`["a,b", "c"]` or `"a,b,c"` -> `["a", "b", "c"]` (empty items dropped); `None` stays `None`."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    return [item.strip() for value in values for item in str(value).split(",") if item.strip()]


# Experiment lanes may parse in threads of one process: a parser built while another is being built read a field
# type the other had half rewritten (AttributeError: type object 'int' has no attribute '__args__').
_PARSER_LOCK = threading.Lock()


def parse_arguments(
    args: list[str] | None = None,
) -> tuple[ModelArguments, HeadSelectionArguments, DataArguments, Seq2SeqTrainingArguments]:
    """Parse flags, or one `.json` / `.yaml` file, into the four argument dataclasses.

    `args` defaults to `sys.argv[1:]`. Comma-separated list values are split.
    """
    args = sys.argv[1:] if args is None else list(args)
    with _PARSER_LOCK:  # `HfArgumentParser` rewrites the dataclasses' field types while it reads them
        parser = HfArgumentParser(ALL_ARGUMENT_CLASSES)
    if len(args) == 1 and Path(args[0]).suffix in (".json", ".yaml", ".yml"):
        text = Path(args[0]).read_text()
        if args[0].endswith(".json"):
            values = json.loads(text)
        else:
            import yaml

            values = yaml.safe_load(text)
        for key in STRATEGY_KEYS:  # YAML 1.1 reads `save_strategy: no` as False
            if values.get(key) is False:
                values[key] = "no"
        parsed = parser.parse_dict({**RECIPE_TRAINING_DEFAULTS, **values})
    else:
        parser.set_defaults(**RECIPE_TRAINING_DEFAULTS)
        parsed = parser.parse_args_into_dataclasses(args=args)
    model_args, head_args, data_args, training_args = parsed
    for container in (head_args, data_args):
        for name in LIST_FIELDS:
            if hasattr(container, name):
                setattr(container, name, split_commas(getattr(container, name)))
    return model_args, head_args, data_args, training_args
