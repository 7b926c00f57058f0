# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Supplementary quality tables of finished experiments: test cross-entropy and a character-level score.

    python benchmarks/quality_tables.py outputs/benchmark/mt_one_to_many outputs/benchmark/asr_multilingual [...]

The runner's tables (`training/run_experiment.py`) hold the papers' metrics, WER and BLEU. Early in training, while
hypotheses are mostly wrong words, those sit near their floor (WER >= 100, BLEU < 1) and barely order the systems.
Two finer measures do, from what every run already wrote:

* the test loss (`predict_loss` in `predict_results.json`: nats per target token; plain cross-entropy when label
  smoothing and the KL weight are 0, as in the benchmark files);
* chrF (sacrebleu's character n-gram F-score, for BLEU experiments) or CER (character error rate in percent after
  the WER normalisation, for WER experiments), computed from `generated_predictions.jsonl` per task and averaged
  over the tasks like the runner's AVG column;
* with `--train_loss`, the plain cross-entropy of a fixed sample of training examples in evaluation mode
  (`train_loss_eval_mode` in `train_results.json`, which a recipe run writes after training), beside the test loss:
  how far the test loss is from what the model reached on its training data (a memorising model: far).

Cells: mean ± sample standard deviation over the finished runs in `runs/<system>/seed*/` ([`is_finished`], which
`quality_plot.py` pairs seeds by too). With `--paired_with SYSTEM` (a run folder name, e.g. `shared`) a second table
gives every other system minus that one, seed by seed over the seeds both finished, then mean ± std of the
differences (the loss to three decimals: the systems of one experiment often differ by hundredths of a nat; the
unusable share in percentage points). Where the runs trained in more than one environment (their
`environment.jsonl`: code, library versions, CPU), the supplementary table names them below, as the runner's report
does: a seeded run repeats bit for bit only in one.

    python benchmarks/quality_tables.py outputs/benchmark/mt_why --paired_with shared

`--pair SYSTEM REFERENCE` (repeatable) gives chosen pairs instead, each system minus its own reference: two systems
compared at each value of a setting both were run at.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

import jiwer

from headsel_recipes.environment import recorded_recipe
from headsel_recipes.experiment.environments import environments_note
from headsel_recipes.metrics import corpus_chrf, normalize_for_wer, rows_by_group, unusable_share
from headsel_recipes.results_keys import (TRAIN_LOSS_EVAL_MODE, UNUSABLE, loss_key, predictions_path,
                                          read_predictions, read_results, results_path, score_key)
from headsel_recipes.tasks import TASKS

# the keys of a run's scores that are not its tasks' character scores
NOT_TASKS = {"loss", "AVG", UNUSABLE, TRAIN_LOSS_EVAL_MODE}


def character_score(rows: list[dict], metric: str) -> dict[str, float]:
    """`{task: score}` (and `"AVG"`, their mean) of one run's predictions: chrF, or CER in percent."""
    scores = {}
    for task, selected in rows_by_group(rows).items():
        if metric == "chrF":
            scores[task] = corpus_chrf(selected)
        else:
            scores[task] = 100 * jiwer.cer([normalize_for_wer(row["reference"]) for row in selected],
                                           [normalize_for_wer(row["prediction"]) for row in selected])
    scores["AVG"] = statistics.mean(scores.values())
    return scores


def is_finished(run_folder: Path) -> bool:
    """Whether a run finished: it wrote its test scores (`predict_results.json`) and its hypotheses
    (`generated_predictions.jsonl`, at least one). The one definition: these tables and `quality_plot.py` pair the
    same seeds by it."""
    predictions = predictions_path(run_folder)
    if not (results_path(run_folder, "predict").exists() and predictions.exists()):
        return False
    with predictions.open(encoding="utf-8") as lines:  # an empty file: a run stopped while writing, nothing to score
        return any(line.strip() for line in lines)


def run_scores(run_folder: Path) -> tuple[str, dict[str, float]] | None:
    """The character metric of one finished run (`"chrF"` or `"CER"`) and its scores `{"loss": ..., "AVG": ...,
    task: ..., "unusable": percent of empty or looping hypotheses}`, and `"train_loss_eval_mode"` where the run
    recorded it (`train_results.json`); `None` while the run is not finished."""
    if not is_finished(run_folder):
        return None
    metrics = read_results(run_folder, "predict")
    rows = read_predictions(predictions_path(run_folder))
    metric = score_name(metrics, run_folder)
    trained = results_path(run_folder, "train")
    train_loss = read_results(run_folder, "train").get(TRAIN_LOSS_EVAL_MODE) if trained.exists() else None
    return metric, {"loss": metrics[loss_key("predict")], **character_score(rows, metric),
                    UNUSABLE: 100 * unusable_share([row["prediction"] for row in rows]),
                    **({TRAIN_LOSS_EVAL_MODE: train_loss} if train_loss is not None else {})}


def score_name(predict_metrics: dict, run_folder: Path) -> str:
    """CER for an experiment scored by WER, chrF for one scored by BLEU; a run scored without generation (neither in
    its results: `plain_test_loss.py`'s) by the metric of the recipe its `environment.jsonl` names last."""
    if score_key("wer", split="predict") in predict_metrics:
        return "CER"
    if score_key("bleu", split="predict") in predict_metrics:
        return "chrF"
    return "CER" if TASKS[recorded_recipe(run_folder)].metric == "wer" else "chrF"


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def mean_std(values: list[float], digits: int) -> str:
    """`"mean ± std"` of `values` (sample standard deviation, 0 for a single value), to `digits` decimals."""
    mean, spread = mean_and_spread(values)
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def mean_std_of(runs: list[dict[str, float]], key: str, digits: int) -> str:
    """`mean_std` of `key` over the runs that have it; "–" where none does."""
    values = [run[key] for run in runs if key in run]
    return mean_std(values, digits) if values else "–"


def paired_cells(values: list[float], reference: list[float], digits: int, higher_is_better: bool) -> tuple[str, str]:
    """The paired comparison of two systems' scores, listed seed by seed in the same order: mean ± std of the
    differences, and `"k of n"`, the seeds where the first system is strictly ahead."""
    differences = [value - base for value, base in zip(values, reference, strict=True)]
    ahead = sum(difference > 0 if higher_is_better else difference < 0 for difference in differences)
    return mean_std(differences, digits), f"{ahead} of {len(differences)}"


def finished_runs(experiment_folder: Path) -> tuple[str, dict[str, dict[str, dict[str, float]]]]:
    """The experiment's character metric and `{system folder: {seed folder: scores}}` of its finished runs."""
    systems, metrics = {}, set()
    runs = experiment_folder / "runs"
    # no runs/ at all (not an experiment folder, or nothing started yet) gets the "no finished run" error below
    system_folders = sorted(folder for folder in runs.iterdir() if folder.is_dir()) if runs.is_dir() else []
    for system_folder in system_folders:
        finished = {seed.name: scored for seed in sorted(system_folder.glob("seed*")) if (scored := run_scores(seed))}
        metrics.update(metric for metric, _ in finished.values())
        if finished:
            systems[system_folder.name] = {seed: scores for seed, (_, scores) in finished.items()}
    if not systems:
        raise ValueError(f"{experiment_folder}: no finished run (runs/<system>/seed*/ with predict_results.json and "
                         "a non-empty generated_predictions.jsonl)")
    if len(metrics) > 1:
        raise ValueError(f"{experiment_folder}: runs scored by both WER and BLEU; one experiment has one metric")
    (metric,) = metrics
    return metric, systems


def supplementary_table(experiment_folder: Path, train_loss: bool = False) -> str:
    """A Markdown table: one row per system folder under `experiment_folder/runs`; with `train_loss`, a column of
    the training examples' plain cross-entropy in evaluation mode after the test loss (over the runs that recorded
    it, "–" where none did)."""
    metric, by_seed = finished_runs(experiment_folder)
    systems = {name: list(runs.values()) for name, runs in by_seed.items()}
    tasks = sorted({key for runs in systems.values() for run in runs for key in run} - NOT_TASKS)
    arrow = "↓" if metric == "CER" else "↑"
    losses = [("loss", "test loss")] + [(TRAIN_LOSS_EVAL_MODE, "train loss (eval mode)")] * train_loss
    columns = [f"{metric} AVG", *tasks, "unusable %"]
    lines = [f"**{experiment_folder.name}**: test loss (nats per token ↓) and {metric} {arrow}, mean ± std over "
             "seeds; unusable: % of the hypotheses empty or looping ↓ (`headsel_recipes.metrics.is_unusable`)", "",
             "| System (run folder) | seeds | " + " | ".join([title for _, title in losses] + columns) + " |",
             "|---|---:|" + "---:|" * (len(losses) + len(columns))]
    for name, runs in systems.items():
        cells = [mean_std_of(runs, key, 2) for key, _ in losses]
        cells += [mean_std_of(runs, key, 1) for key in ("AVG", *tasks, UNUSABLE)]
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")
    runs_folder = experiment_folder / "runs"
    lines += environments_note([(f"{name} ({seed})", runs_folder / name / seed) for name, seeds in by_seed.items()
                                for seed in seeds])
    return "\n".join(lines)


def paired_table(experiment_folder: Path, reference: str) -> str:
    """A Markdown table of every system minus `reference` (a system folder), paired seed by seed: test loss, the
    character metric's average and the share of unusable hypotheses (percentage points), mean ± std of the
    differences and how many seeds favour the system."""
    metric, systems = finished_runs(experiment_folder)
    check_systems(experiment_folder, systems, [reference], "--paired_with")
    title = f"**{experiment_folder.name}**: each system minus `{reference}`"
    return differences_table(title, metric, systems, [(name, reference) for name in systems if name != reference],
                             "System (run folder)", lambda name, _: name)


def pairs_table(experiment_folder: Path, pairs: list[tuple[str, str]]) -> str:
    """`paired_table`'s columns for chosen pairs: each `(system, reference)` (system folders) one row, the system
    minus its own reference, seed by seed (e.g. two systems compared at each value of a setting both were run at)."""
    metric, systems = finished_runs(experiment_folder)
    check_systems(experiment_folder, systems, [name for pair in pairs for name in pair], "--pair")
    return differences_table(f"**{experiment_folder.name}**: each system minus its reference", metric, systems, pairs,
                             "System minus reference (run folders)", lambda name, reference: f"{name} − {reference}")


def check_systems(experiment_folder: Path, systems: dict, names: list[str], option: str) -> None:
    """A `ValueError` naming `option` and the systems there are, unless every one of `names` has finished runs."""
    for name in names:
        if name not in systems:
            raise ValueError(f"{experiment_folder}: no finished run of {option} {name!r}; the systems with finished "
                             f"runs are {sorted(systems)}")


def differences_table(title: str, metric: str, systems: dict[str, dict[str, dict[str, float]]],
                      pairs: list[tuple[str, str]], first_column: str, label: Callable[[str, str], str]) -> str:
    """The rows of `pairs` (`(system, reference)`, labelled `label(system, reference)`) over the seeds both
    finished: mean ± std of the differences of the test loss, the character metric and the unusable share, and how
    many seeds favour the system; a pair without a common seed is left out."""
    higher_is_better = {"loss": False, "AVG": metric != "CER", UNUSABLE: False}
    lines = [f"{title}, paired by seed (mean ± std of the differences; *ahead* counts the seeds where the system is "
             "better)", "",
             f"| {first_column} | seeds | test loss | ahead | {metric} AVG | ahead | unusable % | ahead |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, reference in pairs:
        runs, references = systems[name], systems[reference]
        seeds = sorted(set(runs) & set(references))
        if not seeds:
            continue
        cells = [cell for key, digits in (("loss", 3), ("AVG", 2), (UNUSABLE, 1)) for cell in paired_cells(
            [runs[seed][key] for seed in seeds], [references[seed][key] for seed in seeds], digits,
            higher_is_better[key])]
        lines.append(f"| {label(name, reference)} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    """Print the supplementary table of every experiment folder given (and its paired table with `--paired_with`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="+", type=Path, help="experiment output folders")
    parser.add_argument("--paired_with", metavar="SYSTEM",
                        help="also print every system minus this one (a run folder name), paired by seed")
    parser.add_argument("--pair", nargs=2, action="append", metavar=("SYSTEM", "REFERENCE"),
                        help="also print SYSTEM minus REFERENCE (run folder names), paired by seed; repeat it for "
                             "more pairs, one table")
    parser.add_argument("--train_loss", action="store_true",
                        help="a column of the training examples' plain cross-entropy in evaluation mode")
    options = parser.parse_args(args)
    for folder in options.experiments:
        print(supplementary_table(folder, options.train_loss), end="\n\n")
        if options.paired_with:
            print(paired_table(folder, options.paired_with), end="\n\n")
        if options.pair:
            print(pairs_table(folder, [tuple(pair) for pair in options.pair]), end="\n\n")


if __name__ == "__main__":
    main()
