# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The plain test cross-entropy of an experiment's finished runs (session 67).

    PYTHONPATH=src:training:benchmarks python benchmarks/results/quality/baselines/plain_test_loss.py \
        outputs/benchmark/st_dropout outputs/benchmark/st_dropout_plain

The benchmark files train and score with the recipes' label smoothing (epsilon 0.1): their test loss is the
cross-entropy against smoothed targets, which a flatter, less confident model lowers. Where systems differ in how much
they regularise (dropout, sampling noise), that ranking can differ from the plain cross-entropy's. Each run of
EXPERIMENT/runs/<system>/seed<n>/ is scored again by its recipe, its own flags (`run_config.json`) with
`--label_smoothing_factor 0`, no training and no generation, into OUT/runs/<system>/seed<n>/; its hypotheses
(`generated_predictions.jsonl`), `environment.jsonl` and `train_results.json` are copied beside, so that
`benchmarks/quality_tables.py OUT` gives the same tables with the plain loss (and, with `--train_loss`, the training
examples' plain loss beside it). Runs already scored in OUT are skipped (their records copied where missing).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from headsel_recipes import run
from headsel_recipes.arguments import RecipeTask, parse_arguments
from headsel_recipes.data import load_splits
from headsel_recipes.environment import ENVIRONMENT_LOG_NAME, recorded_recipe
from headsel_recipes.recipe import resolve_tasks
from headsel_recipes.results_keys import RUN_CONFIG_FILE, predictions_path, results_path
from headsel_recipes.tasks import TASKS
from quality_tables import is_finished

# the flags of a scoring run: no training, the test split's loss only, without label smoothing
PLAIN_SCORING = {"do_train": False, "do_eval": False, "do_predict": True, "predict_with_generate": False,
                 "label_smoothing_factor": 0.0}


def training_tasks(run_folder: Path, task: RecipeTask) -> dict[str, list[str]]:
    """The task lists a shared-baseline run resolved as the recipe does (its flags, else its training data: a stock
    model keeps none; without training data a scoring run must be given them, and its tags follow them)."""
    model_args, head_args, data_args, _ = parse_arguments([str(run_folder / RUN_CONFIG_FILE)])
    raw = load_splits(task, data_args, ["train"], head_args.task_type or "lang", model_args.cache_dir)
    encoder_tasks, decoder_tasks, _ = resolve_tasks(task, head_args, raw, None, None)
    return {"encoder_tasks": encoder_tasks, "decoder_tasks": decoder_tasks}


def score_plain(run_folder: Path, out: Path) -> None:
    """Score `run_folder`'s model on its test split with the plain cross-entropy into `out`."""
    flags = json.loads((run_folder / RUN_CONFIG_FILE).read_text())
    task = TASKS[recorded_recipe(run_folder)]
    if flags.get("shared_baseline"):
        flags.update(training_tasks(run_folder, task))
    flags.pop("resume_from_checkpoint", None)
    flags.update(PLAIN_SCORING, model_name_or_path=str(run_folder), output_dir=str(out))
    out.mkdir(parents=True, exist_ok=True)
    config = out / "plain_scoring_config.json"
    config.write_text(json.dumps(flags, indent=2))
    run(task, [str(config)])
    copy_records(run_folder, out)


def copy_records(run_folder: Path, out: Path) -> None:
    """The training run's hypotheses, environment record and training results (where it has them) beside its plain
    scores in `out`, for the tables."""
    shutil.copy(predictions_path(run_folder), predictions_path(out))
    for record in (run_folder / ENVIRONMENT_LOG_NAME, results_path(run_folder, "train")):
        if record.exists():
            shutil.copy(record, out / record.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", type=Path, help="the experiment output folder (its runs/<system>/seed<n>/)")
    parser.add_argument("out", type=Path, help="where the plain scores go (OUT/runs/<system>/seed<n>/)")
    args = parser.parse_args(argv)
    runs = sorted(folder for folder in args.experiment.glob("runs/*/seed*") if is_finished(folder))
    if not runs:
        raise SystemExit(f"{args.experiment}: no finished run under runs/<system>/seed<n>/")
    for run_folder in runs:
        out = args.out / run_folder.relative_to(args.experiment)
        if results_path(out, "predict").exists():
            copy_records(run_folder, out)
            continue
        print(f"plain test loss: {run_folder}", file=sys.stderr)
        score_plain(run_folder, out)


if __name__ == "__main__":
    main()
