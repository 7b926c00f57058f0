# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The scores of an experiment's finished runs: per system, per seed, per group, with bootstrap intervals.

Read from each run's `{split}_results.json` and `train_results.json` (the keys: [`headsel_recipes.results_keys`]); a
system trained in parts gets its parts' groups merged; whether a system can do zero-shot directions comes from its
trained model's config.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..metrics import unusable_share
from ..results_keys import (
    TRAIN_LOSS_EVAL_MODE,
    TRAIN_LOSS_TRAIN_MODE,
    group_scores,
    predictions_path,
    read_predictions,
    read_results,
    read_score,
    results_path,
    score_key,
    unusable_key,
)
from .spec import Experiment, System, run_dir

logger = logging.getLogger("headsel_recipes.experiment")


@dataclass
class SeedScores:
    """The scores of one system and seed: per group, with bootstrap intervals where the run wrote them."""

    groups: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    mean_interval: tuple[float, float] | None = None
    unusable: float | None = None  # the share of empty or looping hypotheses (`None`: the run did not write it)
    # the trained model's loss on training examples in evaluation and in training mode (`None`: not recorded)
    mode_losses: tuple[float, float] | None = None


@dataclass
class SystemScores:
    """A system's scores over seeds and whether it can do zero-shot directions."""

    system: System
    seeds: dict[int, SeedScores] = field(default_factory=dict)
    zero_shot: bool = True


def supports_zero_shot(config: dict) -> bool:
    """Whether a trained model can translate a direction it never saw: not when a component is keyed by the
    direction (per-direction adapters, or cross-attention selection keyed by the pair of tasks), whose modules for an
    unseen direction were never trained (the paper's Table 4 reports the adapter model's zero-shot as unsupported;
    Blackwood et al.'s paired variant has no zero-shot either). A domain model's "directions" are its domains."""
    if config.get("task_type", "lang") == "domain":
        return True
    if config.get("task_adapter_dim") and config.get("task_adapter_key", "direction") == "direction":
        return False
    components = config.get("head_selection_components") or []
    return not ("decoder_cross" in components and config.get("cross_attention_task_key") == "pair")


def read_run_scores(run_folder: Path, split: str, metric: str) -> SeedScores:
    """The group scores of a run's `{split}_results.json`, with their intervals, and the interval of their mean; the
    mean and pooled scores themselves are left to the tables, which average groups themselves."""
    results = read_results(run_folder, split)
    scores = SeedScores()
    for group, score in group_scores(results, metric, split).items():
        scores.groups[group] = score.value
        if score.interval is not None:
            scores.intervals[group] = score.interval
    mean = read_score(results, score_key(metric, split=split))
    scores.mean_interval = mean.interval if mean is not None else None
    scores.unusable = results.get(unusable_key(split))
    predictions = predictions_path(run_folder)
    if scores.unusable is None and split == "predict" and predictions.exists():  # a run from before the key
        scores.unusable = unusable_share([row["prediction"] for row in read_predictions(predictions)])
    train = read_results(run_folder, "train") if results_path(run_folder, "train").exists() else {}
    if TRAIN_LOSS_EVAL_MODE in train and TRAIN_LOSS_TRAIN_MODE in train:
        scores.mode_losses = (train[TRAIN_LOSS_EVAL_MODE], train[TRAIN_LOSS_TRAIN_MODE])
    return scores


def merge_parts(parts: dict[str, SeedScores], system: str) -> SeedScores:
    """One system's scores from its separately trained parts (a group scored by two parts is an error)."""
    if len(parts) == 1:
        return next(iter(parts.values()))
    merged = SeedScores()
    for part, scores in parts.items():
        clash = sorted(set(scores.groups) & set(merged.groups))
        if clash:
            raise ValueError(f"system {system!r}: part {part!r} scores groups {clash} another part scores too")
        merged.groups.update(scores.groups)
        merged.intervals.update(scores.intervals)
    shares = [scores.unusable for scores in parts.values() if scores.unusable is not None]
    merged.unusable = max(shares) if shares else None  # the part that learned least
    gaps = [scores.mode_losses for scores in parts.values() if scores.mode_losses is not None]
    merged.mode_losses = max(gaps, key=lambda pair: pair[0] - pair[1]) if gaps else None  # the most noise-dependent
    return merged


def read_model_config(run_folder: Path) -> dict:
    path = run_folder / "config.json"
    return json.loads(path.read_text()) if path.exists() else {}


def collect_scores(experiment: Experiment, metric: str) -> dict[str, SystemScores]:
    """Every system's scores from the runs' results files (runs without results are left out, with a warning)."""
    collected: dict[str, SystemScores] = {}
    for system in experiment.systems:
        entry = SystemScores(system)
        supported = []
        for seed in experiment.seeds:
            parts = {}
            for part in list(system.parts) or [None]:
                folder = run_dir(experiment, system, seed, part)
                path = results_path(folder, experiment.split)
                if not path.exists():
                    logger.warning("no results for %s, seed %s%s (%s)", system.name, seed,
                                   f", part {part}" if part else "", path)
                    continue
                parts[part] = read_run_scores(folder, experiment.split, metric)
                supported.append(supports_zero_shot(read_model_config(folder)))
            if parts and len(parts) == len(list(system.parts) or [None]):
                entry.seeds[seed] = merge_parts(parts, system.name)
        entry.zero_shot = system.zero_shot if system.zero_shot is not None else all(supported)
        collected[system.name] = entry
    return collected
