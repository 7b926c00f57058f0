# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""One picture of the quality comparisons: each system's test cross-entropy minus a reference system's, paired seed
by seed, one panel per experiment (a task at a budget).

    python benchmarks/quality_plot.py --reference shared \\
        --panel "ASR, 200 updates" outputs/benchmark/asr_noise --panel "MT, 1,000 updates" outputs/benchmark/mt_why \\
        --system group "Group (the paper's recipe)" --system group_no_sampling_noise_ablation "Group, no noise" \\
        --output benchmarks/results/quality/head_selection_against_shared.png

Every seed is a dot, the mean over seeds a bar with the sample standard deviation; below zero the system is ahead
of the reference. Systems are run folders (`runs/<system>/seed*/`); a system without finished runs in a panel is
left out of that panel. A run is finished as `quality_tables.is_finished` says, so the seeds paired here are the
ones `quality_tables.py --paired_with` pairs, and the differences, printed as a Markdown table too, are its loss
column. Panel titles and system labels must be distinct. When the runs paired trained in more than one environment
(their `environment.jsonl`), a note after the table names which ran where, as the experiment reports do.

A panel whose run folders are not kept reads its runs' test losses from the experiment's tracked lane logs instead
(`lane_logs.read_scores`; the losses as printed, rounded to four decimals): `--panel_logs TITLE LOG [LOG ...]`, each
LOG a file or a glob pattern. Such a panel has no `environment.jsonl` to name; the experiment's `results.md` does.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from headsel_recipes.experiment.environments import environments_note
from headsel_recipes.results_keys import loss_key, read_results
from lane_logs import matching_logs, read_scores
from quality_tables import is_finished, mean_and_spread

# Where a panel's runs are: an experiment output folder, or the lane logs that trained them
Source = Path | tuple[Path, ...]


@functools.cache
def logged_scores(logs: tuple[Path, ...]) -> dict[tuple[str, int], dict[str, float]]:
    """`lane_logs.read_scores` of a panel's lane logs, read once for all its systems."""
    return read_scores(list(logs))


def seed_losses(source: Source, system: str) -> dict[str, float]:
    """`{seed folder: test loss}` of the finished runs of one system (`quality_tables.is_finished`; from lane logs,
    the runs with a test loss)."""
    if isinstance(source, tuple):
        return {f"seed{seed}": scores["loss"] for (name, seed), scores in sorted(logged_scores(source).items())
                if name == system}
    runs = sorted((source / "runs" / system).glob("seed*"))
    return {run.name: read_results(run, "predict")[loss_key("predict")] for run in runs if is_finished(run)}


def paired_differences(source: Source, system: str, reference: str) -> dict[str, float]:
    """`{seed folder: system's test loss - reference's}` over the seeds both finished."""
    losses, reference_losses = seed_losses(source, system), seed_losses(source, reference)
    if not reference_losses:
        where = source if isinstance(source, Path) else ", ".join(str(log) for log in source)
        raise ValueError(f"{where}: no finished run of the reference {reference!r}")
    return {seed: losses[seed] - reference_losses[seed] for seed in sorted(set(losses) & set(reference_losses))}


def collect(panels: list[tuple[str, Source]], systems: list[tuple[str, str]], reference: str
            ) -> dict[str, dict[str, dict[str, float]]]:
    """`{panel title: {system label: {seed: difference}}}`, systems without a paired seed left out."""
    return {title: {label: differences for folder, label in systems
                    if (differences := paired_differences(experiment, folder, reference))}
            for title, experiment in panels}


def paired_runs(differences: dict[str, dict[str, dict[str, float]]], panels: list[tuple[str, Source]],
                systems: list[tuple[str, str]], reference: str) -> list[tuple[str, Path]]:
    """`(name, run folder)` of every run [`collect`]'s `differences` were computed from, the reference's included
    (none of a panel read from lane logs: its run folders are not there)."""
    folder_of = {label: folder for folder, label in systems}
    named = []
    for title, experiment in panels:
        if isinstance(experiment, tuple):
            continue
        by_system = differences[title]
        reference_seeds = {seed for seeds in by_system.values() for seed in seeds}
        for folder, seeds in [*((folder_of[label], seeds) for label, seeds in by_system.items()),
                              (reference, reference_seeds)]:
            named += [(f"{' '.join(title.split())}: {folder} ({seed})", experiment / "runs" / folder / seed)
                      for seed in sorted(seeds)]
    return list(dict.fromkeys(named))


def drawn_labels(differences: dict[str, dict[str, dict[str, float]]], labels: list[str]) -> list[str]:
    """The system labels, in the order given, that have a paired seed in some panel."""
    return [label for label in labels if any(label in by_system for by_system in differences.values())]


def table(differences: dict[str, dict[str, dict[str, float]]], labels: list[str], reference: str) -> str:
    """A Markdown table: systems as rows, panels as columns, `mean ± std (seeds)` of the paired differences."""
    labels = drawn_labels(differences, labels)
    titles = [" ".join(title.split("\n")) for title in differences]  # a title broken for the plot: one header row
    lines = [f"| test cross-entropy minus {reference}'s, paired by seed | " + " | ".join(titles) + " |",
             "|---|" + "---:|" * len(differences)]
    for label in labels:
        cells = []
        for by_system in differences.values():
            values = list(by_system.get(label, {}).values())
            if not values:
                cells.append("–")
                continue
            mean, spread = mean_and_spread(values)
            cells.append(f"{mean:+.3f} ± {spread:.3f} ({len(values)})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(differences: dict[str, dict[str, dict[str, float]]], labels: list[str], reference: str,
         output: Path) -> None:
    """The panels side by side, sharing the y axis; every system keeps its place and colour in every panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = drawn_labels(differences, labels)
    if not labels:  # matplotlib's own error for an empty legend says nothing of why
        raise ValueError(f"no system has a seed paired with the reference {reference!r} in any panel: nothing to draw")
    colours = {label: f"C{i}" for i, label in enumerate(labels)}
    figure, axes = plt.subplots(1, len(differences), figsize=(2.6 * len(differences) + 1.2, 4.2), sharey=True,
                                squeeze=False)
    for axis, (title, by_system) in zip(axes[0], differences.items()):
        for position, label in enumerate(labels):
            values = list(by_system.get(label, {}).values())
            if not values:
                continue
            mean, spread = mean_and_spread(values)
            axis.bar(position, mean, yerr=spread, color=colours[label], alpha=0.55, capsize=3)
            axis.scatter([position] * len(values), values, color="black", s=9, zorder=3)
        axis.axhline(0.0, color="grey", linewidth=0.8)
        axis.set_xlim(-0.6, len(labels) - 0.4)  # a system keeps its place (and width) in a panel that lacks others
        axis.set_title(title, fontsize=10)
        axis.set_xticks([])
    axes[0][0].set_ylabel(f"test cross-entropy minus {reference}'s (nats)\nbelow 0: better than {reference}")
    figure.legend([plt.Rectangle((0, 0), 1, 1, color=colours[label], alpha=0.55) for label in labels], labels,
                  loc="lower center", ncol=min(len(labels), 3), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.06 + 0.04 * ((len(labels) - 1) // 3), 1, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=120, bbox_inches="tight")  # a legend wider than the panels stays in the picture
    plt.close(figure)


def repeated(names: list[str]) -> list[str]:
    """The names given more than once, in the order first given."""
    return list(dict.fromkeys(name for name in names if names.count(name) > 1))


class PanelAction(argparse.Action):
    """`--panel TITLE EXPERIMENT` and `--panel_logs TITLE LOG [LOG ...]` append `(title, source)` to `panels`, in
    the order given: an experiment folder, or the lane logs the glob patterns match (sorted)."""

    def __call__(self, parser, namespace, values, option_string=None):
        title, *paths = values
        if not paths:
            parser.error(f"{option_string} {title!r}: name the panel's lane logs after its title")
        source: Source = Path(paths[0])
        if option_string == "--panel_logs":
            source = tuple(matching_logs(paths))
            if not source:
                parser.error(f"--panel_logs {title!r}: no lane log matches {paths}")
        namespace.panels = [*(namespace.panels or []), (title, source)]


def main(args: list[str] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """Print the table of paired differences (and draw it with `--output`); returns them, as [`collect`] does."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panel", nargs=2, action=PanelAction, dest="panels", metavar=("TITLE", "EXPERIMENT"),
                        help="a panel: its title and an experiment output folder (repeat for more)")
    parser.add_argument("--panel_logs", nargs="+", action=PanelAction, dest="panels", metavar="TITLE LOG",
                        help="a panel read from lane logs: its title, then the logs or glob patterns of them")
    parser.add_argument("--system", nargs=2, action="append", required=True, metavar=("FOLDER", "LABEL"),
                        help="a system: its run folder name and its label in the plot (repeat for more)")
    parser.add_argument("--reference", default="shared", help="the run folder every system is paired with")
    parser.add_argument("--output", type=Path, help="where to write the PNG (default: print the table only)")
    options = parser.parse_args(args)
    if not options.panels:
        parser.error("give at least one --panel or --panel_logs")
    labels = [label for _, label in options.system]
    panels = options.panels
    # collect keys panels by title and systems by label: a repeated one would silently overwrite the other
    for option, names in (("--panel titles", [title for title, _ in panels]), ("--system labels", labels)):
        if repeated(names):
            parser.error(f"{option} must be distinct; repeated: {repeated(names)}")
    systems = [(folder, label) for folder, label in options.system]
    differences = collect(panels, systems, options.reference)
    if not drawn_labels(differences, labels):
        parser.error(f"no system has a seed paired with the reference {options.reference!r} in any panel (a "
                     "system's seeds are its runs/<system>/seed*/ that finished, as quality_tables.is_finished says)")
    # pairs across environments differ by their rounding too: named, as the experiment reports name them
    note = environments_note(paired_runs(differences, panels, systems, options.reference))
    print("\n".join([table(differences, labels, options.reference), *note]))
    if options.output is not None:
        plot(differences, labels, options.reference, options.output)
        print(f"\nwrote {options.output}")
    return differences


if __name__ == "__main__":
    main()
