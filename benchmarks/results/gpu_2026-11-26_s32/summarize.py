# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The tables of README.md from this folder's raw outputs (the tarballs the two device calls brought back):

    python benchmarks/results/gpu_2026-11-26_s32/summarize.py

Per finished run of `mt_runs.tgz`: the training loss every time it was logged, the test loss, BLEU, empty outputs and
the training speed; per lane of `mt_screen.tgz`: its run, the training losses it logged and the updates it reached,
read from the lane log (lanes stopped at their time limit before their runs wrote `trainer_state.json`), one row per
run the lane took.
A later GPU session's folder with tarballs of the same kinds, named:

    python benchmarks/results/gpu_2026-11-26_s32/summarize.py benchmarks/results/gpu_2026-11-27_s38 \
        --runs mt_runs.tgz --lanes s38_diagnosis.tgz
    python benchmarks/results/gpu_2026-11-26_s32/summarize.py benchmarks/results/gpu_2026-11-28_s42 \
        --runs mt_runs.tgz --lanes s42.tgz s42_frozen_no_noise.tgz
"""

from __future__ import annotations

import argparse
import json
import re
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmark_runs(root: Path) -> None:
    print("| run | training loss every 500 updates | test loss | BLEU | empty outputs | updates/s |")
    print("|---|---|---:|---:|---:|---:|")
    for run in sorted(root.glob("*/runs/*/seed*")):
        if not (run / "all_results.json").exists():
            print(f"| {run.parent.name}/{run.name} | not finished | | | | |")
            continue
        results = json.loads((run / "all_results.json").read_text())
        losses = [h["loss"] for h in json.loads((run / "trainer_state.json").read_text())["log_history"] if "loss" in h]
        predictions = [json.loads(line) for line in (run / "generated_predictions.jsonl").open()]
        empty = sum(not p["prediction"].strip() for p in predictions)
        print(f"| {run.parent.name}/{run.name} | {', '.join(f'{x:.2f}' for x in losses)} | "
              f"{results['predict_loss']:.3f} | {results['predict_bleu_pooled']:.1f} | {empty} / {len(predictions)} | "
              f"{results['train_steps_per_second']:.2f} |")


def screen_lanes(root: Path) -> None:
    print("\n| lane | run | training losses logged | updates reached |")
    print("|---|---|---|---:|")
    for log in sorted(root.glob("*lane*.txt")):
        text = log.read_text(errors="replace").replace("\r", "\n")
        starts = list(re.finditer(r"max_steps=(\d+)", text))  # the training arguments each run the lane took logs
        for start, end in zip(starts, [*starts[1:], None]):
            part = text[start.start():end.start() if end else len(text)]
            run = re.search(r"output_dir=\S*runs/([a-z0-9_]+/seed\d+)", part).group(1)
            losses = re.findall(r"\{'loss': '([0-9.]+)'", part)
            reached = re.findall(rf"(\d+)/{start.group(1)} \[", part)  # the training bar (others count examples)
            print(f"| {log.stem} | {run} | {', '.join(losses)} | {reached[-1] if reached else '?'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", type=Path, default=HERE, help="the folder holding the tarballs")
    parser.add_argument("--runs", nargs="*", default=["mt_runs.tgz"], help="tarballs of run folders")
    parser.add_argument("--lanes", nargs="*", default=["mt_screen.tgz"], help="tarballs of lane logs")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in [*options.runs, *options.lanes]:
            with tarfile.open(options.folder / name) as archive:
                archive.extractall(root / name, filter="data")
        for name in options.runs:
            benchmark_runs(root / name)
        for name in options.lanes:
            screen_lanes(root / name)


if __name__ == "__main__":
    main()
