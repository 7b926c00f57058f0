# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""One picture of what head selection costs against the stock model: the ratios of one or more `overhead.py --json`
runs, a row per measurement, with the targets.

    python benchmarks/cost_plot.py \\
        benchmarks/results/issue15/session44/overhead_cpu_marian_all_1thread_20rounds.json \\
        benchmarks/results/issue15/session44/overhead_cpu_speech_to_text_all_1thread_20rounds.json \\
        --output benchmarks/results/issue15/session44/cost_against_stock.png

Each run is a colour: a filled dot is head selection / stock, the paired ratio (the median of the per-round ratios)
with its 95 % bootstrap interval, or the ratio of medians for a run without paired ratios; a hollow dot is the
all-candidates reference (every `H'` head computed, the unselected dropped, as the fairseq reference does) on the
same footing. A black bar marks a measurement's target. The figures are printed as a Markdown table too.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from overhead import SYSTEMS  # beside this script: its folder is on the path

_, HEAD_SELECTION, ALL_CANDIDATES = SYSTEMS  # the ratios' systems, each over the first, the stock model


@dataclass(frozen=True)
class Ratio:
    """A system's time over the stock model's: `value`, and its 95 % interval where the run paired its rounds."""

    value: float
    low: float | None = None
    high: float | None = None


@dataclass
class CostRun:
    """One `overhead.py --json` file: its label, and per measurement the target and each system's [`Ratio`]."""

    label: str
    targets: dict[str, float | None]
    ratios: dict[str, dict[str, Ratio]]  # {measurement: {system: ratio}}


def ratio_of(result: dict, system: str) -> Ratio | None:
    """The paired ratio of `system` in one result of the JSON, else its ratio of medians, else `None` (not timed)."""
    paired = result.get("ratio_paired", {}).get(system)
    if paired is not None:
        return Ratio(paired["median"], paired["low"], paired["high"])
    median = result.get("ratio_median", {}).get(system)
    return None if median is None else Ratio(median)


def default_label(payload: dict) -> str:
    """`family, device dtype, N threads` from the run's own record."""
    config, environment = payload["config"], payload["environment"]
    threads = environment["threads"]
    return (f"{config['family']}, {environment['device']} {environment['dtype']}, "
            f"{threads} thread{'s' if threads != 1 else ''}")


def read_run(path: Path, label: str | None = None) -> CostRun:
    """A [`CostRun`] from an `overhead.py --json` file; a clear error for any other file."""
    try:
        payload = json.loads(path.read_text())
        results = payload["results"]
        label = label or default_label(payload)
        targets = {result["name"]: result["target"] for result in results}
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not an `overhead.py --json` output ({type(error).__name__}: {error})") from error
    ratios = {result["name"]: {system: ratio for system in (HEAD_SELECTION, ALL_CANDIDATES)
                               if (ratio := ratio_of(result, system)) is not None} for result in results}
    return CostRun(label, targets, ratios)


def measurement_names(runs: list[CostRun]) -> list[str]:
    """Every measurement of the runs, in the order the runs first give them."""
    return list(dict.fromkeys(name for run in runs for name in run.ratios))


def target_of(runs: list[CostRun], name: str) -> float | None:
    """The measurement's target; a clear error where two runs state different ones (two benchmark versions)."""
    targets = {run.targets[name] for run in runs if name in run.targets} - {None}
    if len(targets) > 1:
        raise ValueError(f"the runs state different targets for {name!r}: {sorted(targets)}")
    return next(iter(targets), None)


def format_ratio(ratio: Ratio | None) -> str:
    """`1.05 [1.02, 1.08]`, `1.05` without an interval, `–` for a system the run did not time."""
    if ratio is None:
        return "–"
    interval = "" if ratio.low is None else f" [{ratio.low:.2f}, {ratio.high:.2f}]"
    return f"{ratio.value:.2f}{interval}"


def table(runs: list[CostRun]) -> str:
    """A Markdown table: measurements as rows; per run, head selection's and the all-candidates reference's ratio."""
    header = ["measurement", "target"] + [f"{run.label}: {system}" for run in runs
                                          for system in ("head selection", "all candidates")]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for name in measurement_names(runs):
        target = target_of(runs, name)
        cells = [name, "–" if target is None else f"{target:.2f}"]
        for run in runs:
            by_system = run.ratios.get(name, {})
            cells += [format_ratio(by_system.get(HEAD_SELECTION)), format_ratio(by_system.get(ALL_CANDIDATES))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[CostRun], output: Path, title: str | None = None) -> None:
    """The measurements top to bottom, each run's dots side by side within a row, the stock model's 1.0 a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = measurement_names(runs)
    figure, axis = plt.subplots(figsize=(8.5, 0.45 * len(names) * max(1, len(runs) / 2) + 1.6))
    offsets = [(i - (len(runs) - 1) / 2) * 0.6 / max(1, len(runs)) for i in range(len(runs))]
    for row, name in enumerate(names):
        target = target_of(runs, name)
        if target is not None:
            axis.plot([target, target], [row - 0.35, row + 0.35], color="black", linewidth=2)
        for colour, (offset, run) in enumerate(zip(offsets, runs)):
            by_system = run.ratios.get(name, {})
            if (ratio := by_system.get(HEAD_SELECTION)) is not None:
                error = None if ratio.low is None else [[ratio.value - ratio.low], [ratio.high - ratio.value]]
                axis.errorbar(ratio.value, row + offset, xerr=error, fmt="o", color=f"C{colour}", capsize=2)
            if (reference := by_system.get(ALL_CANDIDATES)) is not None:
                axis.scatter(reference.value, row + offset, facecolors="none", edgecolors=f"C{colour}")
    axis.axvline(1.0, color="grey", linewidth=0.8)
    axis.set_yticks(range(len(names)), names)
    axis.invert_yaxis()  # the first measurement on top, as in the tables
    axis.set_xlabel("time / the stock model's time (1.0: the stock model)")
    axis.set_title(title or "Head selection against the stock model", fontsize=10)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=f"C{i}", label=run.label)
               for i, run in enumerate(runs)]
    handles += [plt.Line2D([], [], marker="o", linestyle="", markerfacecolor="none", color="grey",
                           label="all candidates computed (fairseq's way)"),
                plt.Line2D([], [], color="black", linewidth=2, label="target")]
    axis.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=120, bbox_inches="tight")
    plt.close(figure)


def main(args: list[str] | None = None) -> list[CostRun]:
    """Print the table of ratios (and draw it with `--output`); returns the runs read."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="JSON", help="`overhead.py --json` outputs")
    parser.add_argument("--label", action="append", default=[],
                        help="a run's label, in the order of the files (default: family, device, dtype, threads)")
    parser.add_argument("--title", help="the plot's title")
    parser.add_argument("--output", type=Path, help="where to write the PNG (default: print the table only)")
    options = parser.parse_args(args)
    if len(options.label) > len(options.runs):
        parser.error(f"{len(options.label)} --label for {len(options.runs)} files: one label a file at most")
    labels = options.label + [None] * (len(options.runs) - len(options.label))
    try:
        runs = [read_run(path, label) for path, label in zip(options.runs, labels)]
        for name in measurement_names(runs):
            target_of(runs, name)  # refuse mismatched targets before drawing anything
    except (OSError, ValueError) as error:
        parser.error(str(error))
    if len({run.label for run in runs}) < len(runs):
        parser.error(f"the runs' labels must be distinct (give --label): {[run.label for run in runs]}")
    print(table(runs))
    if options.output is not None:
        plot(runs, options.output, options.title)
        print(f"\nwrote {options.output}")
    return runs


if __name__ == "__main__":
    main()
