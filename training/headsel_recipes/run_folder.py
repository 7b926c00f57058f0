# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What an earlier training run left in `--output_dir` that a new one would take for its own.

A run that starts from step 0 in a used folder would mix the earlier run's `checkpoint-*` folders with its own
(`--average_last_n` averages the last ones by step, the Trainer's rotation keeps the highest steps, a later
`--resume_from_checkpoint last` resumes the highest) and would reuse its tokenizer instead of training one on its
own data. The recipes refuse such a folder unless the run continues it (`--resume_from_checkpoint`) or starts over
in it (`--overwrite_output_dir`, which removes those files: [`clear_earlier_run`]). A run from step 0 let into a
used folder (its tokenizer named) clears the earlier run's scores, predictions and selection log alike.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hf_headsel.analysis import SELECTION_LOG_NAME

from .environment import ENVIRONMENT_LOG_NAME
from .modeling import find_checkpoints
from .results_keys import RESULT_FILES, predictions_path, results_path
from .tokenizer import has_tokenizer

logger = logging.getLogger("headsel_recipes")

#: The names of the checkpoints `--average_last_n` averaged into the final model.
AVERAGED_CHECKPOINTS_NAME = "averaged_checkpoints.json"


def earlier_run(output_dir: str | Path, *, reads_its_tokenizer: bool, speech: bool) -> list[str]:
    """What an earlier run left in `output_dir` that a new run from step 0 would take for its own: its
    `checkpoint-*` folders, and its tokenizer where the run would load it (`reads_its_tokenizer`: no
    `--tokenizer_name` nor `--model_name_or_path` names another). Empty for an unused folder."""
    found = [path.name for path in find_checkpoints(str(output_dir))]
    if reads_its_tokenizer and has_tokenizer(str(output_dir), speech):
        found.append("tokenizer")
    return found


def clear_earlier_run(output_dir: str | Path) -> list[str]:
    """Remove what an earlier run left in `output_dir` that a run starting over there would mix with its own: the
    `checkpoint-*` folders, the selection log, the averaged checkpoints' names, the environments it ran in
    (`environment.jsonl`), the scores and predictions. Its model and tokenizer files are written over by the new run
    (which trains its own tokenizer); other files and folders are kept. Returns the names removed."""
    folder = Path(output_dir)
    removed = []
    for checkpoint in find_checkpoints(str(folder)):
        shutil.rmtree(checkpoint)
        removed.append(checkpoint.name)
    files = [folder / SELECTION_LOG_NAME, folder / AVERAGED_CHECKPOINTS_NAME, folder / ENVIRONMENT_LOG_NAME,
             predictions_path(folder), results_path(folder, "train"), *(folder / name for name in RESULT_FILES)]
    for path in files:
        if path.is_file():
            path.unlink()
            removed.append(path.name)
    if removed:
        logger.info("a new run starts in %s: removed the earlier run's %s", folder, ", ".join(removed))
    return removed


def folder_files(output_dir: str | Path) -> set[str]:
    """The names of the files directly in `output_dir` (none for a folder not made yet)."""
    folder = Path(output_dir)
    return {path.name for path in folder.iterdir() if path.is_file()} if folder.is_dir() else set()


@contextmanager
def removed_on_failure(output_dir: str | Path, names: set[str]) -> Iterator[None]:
    """Remove the files `names` of `output_dir` when the block raises: what a run wrote there before a check that
    stopped it ahead of training (its new tokenizer), which the next run in the folder would otherwise refuse as an
    earlier run's ([`earlier_run`])."""
    try:
        yield
    except BaseException:
        for name in sorted(names):
            (Path(output_dir) / name).unlink(missing_ok=True)
        if names:
            logger.info("the run stopped before training: removed the %s it wrote in %s", ", ".join(sorted(names)),
                        output_dir)
        raise

