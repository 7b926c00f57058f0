# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The figures of [`hf_headsel.analysis`]: head-sharing and head-load heatmaps of one component (Gong et al., 2021,
Figures 3 and 4) and the selection-stability plot, as matplotlib figures or PNG files.

matplotlib is imported only inside the functions (it is in the `train` extra, not a core requirement), and through
`matplotlib.figure.Figure`, not pyplot: no global backend state is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from hf_headsel.analysis import ComponentAnalysis  # absolute: the analysis module imports this one

STABILITY_PLOT_NAME = "selection_stability.png"
COMPONENT_TITLES = {
    "encoder_self": "encoder self-attention",
    "decoder_self": "decoder self-attention",
    "decoder_cross": "decoder cross-attention",
}
# Heatmap cells are annotated with their values up to this many rows / columns (beyond, the text is unreadable).
MAX_ANNOTATED = 24


def _heatmap(ax, values, *, vmin: float, vmax: float, fmt: str, cmap: str):
    """`imshow` of a 2-D array with its values written in the cells (when there are few enough)."""
    image = ax.imshow(values, vmin=vmin, vmax=vmax, cmap=cmap, aspect="auto")
    rows, cols = values.shape
    if rows <= MAX_ANNOTATED and cols <= MAX_ANNOTATED:
        middle = (vmin + vmax) / 2
        for r in range(rows):
            for c in range(cols):
                color = "white" if values[r, c] < middle else "black"
                ax.text(c, r, format(values[r, c], fmt), ha="center", va="center", fontsize=8, color=color)
    return image


def _save(figure: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path


def head_sharing_figure(analysis: ComponentAnalysis) -> Figure:
    """The sharing matrix of one component as a heatmap, task names on both axes."""
    from matplotlib.figure import Figure  # pyplot-free: no global backend state is touched

    tasks = len(analysis.tasks)
    size = min(3.0 + 0.45 * tasks, 16.0)
    figure = Figure(figsize=(size + 1.2, size), layout="constrained")
    ax = figure.add_subplot()
    image = _heatmap(ax, analysis.sharing, vmin=0.0, vmax=1.0, fmt=".2f", cmap="viridis")
    ax.set_xticks(range(tasks), analysis.tasks, rotation=90 if tasks > 8 else 0)
    ax.set_yticks(range(tasks), analysis.tasks)
    ax.set_xlabel("task")
    ax.set_ylabel("task")
    ax.set_title(f"Head sharing, {COMPONENT_TITLES[analysis.component]}\n"
                 f"(fraction of the H={analysis.heads} heads shared, mean over layers)", fontsize=10)
    figure.colorbar(image, ax=ax, shrink=0.8)
    return figure


def head_load_figure(analysis: ComponentAnalysis) -> Figure:
    """The load of every candidate head of one component as a heatmap: layers x candidate heads."""
    from matplotlib.figure import Figure

    layers, total = analysis.load.shape
    figure = Figure(figsize=(min(3.0 + 0.5 * total, 18.0), min(2.0 + 0.45 * layers, 14.0)), layout="constrained")
    ax = figure.add_subplot()
    image = _heatmap(ax, analysis.load, vmin=0, vmax=len(analysis.tasks), fmt="d", cmap="magma")
    ax.set_xticks(range(total))
    ax.set_yticks(range(layers))
    ax.set_xlabel(f"candidate head (H'={total})")
    ax.set_ylabel("layer")
    ax.set_title(f"Head load, {COMPONENT_TITLES[analysis.component]}\n"
                 f"(tasks selecting each head, of {len(analysis.tasks)}: {', '.join(analysis.tasks)})", fontsize=10,
                 wrap=True)
    figure.colorbar(image, ax=ax, shrink=0.8, label="tasks")
    return figure


def plot_head_sharing(analysis: ComponentAnalysis, path: str | Path) -> Path:
    """Write the head-sharing heatmap of one component as a PNG; returns the path."""
    return _save(head_sharing_figure(analysis), path)


def plot_head_load(analysis: ComponentAnalysis, path: str | Path) -> Path:
    """Write the head-load heatmap of one component as a PNG; returns the path."""
    return _save(head_load_figure(analysis), path)


def selection_stability_figure(stability: dict[str, Any]) -> Figure:
    """Two panels: changed choices per logging step (one line per component), and per task (a heatmap)."""
    from matplotlib.figure import Figure

    changes = stability["changes"]
    steps = [entry["step"] for entry in changes]
    rows = [(c, task) for c, tasks in stability["stable_since"].items() for task in tasks]
    figure = Figure(figsize=(9.0, 3.0 + 0.3 * len(rows)), layout="constrained")
    top, bottom = figure.subplots(2, 1, height_ratios=[1.0, max(1.0, 0.12 * len(rows))])
    for component in stability["stable_since"]:
        top.plot(steps, [entry["components"][component] for entry in changes], marker="o", markersize=3,
                 label=COMPONENT_TITLES[component])
    top.set_ylabel("changed choices")
    top.set_title("Head-selection changes since the previous logging step", fontsize=10)
    top.legend(fontsize=8)
    grid = [[entry["tasks"][c][task] for entry in changes] for c, task in rows]
    image = bottom.imshow(grid, aspect="auto", cmap="Greys", interpolation="nearest",
                          extent=(-0.5, len(steps) - 0.5, len(rows) - 0.5, -0.5))
    bottom.set_yticks(range(len(rows)), [f"{c}: {task}" for c, task in rows], fontsize=7)
    ticks = range(0, len(steps), max(1, len(steps) // 10))
    bottom.set_xticks(list(ticks), [str(steps[i]) for i in ticks])
    bottom.set_xlabel("step")
    figure.colorbar(image, ax=bottom, label="changed choices")
    return figure


def plot_selection_stability(stability: dict[str, Any], path: str | Path) -> Path:
    """Write the selection-stability plot as a PNG; returns the path. Needs at least two logged steps and a
    selecting component."""
    if not stability["changes"]:
        raise ValueError("a stability plot needs at least two logged steps; the log has one")
    if not stability["stable_since"]:
        raise ValueError("a stability plot needs a selecting component; the logged model selects in none")
    return _save(selection_stability_figure(stability), path)


__all__ = [
    "STABILITY_PLOT_NAME",
    "head_load_figure",
    "head_sharing_figure",
    "plot_head_load",
    "plot_head_sharing",
    "plot_selection_stability",
    "selection_stability_figure",
]
