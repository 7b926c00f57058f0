# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""When the sampling noise costs at depth (sessions 40-44): the training loss of every noise schedule minus Group
without the noise's, paired by seed, at every logged update, with the noise scale it trained at; read from the lane
logs of the lr 0.001 / warmup 400 file (the run folders under `outputs/` need not exist).

    python benchmarks/results/quality/mt_one_to_many_deep/noise_schedules.py

Writes `noise_schedules.md` and `noise_schedules.png` here.
"""

from __future__ import annotations

import argparse
import ast
import re
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOGS = "lr_0.001_warmup_400*lane*.log"
REFERENCE = "group_no_sampling_noise_ablation"
SYSTEMS = {  # run folder: label (the schedules with the noise, and the shared model for scale)
    "group": "Group, the paper's noise (1 throughout)",
    "group_noise_annealed_1_to_0": "Group, noise annealed 1 to 0",
    "group_noise_rising_0_to_1": "Group, noise rising 0 to 1",
    "shared": "Shared",
}
RUN = re.compile(r"^output_dir=\S*runs/([a-z0-9_]+)/seed(\d+)", re.MULTILINE)
LOGGING_STEPS = re.compile(r"^logging_steps=(\d+)", re.MULTILINE)
LOGGED = re.compile(r"\{'loss': [^}]*\}")  # the Trainer's log line, a dict of strings


def _float(value) -> float | None:
    return None if value is None else float(value)


def read_runs(folder: Path) -> dict[tuple[str, int], list[tuple[int, float, float | None]]]:
    """`{(system, seed): [(update, training loss, noise scale or None), ...]}` from every lane log in `folder`."""
    runs = {}
    for log in sorted(folder.glob(LOGS)):
        text = log.read_text(errors="replace")
        starts = list(RUN.finditer(text))
        for start, end in zip(starts, [*starts[1:], None]):
            part = text[start.start():end.start() if end else len(text)]
            every = int(LOGGING_STEPS.search(text, 0, start.start() + len(part)).group(1))
            entries = [ast.literal_eval(entry) for entry in LOGGED.findall(part)]
            logged = [(every * (i + 1), float(entry["loss"]), _float(entry.get("head_selection_noise_scale")))
                      for i, entry in enumerate(entries)]
            runs[(start.group(1), int(start.group(2)))] = logged
    return runs


def gaps(runs: dict, system: str) -> list[tuple[int, float, float, float | None]]:
    """`(update, mean, standard deviation, noise scale)` of `system`'s training loss minus the reference's, paired
    by seed over the seeds both have."""
    seeds = sorted(seed for name, seed in runs if name == system and (REFERENCE, seed) in runs)
    rows = []
    for index, (update, _, noise) in enumerate(runs[(system, seeds[0])]):
        differences = [runs[(system, seed)][index][1] - runs[(REFERENCE, seed)][index][1] for seed in seeds]
        rows.append((update, statistics.mean(differences), statistics.stdev(differences), noise))
    return rows


def table(curves: dict[str, list]) -> str:
    updates = [update for update, *_ in next(iter(curves.values()))]
    lines = ["Training loss minus Group without the noise's, paired by seed (mean ± std over seeds 1-5; the noise "
             "scale at that update in brackets where the run draws one). Logged with that update's noise and dropout.",
             "", "| system | " + " | ".join(str(u) for u in updates) + " |", "|---|" + "---:|" * len(updates)]
    for system, rows in curves.items():
        cells = [f"{mean:+.2f} ± {std:.2f}" + (f" ({noise:.1f})" if noise is not None else "")
                 for _, mean, std, noise in rows]
        lines.append(f"| {SYSTEMS[system]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(curves: dict[str, list], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loss_axis, noise_axis) = plt.subplots(2, 1, figsize=(7.5, 6), sharex=True,
                                                   gridspec_kw={"height_ratios": [3, 1.3]})
    for system, rows in curves.items():
        updates = [row[0] for row in rows]
        means = [row[1] for row in rows]
        spread = [row[2] for row in rows]
        line, = loss_axis.plot(updates, means, marker="o", label=SYSTEMS[system])
        loss_axis.fill_between(updates, [m - s for m, s in zip(means, spread)],
                               [m + s for m, s in zip(means, spread)], color=line.get_color(), alpha=0.15)
        if rows[0][3] is not None:
            noise_axis.plot(updates, [row[3] for row in rows], marker=".", color=line.get_color())
    loss_axis.axhline(0.0, color="black", linewidth=0.8)
    loss_axis.set_ylim(top=loss_axis.get_ylim()[1] + 0.25)  # room for the legend above the curves
    loss_axis.set_ylabel("training loss minus\nGroup without the noise")
    loss_axis.set_title("Depth on the CPU (6 + 6 layers, d_model 64), seeds 1-5: when the noise costs")
    loss_axis.legend(fontsize=8, loc="upper left", title="mean over seeds, shaded ± std", title_fontsize=8)
    noise_axis.set_ylabel("noise scale")
    noise_axis.set_xlabel("update")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=HERE, help="where the lane logs are and the outputs go")
    args = parser.parse_args(argv)
    runs = read_runs(args.folder)
    curves = {system: gaps(runs, system) for system in SYSTEMS}
    (args.folder / "noise_schedules.md").write_text(table(curves))
    plot(curves, args.folder / "noise_schedules.png")
    print(table(curves))


if __name__ == "__main__":
    main()
