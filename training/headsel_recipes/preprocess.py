# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""From standardized rows to model inputs, skipping (and counting) what cannot be trained or scored on.

Every example gets a `skip_reason` (`""` when it is kept); the reasons are counted per split, logged as one
summary line, written to `data_report.json`, and the skipped rows are dropped. Nothing raises halfway through
training because of one bad row. The reasons:

* `missing_language` / `missing_domain`: the row names no language (domain) for a side;
* `unknown_language` / `unknown_domain`: a language (domain) the model has no task for;
* `empty_source` / `empty_target`: no text;
* `source_too_long` / `target_too_long`: more tokens than `--max_source_length` / `--max_target_length` (capped by
  the model's positions); training splits only: evaluation splits cut such text to the limit (keeping `</s>`), as
  the Transformers examples do, so that every test sentence is scored (against its full reference);
* `unreadable_audio`: the audio cannot be read or decoded;
* `empty_audio`: no samples, or too short for one feature frame;
* `invalid_audio`: features that are not finite (e.g. digital silence: variance normalization divides by 0);
* `audio_too_short` / `audio_too_long`: outside `--min_duration_in_seconds` / `--max_duration_in_seconds` (training
  splits only), or more frames than the model's positions (every split).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from datasets import Array2D, Dataset, Features, Sequence, Value

from hf_headsel.model_card import language_token

from .arguments import RecipeTask
from .audio import AudioError, extract_features, read_audio
from .data import example_tasks, keyed_task

logger = logging.getLogger(__name__)


@dataclass
class PrepareContext:
    """Everything the per-example preprocessing needs."""

    task: RecipeTask
    task_type: str
    encoder_tasks: list[str]
    decoder_tasks: list[str]
    tokenizer: object
    feature_extractor: object | None = None
    max_source_length: int = 1024  # tokens (text) or feature frames (speech)
    max_target_length: int = 1024
    min_duration: float = 0.0
    max_duration: float = float("inf")
    target_lang_token: bool = False
    # `--task_tag`: the tag id of every decoder task, prepended to the labels
    task_tag_ids: dict[str, int] | None = None
    # `--encoder_task_tag`: the tag id of every encoder task, prepended to the source ids
    encoder_tag_ids: dict[str, int] | None = None
    # an evaluation split: text over the length limits is cut, not skipped, and the duration limits do not apply
    evaluation: bool = False

    def output_features(self) -> Features:
        """The schema of a prepared split (fixed, so that skipped rows with empty inputs never change the types)."""
        if self.task.speech:
            inputs = {"input_features": Array2D(shape=(None, self.feature_extractor.feature_size), dtype="float32")}
        else:
            inputs = {"input_ids": Sequence(Value("int32"))}
        return Features({
            **inputs,
            "labels": Sequence(Value("int32")),
            "encoder_task_ids": Value("int64"),
            "decoder_task_ids": Value("int64"),
            "group": Value("string"),
            "reference": Value("string"),
            "id": Value("string"),
            "length": Value("int32"),
            "skip_reason": Value("string"),
        })


def _task_reason(name: str, known: list[str], task_type: str) -> str:
    kind = "domain" if task_type == "domain" else "language"
    if not name:
        return f"missing_{kind}"
    return "" if name in known else f"unknown_{kind}"


def prepare_example(row: dict, ctx: PrepareContext) -> dict:
    """Model inputs of one standardized row, with its `skip_reason` (`""` when usable)."""
    own_encoder, own_decoder, group = example_tasks(
        ctx.task, ctx.task_type, row["source_lang"], row["target_lang"], row["domain"])
    encoder, decoder = keyed_task(own_encoder, ctx.encoder_tasks), keyed_task(own_decoder, ctx.decoder_tasks)
    out = {
        "labels": [], "encoder_task_ids": -1, "decoder_task_ids": -1, "group": group, "reference": row["target_text"],
        "id": row["id"], "length": 0, "skip_reason": "",
        **({"input_features": np.zeros((0, ctx.feature_extractor.feature_size), np.float32)} if ctx.task.speech
           else {"input_ids": []}),
    }
    reason = _task_reason(encoder, ctx.encoder_tasks, ctx.task_type) or _task_reason(
        decoder, ctx.decoder_tasks, ctx.task_type)
    if not reason:
        out["encoder_task_ids"] = ctx.encoder_tasks.index(encoder)
        out["decoder_task_ids"] = ctx.decoder_tasks.index(decoder)
        # the tags name the example's own tasks, also on a side keyed by no task: what a shared model is told
        reason = _prepare_target(row, ctx, out, own_decoder) or (
            _prepare_speech(row, ctx, out) if ctx.task.speech else _prepare_text(row, ctx, out, own_encoder))
    out["skip_reason"] = reason
    return out


def _prepare_target(row: dict, ctx: PrepareContext, out: dict, decoder_task: str) -> str:
    if not row["target_text"]:
        return "empty_target"
    ids = ctx.tokenizer(text_target=row["target_text"])["input_ids"]
    if ctx.task_tag_ids is not None:
        ids = [ctx.task_tag_ids[decoder_task], *ids]
    labels = _fit(ids, ctx.max_target_length, ctx.evaluation)
    if labels is None:
        return "target_too_long"
    out["labels"] = labels
    return ""


def _fit(ids: list[int], limit: int, truncate: bool) -> list[int] | None:
    """`ids` within `limit` tokens: as they are, cut to the limit keeping the final `</s>` (`truncate`), or `None`."""
    if len(ids) <= limit:
        return ids
    return ids[:limit - 1] + ids[-1:] if truncate else None


def _prepare_text(row: dict, ctx: PrepareContext, out: dict, encoder_task: str) -> str:
    source = row["source_text"]
    if not source:
        return "empty_source"
    if ctx.target_lang_token:
        source = f"{language_token(row['target_lang'])} {source}"
    ids = ctx.tokenizer(source)["input_ids"]
    if ctx.encoder_tag_ids is not None:
        ids = [ctx.encoder_tag_ids[encoder_task], *ids]
    input_ids = _fit(ids, ctx.max_source_length, ctx.evaluation)
    if input_ids is None:
        return "source_too_long"
    out["input_ids"], out["length"] = input_ids, len(input_ids)
    return ""


def _prepare_speech(row: dict, ctx: PrepareContext, out: dict) -> str:
    try:
        audio = read_audio(row["audio"])
    except AudioError as error:
        logger.debug("unreadable audio %s: %s", row["id"], error)
        return "unreadable_audio"
    samples = audio.features if audio.features is not None else audio.waveform
    if samples is None or samples.shape[0] == 0:
        return "empty_audio"
    if audio.duration > ctx.max_duration and not ctx.evaluation:
        return "audio_too_long"
    if audio.duration < ctx.min_duration and not ctx.evaluation:
        return "audio_too_short"
    try:
        features = extract_features(audio, ctx.feature_extractor)
    except (AudioError, ValueError) as error:
        logger.debug("bad features %s: %s", row["id"], error)
        return "unreadable_audio"
    if features.shape[0] == 0:
        return "empty_audio"
    if features.shape[0] > ctx.max_source_length:
        return "audio_too_long"
    if not np.isfinite(features).all():
        return "invalid_audio"
    out["input_features"], out["length"] = features, features.shape[0]
    return ""


# --------------------------------------------------------------------------------------------------------------------
# Splits and the report
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class SplitReport:
    """How many rows of a split were kept, and why the others were skipped."""

    split: str
    total: int
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return self.total - sum(self.skipped.values())

    def summary(self) -> str:
        """One log line: `train: kept 95 of 100 examples; skipped 5: empty_target=3, unreadable_audio=2`."""
        line = f"{self.split}: kept {self.kept} of {self.total} examples"
        if self.skipped:
            details = ", ".join(f"{reason}={count}" for reason, count in sorted(self.skipped.items()))
            line += f"; skipped {self.total - self.kept}: {details}"
        return line


def prepare_split(
    dataset: Dataset, split: str, ctx: PrepareContext, num_proc: int | None = None, overwrite_cache: bool = False
) -> tuple[Dataset, SplitReport]:
    """Prepare every row of a standardized split, count the skip reasons, and drop the skipped rows. Splits other
    than `train` are evaluation splits: over-long text is cut, not skipped (see the module docstring)."""
    prepared = dataset.map(
        prepare_example,
        fn_kwargs={"ctx": replace(ctx, evaluation=split != "train")},
        remove_columns=dataset.column_names,
        features=ctx.output_features(),
        num_proc=num_proc,
        load_from_cache_file=not overwrite_cache,
        desc=f"Preparing {split} data",
    )
    skip_reasons = prepared["skip_reason"]  # read from the Arrow table once
    reasons = Counter(reason for reason in skip_reasons if reason)
    report = SplitReport(split, len(prepared), dict(reasons))
    if reasons.get("unreadable_audio"):
        # the reason alone does not say why (a wrong --audio_root, an unsupported format): the first one's error
        logger.warning("%s: the first unreadable audio: %s", split,
                       first_audio_error(dataset[skip_reasons.index("unreadable_audio")], ctx))
    if reasons:
        prepared = prepared.filter(lambda reason: not reason, input_columns="skip_reason", num_proc=num_proc,
                                   desc=f"Dropping skipped {split} rows")
        logger.warning(report.summary())
    else:
        logger.info(report.summary())
    return prepared.remove_columns("skip_reason"), report


def first_audio_error(row: dict, ctx: PrepareContext) -> str:
    """The error of a row skipped as `unreadable_audio` (read again: the map that skipped it may be a cached one)."""
    try:
        extract_features(read_audio(row["audio"]), ctx.feature_extractor)
    except (AudioError, ValueError) as error:
        return f"{row['id']}: {error}"
    return f"{row['id']}: read again without error"


def write_report(reports: list[SplitReport], path: Path) -> None:
    """`data_report.json`: per split, the rows read, kept and skipped by reason."""
    content = {report.split: {"total": report.total, "kept": report.kept, "skipped": report.skipped}
               for report in reports}
    path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
