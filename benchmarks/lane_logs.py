# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Test scores of an experiment's runs read from its lane logs, for experiments whose run folders are not all kept
(an experiment's parts run in different sessions; the run folders of older sessions deleted): the lane logs the
record scripts copy beside their YAML files are tracked, the run folders are not.

Every run a lane log trained is read from its `output_dir=.../runs/<system>/seed<k>` line and its test scores, as
the recipes print them (rounded to four decimals): `predict_loss`, and `predict_unusable` where printed (runs before
session 32 have none); a run without a test loss (stopped) is left out. A system and seed found twice with
different scores is an error, as its pairs would be ambiguous; found twice with the same scores (a run trained again
that reproduced), it is read once.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

RUN = re.compile(r"^output_dir=\S*runs/([a-z0-9_.]+)/seed(\d+),?$", re.MULTILINE)
SCORES = {"loss": re.compile(r"^\s*predict_loss\s*=\s*([0-9.]+)$", re.MULTILINE),
          "unusable": re.compile(r"^\s*predict_unusable\s*=\s*([0-9.]+)$", re.MULTILINE)}


def matching_logs(patterns: list[str]) -> list[Path]:
    """The lane logs the files or glob patterns name, sorted, each once."""
    return sorted({Path(path) for pattern in patterns for path in glob.glob(pattern)})


def read_scores(logs: list[Path]) -> dict[tuple[str, int], dict[str, float]]:
    """`{(system, seed): {"loss": test loss, "unusable": percent of unusable hypotheses}}` of every finished run
    in `logs` (`"unusable"` only where the log has it)."""
    scores: dict[tuple[str, int], dict[str, float]] = {}
    where: dict[tuple[str, int], Path] = {}
    for log in logs:
        text = log.read_text(errors="replace")
        starts = list(RUN.finditer(text))
        for start, end in zip(starts, [*starts[1:], None]):
            part = text[start.start():end.start() if end else len(text)]
            found = {key: match for key, pattern in SCORES.items() if (match := pattern.search(part))}
            if "loss" not in found:
                continue
            run = (start.group(1), int(start.group(2)))
            run_scores = {"loss": float(found["loss"].group(1))}
            if "unusable" in found:
                run_scores["unusable"] = 100 * float(found["unusable"].group(1))
            if run in scores and scores[run] != run_scores:
                raise ValueError(f"{run[0]} seed {run[1]} is in {where[run]} and in {log} with other scores "
                                 f"({scores[run]} and {run_scores}): one run per system and seed, or its pairs would "
                                 "be ambiguous")
            scores[run] = run_scores
            where.setdefault(run, log)
    return scores
