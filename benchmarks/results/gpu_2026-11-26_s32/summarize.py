# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The tables of README.md from this folder's raw outputs (the tarballs the two device calls brought back):

    python benchmarks/results/gpu_2026-11-26_s32/summarize.py

Per run of `mt_runs.tgz`: the training loss logged every 500 updates, the test loss, BLEU, empty outputs and the
training speed; per recipe of `mt_screen.tgz`: the training loss logged every 100 updates, read from the lane logs
(five of the six lanes were stopped at their time limit before their runs wrote `trainer_state.json`).
"""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmark_runs(root: Path) -> None:
    print("| run | training loss every 500 updates | test loss | BLEU | empty outputs | updates/s |")
    print("|---|---|---:|---:|---:|---:|")
    for run in sorted((root / "mt_one_to_many_2000_updates" / "runs").glob("*/seed*")):
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
    print("\n| recipe | training loss every 100 updates | updates reached |")
    print("|---|---|---:|")
    for log in sorted(root.glob("lane*.txt")):
        text = log.read_text(errors="replace").replace("\r", "\n")
        run = re.search(r"runs/([a-z0-9_]+)/seed1", text).group(1)
        losses = re.findall(r"\{'loss': '([0-9.]+)'", text)
        reached = re.findall(r"(\d+)/1000 \[", text)
        print(f"| {run} | {', '.join(losses)} | {reached[-1] if reached else '?'} |")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in ("mt_runs.tgz", "mt_screen.tgz"):
            with tarfile.open(HERE / name) as archive:
                archive.extractall(root / name, filter="data")
        benchmark_runs(root / "mt_runs.tgz")
        screen_lanes(root / "mt_screen.tgz")


if __name__ == "__main__":
    main()
