# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The results files of a recipe run and the score keys in them: the one writer's format, for every reader.

The Trainer writes `{split}_results.json` into the run folder (`split`: `eval`, the validation set, or `predict`, the
test set; `all_results.json` merges them with `train_results.json`) and prefixes every metric with `{split}_`. The
recipes' scores ([`headsel_recipes.metrics.TaskMetrics`], which returns them without the prefix) are

* `{split}_{metric}`: the mean over the groups (tasks, directions or domains), the paper's averages;
* `{split}_{metric}_{group}`: one group;
* `{split}_{metric}_pooled`: one corpus-level score over every sentence;

each with `_ci_low` / `_ci_high` companions (the bounds of its bootstrap interval) when `--bootstrap_resamples` > 0.
`{split}_loss` is the Trainer's loss (nats per target token); `{split}_unusable` the share of hypotheses that are
empty or looping ([`headsel_recipes.metrics.is_unusable`]). `metric` is `wer` or `bleu`. `train_results.json` adds
[`TRAIN_LOSS_EVAL_MODE`] and [`TRAIN_LOSS_TRAIN_MODE`]: the trained model's cross-entropy on a few hundred training
examples without and with its training-time noise (`HeadSelSeq2SeqTrainer.mode_losses`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# The score-key facts the cards read too, written once in the core: the corpus-level group and the interval suffixes.
from hf_headsel.card_metrics import INTERVAL_SUFFIXES, POOLED

#: The Trainer's results files, merged in this order by [`read_metrics`] (later files win).
RESULT_FILES = ("all_results.json", "eval_results.json", "predict_results.json", "test_results.json")
#: The flags a run was trained with, in its folder (written by the demo and the experiment runner; `headsel-train mt
#: <folder>/run_config.json` repeats the run).
RUN_CONFIG_FILE = "run_config.json"
#: The name of the share of empty or looping hypotheses (not a metric of the tasks; see [`unusable_key`]).
UNUSABLE = "unusable"
#: The trained model's cross-entropy on training examples in evaluation mode and in training mode (dropout on).
TRAIN_LOSS_EVAL_MODE, TRAIN_LOSS_TRAIN_MODE = "train_loss_eval_mode", "train_loss_train_mode"


@dataclass(frozen=True)
class Score:
    """One score and, when the run wrote it, its bootstrap interval `(low, high)`."""

    value: float
    interval: tuple[float, float] | None = None


def score_key(metric: str, group: str | None = None, split: str | None = None) -> str:
    """`[{split}_]{metric}[_{group}]`: the key of a score; without `split`, as `TaskMetrics` returns it (the Trainer
    adds the prefix). `group=None` is the mean over groups, `group=POOLED` the corpus-level score."""
    return "_".join(part for part in (split, metric, group) if part is not None)


def interval_keys(key: str) -> tuple[str, str]:
    """The keys of the interval bounds of the score `key`: `(key_ci_low, key_ci_high)`."""
    low, high = INTERVAL_SUFFIXES
    return f"{key}{low}", f"{key}{high}"


def is_interval_key(key: str) -> bool:
    """Whether `key` is an interval bound, not a score."""
    return key.endswith(INTERVAL_SUFFIXES)


def loss_key(split: str) -> str:
    """The key of a split's loss: `{split}_loss`."""
    return f"{split}_loss"


def unusable_key(split: str | None = None) -> str:
    """The key of the share of empty or looping hypotheses: `[{split}_]unusable`."""
    return score_key(UNUSABLE, split=split)


def read_score(results: dict, key: str) -> Score | None:
    """The score `key` of a results mapping with its interval (when both bounds are there); `None` when absent."""
    if key not in results:
        return None
    low, high = (results.get(bound) for bound in interval_keys(key))
    interval = (float(low), float(high)) if low is not None and high is not None else None
    return Score(float(results[key]), interval)


def group_scores(results: dict, metric: str, split: str) -> dict[str, Score]:
    """Every group's score (`{split}_{metric}_{group}`, neither the mean nor the pooled score), groups sorted."""
    head = score_key(metric, split=split) + "_"
    groups = sorted(key[len(head):] for key in results
                    if key.startswith(head) and not is_interval_key(key) and key[len(head):] != POOLED)
    return {group: read_score(results, head + group) for group in groups}


def one_group(results: dict, group: str) -> dict:
    """The scores of one group, keyed as a whole model's (`eval_bleu_fr` -> `eval_bleu`): a model exported for that
    group alone reports them as its own. Interval bounds are left out."""
    suffix = f"_{group}"
    whole = {key[: -len(suffix)]: value for key, value in results.items()
             if key.endswith(suffix) and not is_interval_key(key)}
    # `{split}_{metric}` only: a longer head is another group's key that ends alike (`tech_news` for `news`)
    return {key: value for key, value in whole.items() if key.count("_") == 1}


def predictions_path(run_folder: str | Path) -> Path:
    """A run's test predictions, `generated_predictions.jsonl` (id, group, reference and hypothesis per example)."""
    return Path(run_folder) / "generated_predictions.jsonl"


def read_predictions(path: str | Path) -> list[dict]:
    """The rows of a `generated_predictions.jsonl` ([`predictions_path`]), as the recipe wrote them."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def results_path(run_folder: str | Path, split: str) -> Path:
    """A run's results file of `split`: `{split}_results.json`."""
    return Path(run_folder) / f"{split}_results.json"


def read_results(run_folder: str | Path, split: str) -> dict:
    """The content of a run's `{split}_results.json`."""
    return json.loads(results_path(run_folder, split).read_text(encoding="utf-8"))


def read_metrics(folder: str | Path) -> dict:
    """Every results file of a folder ([`RESULT_FILES`]), merged (later files win); `{}` when it has none."""
    metrics = {}
    for name in RESULT_FILES:
        path = Path(folder) / name
        if path.is_file():
            metrics.update(json.loads(path.read_text(encoding="utf-8")))
    return metrics
