# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What a head-selection model learned: head sharing between tasks, head load, and selection stability.

* [`analyze_model`]: per selecting component, the head-sharing matrix between tasks (Gong et al., 2021, Figure 3:
  for tasks `i` and `j`, the fraction of their `H` selected heads they share, averaged over layers) and the load of
  every candidate head per layer (Figure 4: how many tasks select it), as arrays.
* [`plot_head_sharing`] / [`plot_head_load`]: matplotlib heatmaps of both (PNG), one figure per component (the
  figures live in `analysis_plots.py`, re-exported here).
* [`read_selection_log`] / [`selection_stability`] / [`plot_selection_stability`]: selection stability over training,
  from the `head_selection_log.jsonl` that the training recipes' Trainer appends to at every logging step.
* [`write_analysis`] and the command line, which write all of it into a folder:

      python -m hf_headsel.analysis MODEL_DIR --output_dir DIR [--selection_log PATH]

  writes `head_sharing_<component>.png`, `head_load_<component>.png`, `analysis.json` and, when a selection log
  exists (by default `MODEL_DIR/head_selection_log.jsonl`), `selection_stability.png`.

The arrays are computed with torch and returned as numpy arrays; matplotlib is imported only by the plotting
functions, so the core package does not need it (it is in the `train` extra).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import torch
from tqdm.auto import tqdm

from .analysis_plots import (
    STABILITY_PLOT_NAME,
    head_load_figure,
    head_sharing_figure,
    plot_head_load,
    plot_head_sharing,
    plot_selection_stability,
    selection_stability_figure,
)
from .configuration_head_selection import COMPONENTS, HeadSelectionConfigMixin

if TYPE_CHECKING:
    import numpy as np

#: A model object or a saved model folder, what the functions reading a model's selection take.
ModelOrPath = Union[torch.nn.Module, str, os.PathLike]

logger = logging.getLogger(__name__)

SELECTION_LOG_NAME = "head_selection_log.jsonl"
ANALYSIS_NAME = "analysis.json"


# --------------------------------------------------------------------------------------------------------------------
# Head sharing and load of a model
# --------------------------------------------------------------------------------------------------------------------


def task_labels(config: HeadSelectionConfigMixin, component: str) -> list[str]:
    """The names of the rows of `phi` of a component: task names, or `src→tgt` for a cross-attention keyed by the
    (encoder, decoder) pair."""
    sides = config.component_sides(component)
    if len(sides) == 1:
        return list(config.tasks(sides[0]))
    return [f"{e}→{d}" for e in config.encoder_tasks for d in config.decoder_tasks]


def _checked_selection(selected: torch.Tensor | np.ndarray | Sequence, total_heads: int) -> torch.Tensor:
    """`selected` (a tensor, numpy array or nested lists) as a CPU `LongTensor[tasks, layers, H]`; `ValueError`
    unless it holds, per task and layer, `H` distinct integer candidate indices in `[0, total_heads)`."""
    selected = torch.as_tensor(selected)
    if selected.dim() != 3:
        raise ValueError(f"selected heads must have shape [tasks, layers, H], got {tuple(selected.shape)}")
    if selected.dtype.is_floating_point or selected.dtype.is_complex or selected.dtype == torch.bool:
        raise ValueError(f"selected heads must be integer candidate indices, got {selected.dtype}")
    selected = selected.long().cpu()
    if selected.numel() and (selected.min() < 0 or selected.max() >= total_heads):
        raise ValueError(f"selected heads must be candidate indices in [0, {total_heads}), got "
                         f"{selected.min().item()}..{selected.max().item()}")
    ordered = selected.sort(dim=-1).values
    repeated = (ordered[..., 1:] == ordered[..., :-1]).nonzero()
    if len(repeated):  # a head counted twice would make a task share less with itself than 1, and load lie
        task, layer, slot = repeated[0].tolist()
        raise ValueError(f"selected heads must be distinct within a task and layer: task {task}, layer {layer} "
                         f"lists head {ordered[task, layer, slot].item()} twice")
    return selected


def selection_mask(selected: torch.Tensor | np.ndarray | Sequence, total_heads: int) -> torch.Tensor:
    """`[tasks, layers, H']` 0/1 floats from the selected candidates `[tasks, layers, H]` (a tensor, numpy array or
    nested lists of distinct candidate indices per task and layer)."""
    return _mask(_checked_selection(selected, total_heads), total_heads)


def _mask(selected: torch.LongTensor, total_heads: int) -> torch.Tensor:
    """[`selection_mask`] of a selection already checked."""
    mask = torch.zeros(*selected.shape[:2], total_heads)
    return mask.scatter_(-1, selected, 1.0)


def head_sharing_matrix(selected: torch.Tensor | np.ndarray | Sequence, total_heads: int) -> np.ndarray:
    """The paper's Figure 3: `[tasks, tasks]`, entry `(i, j)` = |heads of i ∩ heads of j| / H, averaged over layers.

    The diagonal is 1; two tasks that select the same heads in every layer share 1.0, disjoint ones 0.0.
    """
    selected = _checked_selection(selected, total_heads)  # first: H is read off its shape
    mask = _mask(selected, total_heads)
    heads = selected.shape[-1]
    shared = torch.einsum("ilh,jlh->ijl", mask, mask)  # heads shared per layer
    return (shared.mean(dim=-1) / heads).numpy()


def head_load(selected: torch.Tensor | np.ndarray | Sequence, total_heads: int) -> np.ndarray:
    """The paper's Figure 4: `[layers, H']`, how many tasks select each candidate head of each layer."""
    return selection_mask(selected, total_heads).sum(dim=0).round().long().numpy()


@dataclass
class ComponentAnalysis:
    """Head sharing and load of one selecting component.

    Attributes:
        component: `encoder_self`, `decoder_self` or `decoder_cross`.
        tasks: the task names (rows of `phi`).
        heads / total_heads: `H` and `H'`.
        selected: `[tasks, layers, H]` candidate indices, slot by slot (`model.selected_heads()[component]`).
        sharing: `[tasks, tasks]`, see [`head_sharing_matrix`].
        load: `[layers, H']`, see [`head_load`].
    """

    component: str
    tasks: list[str]
    heads: int
    total_heads: int
    selected: np.ndarray
    sharing: np.ndarray
    load: np.ndarray

    def summary(self) -> dict[str, Any]:
        """Scalars worth a glance: mean sharing between distinct tasks, unused and most loaded heads."""
        tasks = len(self.tasks)
        off_diagonal = self.sharing.sum() - self.sharing.trace()
        return {
            "mean_sharing_between_tasks": round(float(off_diagonal / (tasks * (tasks - 1))), 4) if tasks > 1 else None,
            "unused_heads": int((self.load == 0).sum()),
            "unused_heads_per_layer": (self.load == 0).sum(axis=1).tolist(),
            "max_load": int(self.load.max()),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every array, task names included."""
        return {
            "component": self.component,
            "tasks": self.tasks,
            "heads": self.heads,
            "total_heads": self.total_heads,
            "selected_heads": {task: self.selected[t].tolist() for t, task in enumerate(self.tasks)},
            "sharing": [[round(float(v), 6) for v in row] for row in self.sharing],
            "load": self.load.tolist(),
            "summary": self.summary(),
        }


def load_headsel_model(model_or_path: ModelOrPath, **from_pretrained_kwargs) -> torch.nn.Module:
    """A head-selection model object as given, or loaded from a saved folder or Hub id (on CPU) through the Auto
    class registered for its `model_type`; `ValueError` for anything else.

    A model object is any module with a `head_selection` submodule and a `selected_heads()` method: a generation
    model or a base model (`HeadSelMarianModel`), of `hf_headsel`'s classes or of the remote-code copies that
    `trust_remote_code=True` loads. A `torch.compile`d model is unwrapped.
    """
    if isinstance(model_or_path, torch.nn.Module):
        return _headsel_module(model_or_path)
    if not isinstance(model_or_path, (str, os.PathLike)):
        raise ValueError(f"expected a head-selection model or a saved model folder, got {type(model_or_path).__name__} "
                         f"{model_or_path!r}")
    from transformers import AutoConfig

    from .families import HEADSEL_MODEL_TYPES, family_of  # imported here: the registry imports every family

    try:
        config = AutoConfig.from_pretrained(model_or_path)
    except OSError as error:  # transformers' message speaks of Hub repo ids only
        raise ValueError(f"{str(model_or_path)!r} is neither a saved model folder nor a Hub model id this machine can "
                         f"load: {error}") from error
    if config.model_type not in HEADSEL_MODEL_TYPES:
        raise ValueError(f"{str(model_or_path)!r} holds a {config.model_type!r} model, not a head-selection model "
                         f"({' or '.join(HEADSEL_MODEL_TYPES)})")
    auto = family_of(config.model_type).auto_class_of(config)
    return auto.from_pretrained(model_or_path, **from_pretrained_kwargs).eval()


def _headsel_module(model: torch.nn.Module) -> torch.nn.Module:
    """The head-selection model inside `model` (itself, or the module `torch.compile` wrapped), checked by what it
    has rather than its class: the remote-code classes are not `hf_headsel`'s."""
    while isinstance(getattr(model, "_orig_mod", None), torch.nn.Module):  # torch.compile's OptimizedModule
        model = model._orig_mod
    if isinstance(getattr(model, "head_selection", None), torch.nn.Module) and callable(
            getattr(model, "selected_heads", None)):
        return model
    raise ValueError(f"{type(model).__name__} is not a head-selection model: it has no head_selection selectors and "
                     "selected_heads()")


def analyze_model(model_or_path: ModelOrPath) -> dict[str, ComponentAnalysis]:
    """Head sharing and load of every selecting component of a model (object or saved folder), keyed by component.

    A model that selects in no component gives an empty dict.
    """
    model = load_headsel_model(model_or_path)
    analyses = {}
    for component, selected in model.selected_heads().items():
        selector = model.head_selection[component]
        selected = selected.cpu()
        analyses[component] = ComponentAnalysis(
            component=component,
            tasks=task_labels(model.config, component),
            heads=selector.heads,
            total_heads=selector.total_heads,
            selected=selected.numpy(),
            sharing=head_sharing_matrix(selected, selector.total_heads),
            load=head_load(selected, selector.total_heads),
        )
    return analyses


# --------------------------------------------------------------------------------------------------------------------
# Selection stability over training
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class SelectionSnapshot:
    """The deterministic selection at one training step: `{component: {task: [[head, ...] per layer]}}`."""

    step: int
    selections: dict[str, dict[str, list[list[int]]]]


@dataclass
class SelectionLog:
    """The usable snapshots of a selection log, in step order, and what was left out (reason -> line count).

    `superseded` counts snapshots dropped because a resumed run logged the same or an earlier step again: the
    resumed run's snapshots replace those of the interrupted one from that step on.
    """

    snapshots: list[SelectionSnapshot]
    skipped: Counter = field(default_factory=Counter)
    superseded: int = 0


def selection_snapshot(model: torch.nn.Module, step: int) -> dict[str, Any]:
    """The JSON record of a model's current selection at `step` (one line of the selection log)."""
    selections = {}
    for component, selected in model.selected_heads().items():
        labels = task_labels(model.config, component)
        selections[component] = {task: selected[t].tolist() for t, task in enumerate(labels)}
    return {"step": int(step), "selections": selections}


def _snapshot_shape(selections: Any) -> dict[str, dict[str, tuple[int, int]]] | None:
    """`{component: {task: (layers, H)}}` of a record's selections, or None when they are malformed. `{}` is valid:
    a model that selects in no component logs that."""
    if not isinstance(selections, dict):
        return None
    shape = {}
    for component, tasks in selections.items():
        if component not in COMPONENTS or not isinstance(tasks, dict) or not tasks:
            return None
        shape[component] = {}
        for task, layers in tasks.items():
            if not isinstance(layers, list) or not layers or not all(isinstance(row, list) for row in layers):
                return None
            widths = {len(row) for row in layers}
            if len(widths) != 1 or not all(isinstance(h, int) and h >= 0 for row in layers for h in row):
                return None
            shape[component][task] = (len(layers), widths.pop())
    return shape


def read_selection_log(path: str | Path) -> SelectionLog:
    """Read a `head_selection_log.jsonl`; bad lines are skipped and counted by reason (and logged), never fatal.

    Reasons: `invalid json`, `missing step or selections`, `malformed selections`, and `different tasks or shape`
    (a record whose components, tasks or `[layers, H]` differ from the first usable record's).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"selection log {str(path)!r} does not exist")
    log = SelectionLog(snapshots=[])
    reference_shape = None
    with path.open(encoding="utf-8") as lines:
        for line in tqdm(lines, desc="reading selection log", unit=" lines", leave=False, disable=None):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                log.skipped["invalid json"] += 1
                continue
            step = record.get("step") if isinstance(record, dict) else None
            if not isinstance(step, int) or isinstance(step, bool) or "selections" not in record:
                log.skipped["missing step or selections"] += 1
                continue
            shape = _snapshot_shape(record["selections"])
            if shape is None:
                log.skipped["malformed selections"] += 1
                continue
            if reference_shape is None:  # not `or`: an empty selection is a valid first shape
                reference_shape = shape
            if shape != reference_shape:
                log.skipped["different tasks or shape"] += 1
                continue
            _append_snapshot(log, SelectionSnapshot(step, record["selections"]))
    if log.skipped or log.superseded:
        logger.warning("%s: skipped %s; %d snapshots superseded by a resumed run", path, dict(log.skipped),
                       log.superseded)
    return log


def _append_snapshot(log: SelectionLog, snapshot: SelectionSnapshot) -> None:
    """Append, first dropping the snapshots at or after its step (a run resumed from an earlier checkpoint)."""
    kept = [s for s in log.snapshots if s.step < snapshot.step]
    log.superseded += len(log.snapshots) - len(kept)
    log.snapshots = [*kept, snapshot]


def changed_heads(before: torch.Tensor, after: torch.Tensor) -> int:
    """How many selected heads were swapped between two selections (`[..., H]` head indices): per layer (and task),
    the heads `after` selects that `before` did not; the count the Trainer logs as `head_selection_changes`. Counted
    as sets, not slot by slot: a subset selection lists its heads sorted, so one swapped head can shift the slots
    after it (for group, slot `i` picks from group `i`, and the two counts agree)."""
    return int((after[..., :, None] != before[..., None, :]).all(-1).sum())


def selection_stability(snapshots: Sequence[SelectionSnapshot]) -> dict[str, Any]:
    """Per-step change counts and when every task's selection stopped changing.

    Returns a JSON-ready dict:

    * `steps`: the logged steps;
    * `changes`: one entry per step after the first: `{"step", "total", "components": {c: n},
      "tasks": {c: {task: n}}}`, `n` being how many selected heads were swapped since the previous snapshot
      (per layer, the heads selected now that were not before; see [`changed_heads`]);
    * `stable_since`: `{component: {task: step}}`, the step from which the task's selection never changed again
      (the step of its last change; the first logged step when it never changed);
    * `stable_for_steps`: `{component: {task: last step - stable_since}}`, how long that has held.
    """
    if not snapshots:
        raise ValueError("selection_stability needs at least one snapshot; the log has none")
    _check_same_shape(snapshots)
    first, last = snapshots[0], snapshots[-1]
    stable_since = {c: {task: first.step for task in tasks} for c, tasks in first.selections.items()}
    changes = []
    for before, after in zip(snapshots, snapshots[1:]):
        per_task = {
            c: {task: changed_heads(torch.tensor(before.selections[c][task]), torch.tensor(after.selections[c][task]))
                for task in tasks}
            for c, tasks in after.selections.items()
        }
        for c, tasks in per_task.items():
            for task, count in tasks.items():
                if count:
                    stable_since[c][task] = after.step
        totals = {c: sum(tasks.values()) for c, tasks in per_task.items()}
        changes.append({"step": after.step, "total": sum(totals.values()), "components": totals, "tasks": per_task})
    return {
        "steps": [s.step for s in snapshots],
        "changes": changes,
        "stable_since": stable_since,
        "stable_for_steps": {c: {t: last.step - s for t, s in tasks.items()} for c, tasks in stable_since.items()},
    }


def _check_same_shape(snapshots: Sequence[SelectionSnapshot]) -> None:
    """`ValueError` unless every snapshot has the first one's components, tasks and `[layers, H]` per task: only
    selections of one model can be compared (`read_selection_log` drops the others)."""
    reference = _snapshot_shape(snapshots[0].selections)
    for snapshot in snapshots:
        shape = _snapshot_shape(snapshot.selections)
        if shape is None:
            raise ValueError(f"the snapshot at step {snapshot.step} is malformed: selections must be "
                             "{component: {task: [[head, ...] per layer]}}")
        if shape != reference:
            raise ValueError(f"snapshots must have the same components, tasks and [layers, H] per task: step "
                             f"{snapshot.step} {_shape_difference(shape, reference)} of step {snapshots[0].step}")


def _shape_difference(shape: dict, reference: dict) -> str:
    """The first way `shape` differs from `reference` (both from `_snapshot_shape`), in words."""
    if set(shape) != set(reference):
        return f"has components {sorted(shape)} instead of the {sorted(reference)}"
    for component, tasks in shape.items():
        expected = reference[component]
        if set(tasks) != set(expected):
            return f"has {component} tasks {sorted(tasks)} instead of the {sorted(expected)}"
        for task, size in tasks.items():
            if size != expected[task]:
                return f"has [layers, H] {list(size)} for {component} {task!r} instead of the {list(expected[task])}"
    return "differs from the selections"  # not reached: the shapes differ somewhere above


# --------------------------------------------------------------------------------------------------------------------
# Everything into a folder, and the command line
# --------------------------------------------------------------------------------------------------------------------


def write_analysis(model_or_path: ModelOrPath, output_dir: str | Path, selection_log: str | Path | None = None,
                   components: Iterable[str] | None = None) -> dict[str, Any]:
    """Write the heatmaps of every selecting component (or of `components`, a list of component names), the
    stability plot when a selection log is given or found next to a saved model, and `analysis.json` (returned)
    into `output_dir`."""
    if isinstance(components, str):  # a string is iterable, and would be read as its characters
        raise ValueError(f"components must be a list of component names, not a string: pass [{components!r}]")
    model = load_headsel_model(model_or_path)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    analyses = analyze_model(model)
    components = list(analyses) if components is None else list(components)
    unknown = set(components) - set(analyses)
    if unknown:
        raise ValueError(f"components {sorted(unknown)} select no heads in this model; it selects in {list(analyses)}")
    wanted = [c for c in analyses if c in components]
    figures = []
    for component in tqdm(wanted, desc="heatmaps", unit=" component"):
        figures.append(plot_head_sharing(analyses[component], output_dir / f"head_sharing_{component}.png").name)
        figures.append(plot_head_load(analyses[component], output_dir / f"head_load_{component}.png").name)
    saved = isinstance(model_or_path, (str, os.PathLike))
    result = {"model": str(model_or_path) if saved else type(model).__name__,
              "components": {c: analyses[c].to_dict() for c in wanted}, "stability": None, "figures": figures}
    if selection_log is None and saved:
        found = Path(model_or_path) / SELECTION_LOG_NAME
        selection_log = found if found.is_file() else None
    if selection_log is not None:
        result["stability"] = _stability_section(Path(selection_log), output_dir, figures)
    (output_dir / ANALYSIS_NAME).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def _stability_section(path: Path, output_dir: Path, figures: list[str]) -> dict[str, Any]:
    log = read_selection_log(path)
    section = {"log": str(path), "skipped_lines": dict(log.skipped), "superseded_snapshots": log.superseded}
    if not log.snapshots:
        logger.warning("%s has no usable snapshot: no stability analysis", path)
        return section
    section.update(selection_stability(log.snapshots))
    if section["changes"] and section["stable_since"]:  # a model selecting in no component has nothing to draw
        figures.append(plot_selection_stability(section, output_dir / STABILITY_PLOT_NAME).name)
    return section


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line's options (`argv`, or `sys.argv[1:]` when None)."""
    parser = argparse.ArgumentParser(
        prog="python -m hf_headsel.analysis",
        description="Head sharing, head load and selection stability of a saved head-selection model.",
    )
    parser.add_argument("model_dir", help="a saved head-selection model folder")
    parser.add_argument("--output_dir", required=True, help="where the PNGs and analysis.json go")
    parser.add_argument("--selection_log", default=None,
                        help=f"a selection log (default: MODEL_DIR/{SELECTION_LOG_NAME} when it exists)")
    parser.add_argument("--components", nargs="+", choices=COMPONENTS, default=None,
                        help="analyse only these components (default: every selecting one)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line: write the analysis of `model_dir` into `--output_dir` and print a summary; returns
    the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    result = write_analysis(args.model_dir, args.output_dir, args.selection_log, args.components)
    for component, entry in result["components"].items():
        summary = entry["summary"]
        print(f"{component}: mean sharing between tasks {summary['mean_sharing_between_tasks']}, "
              f"unused heads {summary['unused_heads']}, max load {summary['max_load']} of {len(entry['tasks'])}")
    if result["stability"] and "stable_since" in result["stability"]:
        print(f"selection stable since: {json.dumps(result['stability']['stable_since'], ensure_ascii=False)}")
    print(f"wrote {', '.join([*result['figures'], ANALYSIS_NAME])} to {args.output_dir}")
    return 0


__all__ = [
    "ComponentAnalysis",
    "SelectionLog",
    "SelectionSnapshot",
    "analyze_model",
    "changed_heads",
    "head_load",
    "head_load_figure",
    "head_sharing_figure",
    "head_sharing_matrix",
    "load_headsel_model",
    "plot_head_load",
    "plot_head_sharing",
    "plot_selection_stability",
    "read_selection_log",
    "selection_mask",
    "selection_snapshot",
    "selection_stability",
    "selection_stability_figure",
    "task_labels",
    "write_analysis",
]


if __name__ == "__main__":
    raise SystemExit(main())
