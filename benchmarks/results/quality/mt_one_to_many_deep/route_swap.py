# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Does a trained run use its own task's heads (MT: session 62; speech: session 66)? For every run under a folder whose
model routes by task: the test cross-entropy (teacher-forced, evaluation mode, every test example, weighted by target
token) with each example routed to its own task, then to the task `shift` places on in the task list, for every
shift: a derangement each, nothing else changed (the tags and tokens stay the example's own). Per-task heads (or
adapters) that are interchangeable lose nothing when misrouted; per-task ones that the model relies on do. Plain
cross-entropy: the experiments' test-loss tables are label-smoothed (epsilon 0.1, the recipes' default) and read
0.3-0.5 nats higher.

What is shifted: each side with several tasks alone (MT: the source languages of many-to-one, the target languages
of one-to-many), and both sides together where they hold the same tasks (multilingual ASR: the spoken language is
the task of both). A side no layer reads (the encoder of a model whose cross-attention alone is keyed, by the target)
loses nothing when shifted: a control. MT batches are the test files' pairs read by one side's task (`collapse.py`);
speech batches, the run's test split as its recipe prepares it (features, tags and both sides' task ids).

    PYTHONPATH=training:benchmarks python benchmarks/results/quality/mt_one_to_many_deep/route_swap.py \
        outputs/benchmark/mt_many_to_one_deep

Prints one row per run and shifted side (its own route, the mean over the shifts, their spread) and, per system and
shifted side, the misrouting's cost over seeds. Runs without task routing (the shared model) are listed as such.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from torch.nn.functional import cross_entropy
from transformers import Speech2TextFeatureExtractor

from collapse import batch, is_speech, load
from hf_headsel.configuration_head_selection import SIDES
from headsel_recipes.arguments import parse_arguments
from headsel_recipes.collator import Seq2SeqCollator
from headsel_recipes.data import load_splits
from headsel_recipes.environment import recorded_recipe
from headsel_recipes.preprocess import prepare_split
from headsel_recipes.recipe import numpy_view, prepare_context
from headsel_recipes.results_keys import RUN_CONFIG_FILE
from headsel_recipes.tasks import TASKS
from quality_tables import mean_and_spread

SPEECH_BATCH_SIZE = 64  # the experiments' per_device_eval_batch_size


def shifted_sides(config) -> list[tuple[str, ...]]:
    """What a shift can misroute: each side with more than one task alone, then both sides together where they hold
    the same tasks (an example's task is then one task, read by both sides). Empty: no task routing."""
    routed = [side for side in SIDES if len(getattr(config, f"{side}_tasks", None) or ()) > 1]
    shifts = [(side,) for side in routed]
    if len(routed) == 2 and list(config.encoder_tasks) == list(config.decoder_tasks):
        shifts.append(SIDES)
    return shifts


def side_label(sides: tuple[str, ...]) -> str:
    return " and ".join(sides)


@torch.no_grad()
def summed_cross_entropy(model, inputs: dict[str, torch.Tensor]) -> tuple[float, int]:
    """The cross-entropy summed over the labelled target tokens, and their count (no KL term, no loss scaling)."""
    logits = model(**inputs).logits
    labels = inputs["labels"]
    total = cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum")
    return total.item(), int((labels != -100).sum())


def routed_losses(model, batches: list[dict[str, torch.Tensor]], sides: tuple[str, ...]) -> dict[int, float]:
    """`{shift: cross-entropy per target token over every batch}`, every example of the batches (model keywords with
    both sides' task ids, each example's own) routed on each of `sides` to the task `shift` places on in the side's
    task list (0: its own). Sides shifted together must hold the same tasks; every task of theirs must have
    examples, or the mean over the shifts would weigh the tasks unevenly."""
    tasks = list(getattr(model.config, f"{sides[0]}_tasks"))
    if any(list(getattr(model.config, f"{side}_tasks")) != tasks for side in sides):
        raise ValueError(f"the sides {list(sides)} hold different tasks: only sides with the same tasks are shifted "
                         "together")
    for side in sides:
        present = {int(index) for inputs in batches for index in inputs[f"{side}_task_ids"]}
        missing = [task for index, task in enumerate(tasks) if index not in present]
        if missing:
            raise ValueError(f"the batches hold no example of the {side} task(s) {missing}: every task is needed")
    model.eval()
    losses = {}
    for shift in range(len(tasks)):
        total = count = 0
        for inputs in batches:
            routed = dict(inputs)
            for side in sides:
                routed[f"{side}_task_ids"] = (inputs[f"{side}_task_ids"] + shift) % len(tasks)
            summed, tokens = summed_cross_entropy(model, routed)
            total, count = total + summed, count + tokens
        losses[shift] = total / count
    return losses


def text_batches(run: Path, tokenizer, model, sides: list[tuple[str, ...]]) -> list[dict[str, torch.Tensor]]:
    """An MT run's test pairs, one batch per task of its one routed side (`collapse.batch` reads the test files by
    that side's language). MT routed on both sides is refused: its test files are not read by pairs here."""
    if len(sides) > 1 or len(sides[0]) > 1:
        raise ValueError(f"MT routed on both sides ({[side_label(shift) for shift in sides]}): route_swap reads MT "
                         "test files by the languages of one side only")
    return [batch(run, tokenizer, model, task, pairs=None) for task in getattr(model.config, f"{sides[0][0]}_tasks")]


def speech_batches(run: Path, tokenizer, model) -> list[dict[str, torch.Tensor]]:
    """A speech run's test split as its recipe prepared it (the run's flags, `tokenizer` and feature extractor: the same
    features, tags and task ids of both sides), in batches of `SPEECH_BATCH_SIZE` examples; the examples its
    preparation skips (too long, unreadable) are counted on stderr. Batched by length (each example's loss is its own:
    the order changes the sums by rounding only)."""
    task = TASKS[recorded_recipe(run)]
    model_args, head_args, data_args, _ = parse_arguments([str(run / RUN_CONFIG_FILE)])
    config = model.config
    raw = load_splits(task, data_args, ["test"], config.task_type, model_args.cache_dir)
    context = prepare_context(task, config.task_type, config.encoder_tasks, config.decoder_tasks, tokenizer,
                              Speech2TextFeatureExtractor.from_pretrained(run), model, data_args, raw)
    prepared, report = prepare_split(raw["test"], "test", context)
    print(f"{run}: {report.summary()}", file=sys.stderr)
    view = numpy_view(prepared, speech=True)
    # batched by length: the encoder's attention costs the square of the padded length
    examples = sorted((view[index] for index in range(len(view))), key=lambda example: len(example["input_features"]))
    collate = Seq2SeqCollator(speech=True, pad_token_id=tokenizer.pad_token_id)
    return [collate(examples[start:start + SPEECH_BATCH_SIZE]) for start in range(0, len(examples), SPEECH_BATCH_SIZE)]


def run_rows(run: Path) -> list[tuple[str, str | None, float | None]]:
    """The run's table rows, one per shifted side: its cells, the side (`None`: the run has no task routing) and the
    misrouting cost (the mean over the shifts minus its own route)."""
    model, tokenizer = load(run)
    sides = shifted_sides(model.config)
    if not sides:
        return [("no task routing | – | – | – |", None, None)]
    batches = speech_batches(run, tokenizer, model) if is_speech(model) else text_batches(run, tokenizer, model, sides)
    rows = []
    for shift_sides in sides:
        losses = routed_losses(model, batches, shift_sides)
        shifted = [loss for shift, loss in losses.items() if shift]
        misrouted = statistics.mean(shifted)
        label = side_label(shift_sides)
        rows.append((f"{label} ({len(losses)} tasks) | {losses[0]:.3f} | {misrouted:.3f} "
                     f"[{min(shifted):.3f}, {max(shifted):.3f}] | {misrouted - losses[0]:+.3f} |", label,
                     misrouted - losses[0]))
    return rows


def main(argv: list[str] | None = None) -> dict[tuple[str, str], list[float]]:
    """Print the table of every run under the folder, then the cost per system and shifted side; returns
    `{(system, shifted side): [cost per seed]}`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="an experiment's output folder (its runs/<system>/seed*/)")
    arguments = parser.parse_args(argv)
    runs = sorted(path.parent for path in arguments.runs.glob("runs/*/seed*/config.json"))
    if not runs:
        parser.error(f"no runs/<system>/seed*/config.json under {arguments.runs}")
    print("| run | routed side | test cross-entropy, own route | another task's route: mean over the shifts "
          "[lowest, highest] | misrouting cost |\n|---|---|---:|---:|---:|")
    costs: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        for cells, side, cost in run_rows(run):
            print(f"| {run.relative_to(arguments.runs)} | {cells}")
            if cost is not None:
                costs.setdefault((run.parent.name, side), []).append(cost)
    print("\n| system | shifted side | seeds | misrouting cost, mean ± std over seeds | seeds where misrouting costs |"
          "\n|---|---|---:|---:|---:|")
    for (system, side), values in costs.items():
        mean, spread = mean_and_spread(values)
        print(f"| {system} | {side} | {len(values)} | {mean:+.3f} ± {spread:.3f} | "
              f"{sum(value > 0 for value in values)} of {len(values)} |")
    return costs


if __name__ == "__main__":
    main()
