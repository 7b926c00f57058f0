# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Model cards of head-selection models (and of the stock models exported from them).

* [`collect_metrics`] / [`eval_results`] / [`results_table`] (from `card_metrics.py`): WER / CER / BLEU / chrF scores,
  from Trainer metrics or nested dicts, as model-index entries and as the card's results table.
* [`render_model_card`] / [`write_model_card`]: `README.md` (metadata with a model-index of per-task scores,
  languages, datasets, tags, base model, license; the tasks, how to load a trained direction, the head-sharing
  tables and heatmap, the training configuration) from the template in `model_cards/`.

`hf_headsel.hub` re-exports these names; uploading is `hub.push_to_hub`.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData
from transformers import AutoModelForCausalLM

from .analysis import analyze_model
from .card_metrics import MetricRecord, collect_metrics, eval_results, results_table
from .configuration_head_selection import HEAD_SELECTION_CONFIG_KEYS, SIDES, UNKEYED_TASK, component_side
from .conversion import stock_model_class
from .families import HEADSEL_MODEL_TYPES, TEXT_GENERATION, Family, family_of
from .model_folder import PACKAGE_DIR, prepare_model_folder
from .modeling_head_selection import HeadSelectionModelMixin

logger = logging.getLogger(__name__)

TEMPLATE_NAME = "headsel_model_card_template.md"
HEATMAP_NAME = "head_sharing.png"
# An ISO 639 code, then optional BCP 47 subtags (script, region, ...); `_` is accepted for `-` (`pt_BR`).
_LANGUAGE_TAG = re.compile(r"^(?P<code>[A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{2,8})*$")
# Training arguments worth a line in the card (when a `TrainingArguments` object is given).
TRAINING_KEYS = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "weight_decay",
    "max_grad_norm",
    "label_smoothing_factor",
    "optim",
    "fp16",
    "bf16",
    "seed",
    "generation_num_beams",
    "generation_max_length",
)
STRATEGY_DESCRIPTIONS = {
    "group": "the candidates are split into groups of H'/H; each task picks the best-scoring candidate of every group "
    "(paper Eq. 6-7)",
    "subset": "each task picks its H best-scoring candidates, used in ascending candidate order (paper Eq. 5)",
    "task_specific": "task t owns candidates t*H .. t*H+H-1, nothing is learned (Blackwood et al., 2018, on heads)",
}
CROSS_KEY_DESCRIPTIONS = {
    "decoder": "the decoder task (target-specific)",
    "encoder": "the encoder task (source-specific)",
    "pair": "the (encoder, decoder) pair: the direction (no zero-shot)",
}


# --------------------------------------------------------------------------------------------------------------------
# Model card
# --------------------------------------------------------------------------------------------------------------------


def template_path() -> Path:
    """The card template: `model_cards/` of the source tree (a checkout, an editable install), else the copy a wheel
    installs as `hf_headsel/model_cards/` (setup.cfg's package data)."""
    candidates = [
        PACKAGE_DIR.parents[1] / "model_cards" / TEMPLATE_NAME,
        PACKAGE_DIR / "model_cards" / TEMPLATE_NAME,
    ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"model card template {TEMPLATE_NAME} not found in {[str(c) for c in candidates]}; "
                            "pass template=")


def head_sharing(model) -> list[dict]:
    """Per selecting component: the fraction of heads every two tasks share, averaged over layers (the card's
    tables; `hf_headsel.analysis` computes them)."""
    tables = []
    for component, result in analyze_model(model).items():
        rows = [{"task": task, "cells": [f"{v:.2f}" for v in result.sharing[i]]} for i, task in enumerate(result.tasks)]
        tables.append({"component": component, "tasks": result.tasks, "rows": rows})
    return tables


def _format_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value) if value else "-"
    return f"`{value}`" if isinstance(value, str) else str(value)


def config_rows(config, layer_sides: tuple[str, ...] = SIDES, read_sides: tuple[str, ...] = SIDES
                ) -> list[tuple[str, str]]:
    """The architecture and head-selection settings shown in the card: of the sides the model has layers on, and
    the task lists of the sides it reads (the decoder alone has no encoder, and may read the source task)."""
    keys = ["d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
            "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size"]
    if getattr(config, "model_type", None) in HEADSEL_MODEL_TYPES:
        keys += list(HEAD_SELECTION_CONFIG_KEYS)

    def shown(key: str) -> bool:
        side = next((side for side in SIDES if side in key), None)
        return side is None or side in (read_sides if key.endswith(("_task", "_tasks")) else layer_sides)

    return [(key, _format_value(getattr(config, key))) for key in keys
            if shown(key) and getattr(config, key, None) is not None]


def is_secret_key(key: str) -> bool:
    """Whether a training argument holds a credential: `token` and every `*_token` (`hub_token`), the keys
    `TrainingArguments.to_dict` masks. A card is public: they stay out of it."""
    return key == "token" or key.endswith("_token")


def training_rows(training_args) -> list[tuple[str, str]]:
    """Rows for the training configuration: the main fields of a `TrainingArguments`, or every scalar of a dict;
    credentials ([`is_secret_key`]) are left out."""
    if training_args is None:
        return []
    if hasattr(training_args, "to_dict"):
        values = training_args.to_dict()
        items = [(key, values[key]) for key in TRAINING_KEYS if values.get(key) not in (None, "")]
    else:
        items = [(k, v) for k, v in dict(training_args).items() if isinstance(v, (str, int, float, bool, list, tuple))]
    return [(key, _format_value(getattr(value, "value", value))) for key, value in items if not is_secret_key(key)]


def _languages(config, languages: str | list[str] | None, sides: tuple[str, ...] = SIDES) -> list[str] | None:
    """The card's languages: `languages` (a string is one language), else the task names of a `"lang"` model that
    are language tags (of the sides it reads)."""
    if languages is not None:
        return ([languages] if isinstance(languages, str) else list(languages)) or None
    if getattr(config, "task_type", None) != "lang":
        return None
    names = list(dict.fromkeys(t for side in sides for t in config.tasks(side) if t != UNKEYED_TASK))
    # task names are the user's: one that is no language tag is left out of the card (with a warning) rather than
    # failing the card a training run writes at its end
    unnamed = [name for name in names if not _LANGUAGE_TAG.match(name)]
    if unnamed:
        logger.warning("the card's languages leave out the task names %s: they are no ISO 639 code or BCP 47 tag "
                       "(pass languages=[...] to write_model_card to name them)", unnamed)
    return [name for name in names if name not in unnamed] or None


def language_metadata(languages: list[str] | None) -> dict[str, list[str] | None]:
    """The card's language fields: `language` takes ISO 639 codes only (the Hub refuses `zh-CN` there), so a tag
    with subtags (`zh-CN`, `pt_BR`) adds its base code to `language` and the whole tag, in BCP 47 spelling (`pt-BR`),
    to `language_bcp47`. A name that is no language tag is a `ValueError` (the Hub would refuse the card at upload)."""
    codes, tags = [], []
    for name in languages or []:
        match = _LANGUAGE_TAG.match(name)
        if match is None:
            raise ValueError(
                f"language {name!r} is not a language tag: the card's languages must be ISO 639 codes ('fr', 'zho') "
                "or BCP 47 tags ('pt-BR', 'zh-Hans-CN')")
        codes.append(match["code"].lower())
        tags.append(name.replace("_", "-"))
    metadata = {"language": list(dict.fromkeys(codes)) or None}
    if tags != codes:  # only where a tag says more than its code
        metadata["language_bcp47"] = list(dict.fromkeys(tags))
    return metadata


def _copy_heatmap(heatmap_path, output_dir: Path) -> str | None:
    """Copy the heatmap into the folder (unless already there) and return its path relative to the folder."""
    if heatmap_path is None:
        return None
    source = Path(heatmap_path).resolve()
    if not source.is_file():
        raise ValueError(f"heatmap_path {str(heatmap_path)!r} is not a file")
    try:
        return source.relative_to(output_dir.resolve()).as_posix()
    except ValueError:
        shutil.copyfile(source, output_dir / HEATMAP_NAME)
        return HEATMAP_NAME


EXAMPLE_SENTENCE = "The cat sat on the mat."
TARGET_LANG_PIECE = re.compile(r">>[^<>\s]+<<")


def language_token(lang: str) -> str:
    """Marian's target-language token, `>>fr<<`: how the recipes' `--target_lang_token` tells a model the target
    language (a first source token, a whole piece of the tokenizer)."""
    return f">>{lang}<<"


def reads_target_lang_token(tokenizer) -> bool:
    """Whether `tokenizer` holds `>>xx<<` target-language tokens as whole pieces: a model trained with its tokenizer
    reads the target language from the source's first token (the recipes' `--target_lang_token`, Marian's
    multilingual models), so its card's examples must start with one."""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    return any(TARGET_LANG_PIECE.fullmatch(piece) for piece in vocab)


def source_prefix(task_type: str | None, decoder_task: str | None, target_lang_token: bool) -> tuple[str, str]:
    """(the text put before the example sentence, a comment line for the examples) of a model trained with
    `--target_lang_token`: `>>de<< ` where the decoder tasks are the target languages (`task_type` `"lang"`); where
    they are domains, or unknown, the language is the user's to give, so the comment says how."""
    if not target_lang_token:
        return "", ""
    if task_type == "lang" and decoder_task is not None:
        return f"{language_token(decoder_task)} ", ""
    return "", (f"# the model reads the target language as a first source token, as in training: start each source "
                f"with {language_token('xx')!r} (its language code)\n")


def _snippets(family: Family, prefix: tuple[str, str] = ("", "")) -> tuple[str, str, str]:
    """(preparing the input, `generate()` and printing, a pipeline call): the last two take `{}` for keywords;
    `prefix` is [`source_prefix`]'s (text, comment) for a text model."""
    if family.pipeline_input == "text":
        text, comment = prefix
        sentence = json.dumps(text + EXAMPLE_SENTENCE, ensure_ascii=False)
        prepare = f'{comment}inputs = tokenizer([{sentence}], return_tensors="pt", padding=True)\n'
        generate = "print(tokenizer.batch_decode(model.generate(**inputs{}), skip_special_tokens=True))"
        return prepare, generate, f"print(pipe({sentence}{{}}))"
    prepare = ("# waveform: a 1-D float array sampled at 16 kHz\n"
               'inputs = processor(waveform, sampling_rate=16000, return_tensors="pt")\n')
    generate = ('tokens = model.generate(inputs["input_features"], attention_mask=inputs["attention_mask"]{})\n'
                "print(processor.batch_decode(tokens, skip_special_tokens=True))")
    return prepare, generate, 'print(pipe({{"raw": waveform, "sampling_rate": 16000}}{}))'


def _keywords(values: dict[str, str]) -> str:
    """`a="x", b="y"`: keyword arguments of the card's code."""
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in values.items())


def _task_usage(family: Family, config, direction: tuple[str, str], other: tuple[str, str] | None,
                target_lang_token: bool = False, sides: tuple[str, ...] = SIDES,
                causal_lm: bool = False) -> dict[str, str]:
    """The code of the card's examples: loaded with `direction` as the defaults (on the `sides` the model reads),
    one more call routed to `other`. A pipeline call routes the decoder alone (`causal_lm`) by task ids: the stock
    `text-generation` pipeline hands them on to `generate()`."""
    prepare, generate, pipe = _snippets(family, source_prefix(config.task_type, direction[1], target_lang_token))
    usage, pipeline_usage = prepare + generate.format(""), pipe.format("")
    pipeline_keyword = "{}_task_ids" if causal_lm else "{}_task"
    if other is not None:
        changed = {side: name for side, name, example in zip(SIDES, other, direction) if name != example}
        other_prepare, _, other_pipe = _snippets(family, source_prefix(config.task_type, other[1], target_lang_token))
        usage += "\n# another task for this call (a name, or a LongTensor[batch] of task ids):\n"
        if other_prepare != prepare:  # another target language token
            usage += other_prepare
        usage += generate.format(", " + _keywords({f"{side}_task_ids": name for side, name in changed.items()}))
        pipeline_usage += "\n" + other_pipe.format(
            ", " + _keywords({pipeline_keyword.format(side): name for side, name in changed.items()}))
    # every side with a choice is named: a side of several tasks without a default would stop generate()
    defaults = {f"{side}_task": name for side, name in zip(SIDES, direction)
                if side in sides and len(config.tasks(side)) > 1}
    return {
        "usage": usage,
        "pipeline_usage": pipeline_usage,
        "example_description": ", ".join(f"{side} task `{name}`" for side, name in zip(SIDES, direction)
                                         if side in sides),
        "task_id_keywords": " / ".join(f"`{side}_task_ids`" for side in sides),
        "load_kwargs": f", {_keywords(defaults)}" if defaults else "",
        "pipeline_model_kwargs": json.dumps(defaults) if defaults else None,
        "export_kwargs": _keywords(defaults),
        "export_label": "-".join(dict.fromkeys(defaults.values())) or direction[1],
    }


def _direction_key(config, family: Family, scored: set[tuple[str, str]]):
    """Sort key of (encoder task, decoder task) pairs for the card's examples: a scored pair first (trained and
    evaluated), then the usual kind of pair (a translation, from English, the examples' language, for a text
    `"lang"` model; the same task on both sides for a domain or speech recognition), then task order."""
    translates = config.task_type == "lang" and family.pipeline_input == "text"

    def key(pair: tuple[str, str]) -> tuple:
        encoder, decoder = pair
        return (pair not in scored, (encoder != decoder) != translates, translates and encoder != "en",
                config.encoder_tasks.index(encoder), config.decoder_tasks.index(decoder))

    return key


def example_directions(config, family: Family, records: list[MetricRecord], sides: tuple[str, ...] = SIDES
                       ) -> tuple[tuple[str, str], tuple[str, str] | None]:
    """(encoder task, decoder task) of the card's examples, and of the one more call routed elsewhere (`None`
    where there is no other pair).

    The example keeps the config's defaults; a scored pair (a metric named `en-de`, or a domain `tedx`) is
    preferred to an untrained one (`de` -> `de` in a translation model). The other call changes one side of a
    `"lang"` model (the decoder where it can: another target language), both sides of a domain model. A side not in
    `sides` (the source of the decoder alone, whose examples give no encoder states) keeps its default, or its first
    task.
    """
    names = {record.task for record in records}
    choices = {side: config.tasks(side) if side in sides else
               [getattr(config, f"default_{side}_task") or config.tasks(side)[0]] for side in SIDES}
    pairs = [(encoder, decoder) for encoder in choices["encoder"] for decoder in choices["decoder"]]
    scored = {(e, d) for e, d in pairs if f"{e}-{d}" in names or (e == d and e in names)}
    key = _direction_key(config, family, scored)
    defaults = (config.default_encoder_task, config.default_decoder_task)
    direction = min((pair for pair in pairs if all(d in (None, t) for d, t in zip(defaults, pair))), key=key)
    others = [pair for pair in pairs if pair != direction]
    if config.task_type != "lang":
        return direction, min(others, key=key, default=None)
    others = [pair for pair in others if pair[0] == direction[0] or pair[1] == direction[1]]
    return direction, min(others, key=lambda pair: (pair not in scored, pair[0] != direction[0], key(pair)),
                          default=None)


def layer_sides(causal_lm: bool) -> tuple[str, ...]:
    """The sides a model has layers on: the decoder alone has no encoder."""
    return ("decoder",) if causal_lm else SIDES


def task_sides(model) -> tuple[str, ...]:
    """The sides whose tasks the card shows: both for an encoder-decoder model; for the decoder alone, those its
    layers read (the source task only where a cross-attention or the adapters are keyed by it)."""
    unread = model.unread_sides() if isinstance(model, HeadSelectionModelMixin) else ()
    return tuple(side for side in SIDES if side not in unread)


def _card_variables(model, family: Family, exported_tasks: dict | None, records: list[MetricRecord],
                    target_lang_token: bool = False, task_type: str | None = None) -> dict:
    """The template variables that describe the model itself (its pipeline tag the card's metadata takes too)."""
    causal_lm, sides = family.is_causal_lm(model), task_sides(model)
    variables = {
        "causal_lm": causal_lm,
        "stock_class": stock_model_class(family.causal_lm_class if causal_lm else family.model_class).__name__,
        "doc_page": family.stock_model_type,
        "auto_class": (AutoModelForCausalLM if causal_lm else family.auto_class).__name__,
        "preprocessor_class": family.preprocessor_class, "preprocessor_name": family.preprocessor_name,
        # the decoder alone has no custom pipeline: the stock `text-generation` one serves it
        "pipeline_tag": TEXT_GENERATION if causal_lm else family.pipeline_tag,
        "config_rows": config_rows(model.config, layer_sides(causal_lm), sides),
    }
    # the decoder alone continues its prompt: no target-language token before it
    target_lang_token = target_lang_token and not causal_lm
    if exported_tasks is not None:
        return {**variables, **_exported_variables(model.config, family, exported_tasks, target_lang_token,
                                                   task_type, causal_lm)}
    return {**variables, **_task_variables(model.config, family, records, target_lang_token, sides, causal_lm),
            "sharing": head_sharing(model)}


def _exported_variables(config, family: Family, exported_tasks: dict, target_lang_token: bool = False,
                        task_type: str | None = None, causal_lm: bool = False) -> dict:
    # the exported stock config has no task type: the source's says whether the decoder task is the target language
    prefix = source_prefix(task_type, exported_tasks.get("decoder"), target_lang_token)
    prepare, generate, _ = _snippets(family, prefix)
    return {
        "exported": True,
        "exported_tasks": dict(exported_tasks),
        "exported_description": ", ".join(f"{side} task `{name}`" for side, name in exported_tasks.items()),
        "heads_summary": " / ".join(f"{getattr(config, f'{side}_attention_heads')} {side}"
                                    for side in layer_sides(causal_lm)),
        "exported_usage": prepare + generate.format(""),
    }


def _task_routing(config, sides: tuple[str, ...], causal_lm: bool) -> str:
    """The card's sentence on what keys the layers."""
    language = config.task_type == "lang"
    if not causal_lm:
        return ("The encoder is keyed by the source language and the decoder by the target language, so unseen "
                "directions can be tried zero-shot." if language else "Both sides are keyed by the domain.")
    routing = f"The decoder is keyed by {'the language it writes' if language else 'the domain'}."
    if "encoder" in sides:
        routing += (" Given the states of an encoder to attend to (as the decoder of an `EncoderDecoderModel`), it "
                    "also reads their source task (`encoder_task_ids`).")
    return routing


def _task_variables(config, family: Family, records: list[MetricRecord], target_lang_token: bool = False,
                    sides: tuple[str, ...] = SIDES, causal_lm: bool = False) -> dict:
    kind = "language" if config.task_type == "lang" else "domain"
    description = family.causal_lm_description if causal_lm else family.description
    components = config.head_selection_components or []
    # the decoder alone's examples give no encoder states: they route its decoder task, keeping the source's
    directions = example_directions(config, family, records, layer_sides(causal_lm))
    return {
        "exported": False,
        "family_description": f"{'multilingual' if kind == 'language' else 'multi-domain'} {description}",
        "task_kind": kind,
        "task_type": config.task_type,
        "task_routing": _task_routing(config, sides, causal_lm),
        "task_rows": [{"side": side, "tasks": _format_value(config.tasks(side)),
                       "default": getattr(config, f"default_{side}_task")} for side in sides],
        "strategy": config.head_selection_strategy,
        "strategy_description": STRATEGY_DESCRIPTIONS[config.head_selection_strategy],
        "components": components or ["none (stock model)"],
        "head_rows": [{"side": side, "heads": config.heads(side), "total": config.total_heads(side),
                       "selects": any(component_side(c) == side for c in components)}
                      for side in layer_sides(causal_lm)],
        # the decoder alone has a cross-attention only beside an encoder: named where it selects
        "cross_key_description": (CROSS_KEY_DESCRIPTIONS[config.cross_attention_task_key]
                                  if not causal_lm or "decoder_cross" in components else None),
        **_task_usage(family, config, *directions, target_lang_token, sides, causal_lm),
    }


def _dataset_text(dataset_name: str | dict[str, str]) -> str:
    """The card's line naming the evaluation data: `dev.jsonl (validation), test.jsonl (test)` for names per split."""
    if isinstance(dataset_name, dict):
        return ", ".join(f"{name} ({split})" for split, name in dataset_name.items())
    return dataset_name


def hub_model_id(name: str | None) -> str | None:
    """`name` where it can be a Hub model id, `None` for a local folder: the Hub's metadata check refuses a
    `base_model` that names no Hub model (the stock `Trainer.create_model_card` leaves local folders out too)."""
    return None if name is None or Path(name).expanduser().is_dir() else name


def render_model_card(
    model,
    metrics: dict | None = None,
    *,
    model_name: str | None = None,
    repo_id: str | None = None,
    dataset_name: str | dict[str, str] | None = None,
    dataset_id: str | None = None,
    base_model: str | None = None,
    license: str = "apache-2.0",
    languages: str | list[str] | None = None,
    tags: list[str] | None = None,
    heatmap: str | None = None,
    training_args=None,
    exported_tasks: dict[str, str] | None = None,
    source_model: str | None = None,
    template: str | Path | None = None,
    target_lang_token: bool = False,
    task_type: str | None = None,
) -> ModelCard:
    """The [`ModelCard`] of a head-selection model (the decoder alone too: a `text-generation` card), or of a stock
    model exported from one (`exported_tasks`).

    See [`write_model_card`] for the arguments; `heatmap` is a path relative to the model folder.
    """
    model_type = getattr(model.config, "model_type", None)
    family = family_of(model_type)
    headsel = isinstance(model, HeadSelectionModelMixin)
    if headsel == (exported_tasks is not None):
        raise ValueError("write_model_card renders a head-selection model (without exported_tasks) or a stock model "
                         "exported from one (with exported_tasks={'encoder': ..., 'decoder': ...})")
    if task_type is not None and exported_tasks is None:
        raise ValueError("task_type describes the source of an exported model (with exported_tasks); a head-selection "
                         "model's config has its own")
    model_name = model_name or (repo_id.split("/")[-1] if repo_id else f"{model_type}-model")
    records = collect_metrics(metrics)
    if exported_tasks is not None:  # an exported model has one task: its whole-model scores are that task's
        label = "-".join(dict.fromkeys(exported_tasks.values()))
        records = [replace(r, task=label) if r.task is None else r for r in records]
    dataset_name = dataset_name or dataset_id or "custom"
    variables = _card_variables(model, family, exported_tasks, records, target_lang_token, task_type)
    pipeline_tag = variables["pipeline_tag"]
    tags = ["hf-headsel", "head-selection", family.stock_model_type, pipeline_tag, *(tags or [])]
    if headsel:
        tags += ["multilingual" if model.config.task_type == "lang" else "multi-domain", "custom_code"]
    language_config = model.config if headsel else None
    card_data = ModelCardData(
        **language_metadata(_languages(language_config, languages, task_sides(model))),
        license=license,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=tags,
        datasets=[dataset_id] if dataset_id else None,
        base_model=hub_model_id(base_model),
        model_name=model_name,
        eval_results=eval_results(records, dataset_name, dataset_id or "custom") or None,
    )
    metric_names, rows = results_table(records)
    return ModelCard.from_template(
        card_data,
        template_path=str(template or template_path()),
        model_name=model_name,
        model_id=repo_id or model_name,
        results=rows,
        metric_names=metric_names,
        dataset_name=_dataset_text(dataset_name) if records else None,
        heatmap=heatmap,
        training_rows=training_rows(training_args),
        source_model=f"`{source_model}`" if source_model else None,
        **variables,
    )


def write_model_card(
    output_dir: str | Path,
    model,
    metrics: dict | None = None,
    *,
    model_name: str | None = None,
    repo_id: str | None = None,
    dataset_name: str | dict[str, str] | None = None,
    dataset_id: str | None = None,
    base_model: str | None = None,
    license: str = "apache-2.0",
    languages: str | list[str] | None = None,
    tags: list[str] | None = None,
    heatmap_path: str | Path | None = None,
    training_args=None,
    exported_tasks: dict[str, str] | None = None,
    source_model: str | None = None,
    template: str | Path | None = None,
    target_lang_token: bool = False,
    task_type: str | None = None,
) -> Path:
    """Render the model card of `model` into `output_dir/README.md` and return that path.

    Args:
        output_dir: the model folder (created if needed).
        model: the head-selection model (its config and `selected_heads()` fill the card; a family's decoder alone,
            `HeadSelMarianForCausalLM`, gets `text-generation` usage), or a stock model exported from one, together
            with `exported_tasks`.
        metrics: scores for the model-index and the results table, e.g. the Trainer's
            `{"eval_bleu": ..., "eval_bleu_fr-en": ...}`, `{"eval": {...}, "predict": {...}}` or
            `{"fr": {"bleu": ...}}` (see [`collect_metrics`]). WER, CER, BLEU and chrF are recognised.
        model_name / repo_id: the model-index name and the id shown in the examples (default: the repo name).
        dataset_name / dataset_id: the evaluation dataset (a display name, or `{split: name}` where the validation
            and test scores come from different files; and a Hub dataset id for the metadata).
        base_model: the checkpoint it was upcycled or fine-tuned from (a Hub id; a local folder is left out).
        license: an SPDX-like Hub license id.
        languages: the card's languages, ISO 639 codes or BCP 47 tags (a string is one; default: the task names
            of a `"lang"` model). A tag with subtags (`pt-BR`) puts its code in `language` and the tag in
            `language_bcp47`; a name that is no language tag is a `ValueError`.
        tags: extra tags.
        heatmap_path: a PNG of the head sharing between tasks: copied into `output_dir` (as `head_sharing.png`)
            unless it is already inside, and embedded.
        training_args: a `TrainingArguments` (its main fields are listed) or a dict (every scalar is listed), less
            the credentials (`hub_token`, any `*_token`).
        exported_tasks: for an exported stock model, `{side: task}` it was exported for.
        source_model: for an exported model, the head-selection model it comes from.
        template: a Jinja template to use instead of `model_cards/headsel_model_card_template.md`.
        target_lang_token: the model was trained with the target language as a first source token (the recipes'
            `--target_lang_token`, `>>de<<`): the text examples start with it.
        task_type: for an exported model, the task type of the model it comes from (its stock config has none):
            with `"lang"` the decoder task is the target language, whose `>>xx<<` the examples start with.

    When `output_dir` already holds the saved head-selection model, it is also completed with
    [`prepare_model_folder`] (remote code and `custom_pipelines`), since the card shows those pipelines.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    card = render_model_card(
        model, metrics, model_name=model_name, repo_id=repo_id, dataset_name=dataset_name, dataset_id=dataset_id,
        base_model=base_model, license=license, languages=languages, tags=tags,
        heatmap=_copy_heatmap(heatmap_path, output_dir), training_args=training_args,
        exported_tasks=exported_tasks, source_model=source_model, template=template,
        target_lang_token=target_lang_token, task_type=task_type,
    )
    path = output_dir / "README.md"
    path.write_text(str(card).rstrip("\n") + "\n", encoding="utf-8")
    if (output_dir / "config.json").is_file():
        prepare_model_folder(output_dir)  # the card shows the pipelines: make the folder serve them
    return path


__all__ = [
    "MetricRecord",
    "collect_metrics",
    "eval_results",
    "head_sharing",
    "language_token",
    "reads_target_lang_token",
    "render_model_card",
    "results_table",
    "write_model_card",
]
