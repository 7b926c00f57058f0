# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The scores a model card publishes: WER / CER / BLEU / chrF from Trainer metrics or nested dicts
([`collect_metrics`]), as model-index entries ([`eval_results`]) and as the card's results table ([`results_table`]).

`hf_headsel.model_card` and `hf_headsel.hub` re-export these names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from huggingface_hub import EvalResult

from .configuration_head_selection import POOLED
from .pipeline_headsel import SPEECH_RECOGNITION, TRANSLATION

METRIC_NAMES = {"wer": "WER", "cer": "CER", "bleu": "BLEU", "chrf": "chrF"}
#: The error rates among them (lower is better), scored on transcriptions.
ERROR_RATES = ("wer", "cer")
#: The suffixes of a score's bootstrap interval bounds (`{key}_ci_low`, `{key}_ci_high`): not scores of a task.
INTERVAL_SUFFIXES = ("_ci_low", "_ci_high")
SPLIT_NAMES = {"eval": "validation", "validation": "validation", "test": "test", "predict": "test"}
_METRIC_KEY = re.compile(
    r"^(?:(?P<split>eval|validation|test|predict)_)?(?P<metric>wer|cer|bleu|chrf)(?:_(?P<task>.+))?$"
)


@dataclass(frozen=True)
class MetricRecord:
    """One score: `task` is a task or direction name, [`POOLED`] (corpus-level) or `None` (the mean over tasks)."""

    split: str
    metric: str
    task: str | None
    value: float


def collect_metrics(metrics: dict | None, default_split: str = "validation") -> list[MetricRecord]:
    """The WER / CER / BLEU / chrF scores in `metrics`, in any of these shapes (other keys are ignored):

    * Trainer metrics: `{"eval_bleu": 31.2, "eval_bleu_fr-en": 30.1, "eval_bleu_pooled": 31.0, "eval_loss": ...}`
      (prefix `eval_` / `validation_` -> validation, `test_` / `predict_` -> test, none -> `default_split`);
    * nested by split: `{"eval": {...Trainer metrics...}, "predict": {...}}`;
    * nested by task: `{"fr": {"bleu": 30.1}, "it": {"bleu": 28.4}}`.

    Confidence bounds (`eval_bleu_fr-en_ci_low`, `..._ci_high`) are not scores and are left out.
    """
    records = []
    for key, value in (metrics or {}).items():
        if isinstance(value, dict):
            if key in SPLIT_NAMES:
                records += collect_metrics(value, SPLIT_NAMES[key])
            else:
                records += [
                    MetricRecord(r.split, r.metric, key, r.value) for r in collect_metrics(value, default_split)
                ]
            continue
        match = _METRIC_KEY.match(key)
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key.endswith(INTERVAL_SUFFIXES) or match is None or not is_number:
            continue
        split = SPLIT_NAMES[match["split"]] if match["split"] else default_split
        records.append(MetricRecord(split, match["metric"], match["task"], float(value)))
    return records


def _task_label(task: str | None) -> str:
    if task is None:
        return "mean over tasks"
    return f"all ({POOLED})" if task == POOLED else task


def eval_results(records: list[MetricRecord], dataset_name: str | dict[str, str], dataset_id: str) -> list[EvalResult]:
    """The model-index entries of `records`: one result per split and task (`dataset_config` = the task).

    `dataset_name` names the dataset of every split, or is `{split: name}` where the splits come from different
    data (a split it does not name is `dataset_id`'s).
    """
    names = dataset_name if isinstance(dataset_name, dict) else {}
    results = []
    for record in records:
        speech = record.metric in ERROR_RATES
        results.append(
            EvalResult(
                task_type=SPEECH_RECOGNITION if speech else TRANSLATION,
                task_name="Speech Recognition" if speech else "Translation",
                dataset_type=dataset_id,
                dataset_name=names.get(record.split, dataset_id) if names else dataset_name,
                dataset_config=record.task if record.task not in (None, POOLED) else None,
                dataset_split=record.split,
                metric_type=record.metric,
                metric_name=f"{METRIC_NAMES[record.metric]} ({_task_label(record.task)})",
                metric_value=round(record.value, 4),
            )
        )
    return results


def results_table(records: list[MetricRecord]) -> tuple[list[str], list[dict]]:
    """(metric names, rows `{split, task, cells}`) for the card's table; the mean and pooled rows come first."""
    metrics = sorted({r.metric for r in records}, key=list(METRIC_NAMES).index)
    cells = {(r.split, r.task, r.metric): r.value for r in records}
    keys = sorted({(r.split, r.task) for r in records},
                  key=lambda key: (key[0], key[1] is not None, key[1] != POOLED, key[1] or ""))
    rows = [
        {
            "split": split,
            "task": _task_label(task),
            "cells": [f"{cells[(split, task, m)]:.2f}" if (split, task, m) in cells else "-" for m in metrics],
        }
        for split, task in keys
    ]
    return [METRIC_NAMES[m] for m in metrics], rows


__all__ = [
    "ERROR_RATES",
    "INTERVAL_SUFFIXES",
    "METRIC_NAMES",
    "POOLED",
    "MetricRecord",
    "collect_metrics",
    "eval_results",
    "results_table",
]
