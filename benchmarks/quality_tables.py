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
  over the tasks like the runner's AVG column.

Cells: mean ± sample standard deviation over the finished runs in `runs/<system>/seed*/` ([`is_finished`], which
`quality_plot.py` pairs seeds by too). With `--paired_with SYSTEM` (a run folder name, e.g. `shared`) a second table
gives every other system minus that one, seed by seed over the seeds both finished, then mean ± std of the
differences (the loss to three decimals: the systems of one experiment often differ by hundredths of a nat; the
unusable share in percentage points). Where the runs trained in more than one environment (their
`environment.jsonl`: code, library versions, CPU), the supplementary table names them below, as the runner's report
does: a seeded run repeats bit for bit only in one.

    python benchmarks/quality_tables.py outputs/benchmark/mt_why --paired_with shared
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import jiwer

from headsel_recipes.experiment.environments import environments_note
from headsel_recipes.metrics import corpus_chrf, normalize_for_wer, rows_by_group, unusable_share
from headsel_recipes.results_keys import (UNUSABLE, loss_key, predictions_path, read_predictions, read_results,
                                          results_path, score_key)


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
    task: ..., "unusable": percent of empty or looping hypotheses}`; `None` while the run is not finished."""
    if not is_finished(run_folder):
        return None
    metrics = read_results(run_folder, "predict")
    rows = read_predictions(predictions_path(run_folder))
    metric = score_name(metrics)
    return metric, {"loss": metrics[loss_key("predict")], **character_score(rows, metric),
                    UNUSABLE: 100 * unusable_share([row["prediction"] for row in rows])}


def score_name(predict_metrics: dict) -> str:
    """CER for an experiment scored by WER, chrF for one scored by BLEU."""
    return "CER" if score_key("wer", split="predict") in predict_metrics else "chrF"


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def mean_std(values: list[float], digits: int) -> str:
    """`"mean ± std"` of `values` (sample standard deviation, 0 for a single value), to `digits` decimals."""
    mean, spread = mean_and_spread(values)
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


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


def supplementary_table(experiment_folder: Path) -> str:
    """A Markdown table: one row per system folder under `experiment_folder/runs`."""
    metric, by_seed = finished_runs(experiment_folder)
    systems = {name: list(runs.values()) for name, runs in by_seed.items()}
    tasks = sorted({key for runs in systems.values() for run in runs for key in run} - {"loss", "AVG", UNUSABLE})
    arrow = "↓" if metric == "CER" else "↑"
    columns = [f"{metric} AVG", *tasks, "unusable %"]
    lines = [f"**{experiment_folder.name}**: test loss (nats per token ↓) and {metric} {arrow}, mean ± std over "
             "seeds; unusable: % of the hypotheses empty or looping ↓ (`headsel_recipes.metrics.is_unusable`)", "",
             "| System (run folder) | seeds | test loss | " + " | ".join(columns) + " |",
             "|---|---:|---:|" + "---:|" * len(columns)]
    for name, runs in systems.items():
        cells = [mean_std([run["loss"] for run in runs], 2)]
        cells += [mean_std([run[key] for run in runs if key in run], 1) if any(key in run for run in runs) else "–"
                  for key in ("AVG", *tasks, UNUSABLE)]
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
    if reference not in systems:
        raise ValueError(f"{experiment_folder}: no finished run of --paired_with {reference!r}; the systems with "
                         f"finished runs are {sorted(systems)}")
    higher_is_better = {"loss": False, "AVG": metric != "CER", UNUSABLE: False}
    lines = [f"**{experiment_folder.name}**: each system minus `{reference}`, paired by seed (mean ± std of the "
             "differences; *ahead* counts the seeds where the system is better)", "",
             f"| System (run folder) | seeds | test loss | ahead | {metric} AVG | ahead | unusable % | ahead |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, runs in systems.items():
        seeds = sorted(set(runs) & set(systems[reference]))
        if name == reference or not seeds:
            continue
        cells = [cell for key, digits in (("loss", 3), ("AVG", 2), (UNUSABLE, 1)) for cell in paired_cells(
            [runs[seed][key] for seed in seeds], [systems[reference][seed][key] for seed in seeds], digits,
            higher_is_better[key])]
        lines.append(f"| {name} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args: list[str] | None = None) -> None:
    """Print the supplementary table of every experiment folder given (and its paired table with `--paired_with`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="+", type=Path, help="experiment output folders")
    parser.add_argument("--paired_with", metavar="SYSTEM",
                        help="also print every system minus this one (a run folder name), paired by seed")
    options = parser.parse_args(args)
    for folder in options.experiments:
        print(supplementary_table(folder), end="\n\n")
        if options.paired_with:
            print(paired_table(folder, options.paired_with), end="\n\n")


if __name__ == "__main__":
    main()
