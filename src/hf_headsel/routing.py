# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Routing: which task every example of a batch belongs to, validated once per forward pass and passed down to the
layers as keyword arguments (no module-level "current task" state).

* [`TaskRoute`]: the task ids of a batch and the batch laid out task by task: the one route type.
* [`Routing`]: what a forward pass hands its layers, under the one keyword `head_selection_routing`: the route of
  each side and the Gumbel-sigmoid draws of every component. The public keywords `encoder_task_ids` /
  `decoder_task_ids` only ever hold raw ids (a tensor, a list, one id or a name).
* [`task_route`]: raw ids of one side (or nothing: the default task) -> a route; [`keyed_route`]: the route of a
  component or adapter keyed by one side or by the pair; [`route_from_kwargs`]: the keyed route a layer got.
* [`task_names`]: `{side: name}` from the `task=` / `encoder_task=` / `decoder_task=` arguments.

Copied next to saved models as remote code; imports only torch and its sibling `configuration_head_selection.py`.
"""

from __future__ import annotations

import collections
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .configuration_head_selection import SIDES, HeadSelectionConfigMixin

TASK_ID_KWARGS = ("encoder_task_ids", "decoder_task_ids")  # the public keywords: raw ids, a name, or nothing
ROUTING_KWARG = "head_selection_routing"  # the one keyword carrying a forward pass's [`Routing`] down to the layers
#: The keyword carrying a decoding step's evaluation caches, validated on the host, down to the layers
#: (`{layer key: {cache key: value}}`; see `HeadSelectionAttentionMixin.eval_weights`).
EVAL_WEIGHTS_KWARG = "head_selection_eval_weights"
#: read by the head-selection layers, not passed to attention functions
LAYER_KWARGS = (*TASK_ID_KWARGS, ROUTING_KWARG, EVAL_WEIGHTS_KWARG)


def is_compiling() -> bool:
    """Whether torch.compile (dynamo) or `torch.jit.trace` is tracing: host-side caches, host synchronisations and
    custom autograd functions are left out then."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def is_strict_exporting() -> bool:
    """Whether `torch.export.export(..., strict=True)` is tracing (dynamo under export)."""
    return torch.compiler.is_exporting() and torch.compiler.is_dynamo_compiling()


def first_tensor(*candidates) -> torch.Tensor:
    """The first given tensor (or first tensor of a given model output): its batch size and device route the batch."""
    for candidate in candidates:
        if candidate is None:
            continue
        return candidate if isinstance(candidate, torch.Tensor) else candidate[0]
    raise ValueError("cannot infer the batch size: pass the model inputs, encoder_outputs or decoder inputs")


@dataclass(frozen=True)
class TaskRoute:
    """The task of every example in a batch, and the batch laid out task by task.

    `tasks` lists the tasks present and `sizes` their example counts. For a batch that mixes tasks in any order,
    `tasks` is ascending, `order` sorts the examples by task (stable) and `inverse` undoes it. Both are `None` when
    one task holds the whole batch, so the common single-task batch costs what the stock model costs, and when each
    task's examples already lie together (a batch grouped by task: `tasks` then lists them in batch order), so the
    layers take contiguous slices instead of gathering and scattering rows. Built once per forward pass (the only
    host synchronisation routing needs) and passed down to the layers as a keyword argument.

    Under torch.compile an id tensor is routed without reading it on the host (`tasks` and `sizes` are `None`,
    `num_tasks` is set; see [`TaskRoute.traced`]): every example is then served by gathering its task's parameters,
    as a mixed batch is.
    """

    ids: torch.LongTensor
    tasks: tuple[int, ...]
    sizes: tuple[int, ...]
    order: torch.LongTensor | None = None
    inverse: torch.LongTensor | None = None
    task_index: torch.LongTensor | None = None  # `tasks` as a tensor on the ids' device (mixed batches)
    num_tasks: int | None = None  # set when the layout is unknown (traced routes)
    host_ids: tuple[int, ...] | None = None  # the ids as read on the host (built routes)

    @classmethod
    def single(cls, task: int, batch_size: int, device: torch.device) -> "TaskRoute":
        """Every example on `task`: no host synchronisation at all."""
        return cls(torch.full((batch_size,), task, dtype=torch.long, device=device), (task,), (batch_size,))

    @classmethod
    def build(cls, ids: torch.LongTensor, host_ids: Sequence[int] | None = None) -> "TaskRoute":
        """The route of valid ids `[batch]` (`host_ids`: the same ids, if already read on the host)."""
        if host_ids is None:
            host_ids = ids.tolist()
        runs = [(task, len(list(group))) for task, group in itertools.groupby(host_ids)]
        host_ids = tuple(host_ids)
        if len(runs) == len({task for task, _ in runs}):  # one task, or each task's examples side by side
            tasks, sizes = (tuple(column) for column in zip(*runs)) if runs else ((0,), (0,))
            index = torch.tensor(tasks, device=ids.device) if len(tasks) > 1 else None
            return cls(ids, tasks, sizes, task_index=index, host_ids=host_ids)
        counts = collections.Counter(host_ids)
        tasks = tuple(sorted(counts))
        sizes = tuple(counts[task] for task in tasks)
        order, inverse = permutation(sorted(range(len(host_ids)), key=host_ids.__getitem__), ids.device)
        return cls(ids, tasks, sizes, order, inverse, torch.tensor(tasks, device=ids.device), host_ids=host_ids)

    @classmethod
    def traced(cls, ids: torch.LongTensor, num_tasks: int) -> "TaskRoute":
        """The route of ids `[batch]` that cannot be read on the host (torch.compile tracing): the layout stays
        unknown, and out-of-range ids fail an asynchronous device-side check instead of a `ValueError`."""
        torch._assert_async(((ids >= 0) & (ids < num_tasks)).all(), "task id out of range")
        return cls(ids, None, None, num_tasks=num_tasks)

    @property
    def layout_known(self) -> bool:
        return self.tasks is not None

    @property
    def interleaved(self) -> bool:
        """Whether the batch holds several tasks whose examples do not lie side by side (layers gather them)."""
        return self.order is not None

    def example_tasks(self) -> tuple[int, ...]:
        """The task of every example, as read on the host (a known layout only)."""
        return self.host_ids if self.host_ids is not None else (self.tasks[0],) * len(self.ids)

    def reordered(self, order: torch.LongTensor, host_order: Sequence[int]) -> "TaskRoute":
        """The route of the batch taken in `order` (`host_order`: the same indices on the host)."""
        if self.single_task is not None:  # every example on one task: any order is this route
            return self
        tasks = self.example_tasks()
        return TaskRoute.build(self.ids.index_select(0, order), [tasks[index] for index in host_order])

    @property
    def single_task(self) -> int | None:
        return self.tasks[0] if self.tasks is not None and len(self.tasks) == 1 else None

    @property
    def pads_blocks(self) -> bool:
        """Whether [`task_blocks`] pads a task's block: the tasks present hold unequal numbers of examples (a known
        layout only)."""
        return len(set(self.sizes)) > 1

    @property
    def block_rows(self) -> int:
        """The rows of [`task_blocks`]: every task present padded to the largest task's count (a known layout only)."""
        return len(self.tasks) * max(self.sizes)

    @functools.cached_property
    def task_blocks(self) -> tuple[torch.LongTensor | None, torch.LongTensor | None, int]:
        """`(slots, positions, width)`: the batch laid out as one block of `width` examples per task, in the order of
        `tasks` (a known layout only), for one batched matmul over the tasks. `width` is the largest task's count; a
        smaller task's block is padded with copies of its first example. `slots` (`[len(tasks) * width]`) names the
        example in each slot of the blocks, `positions` (`[batch]`) each example's slot. Both are `None` when the batch
        already is that layout: each task's examples side by side, as many of each. Built once per route."""
        width = max(self.sizes)
        if self.order is None and not self.pads_blocks:
            return None, None, width
        examples = {task: [] for task in self.tasks}
        for index, task in enumerate(self.example_tasks()):
            examples[task].append(index)
        slots, positions = [], [0] * len(self.ids)
        for block, task in enumerate(self.tasks):
            for offset, index in enumerate(examples[task]):
                positions[index] = block * width + offset
            slots += examples[task] + examples[task][:1] * (width - len(examples[task]))
        device = self.ids.device
        return torch.tensor(slots, device=device), torch.tensor(positions, device=device), width

    def per_task(self, states: torch.Tensor, fn: Callable[[int, torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """`fn(task, examples)` applied to the examples (rows of `states`) of every task present, results put back
        in batch order. One sort and one unsort per call, whatever the number of tasks. With an unknown layout
        (traced), `fn` runs on the whole batch for every task and each example keeps its own task's result."""
        if self.single_task is not None:
            return fn(self.single_task, states)
        if self.tasks is None:
            result = None
            for task in range(self.num_tasks):
                out = fn(task, states)
                mask = (self.ids == task).view(-1, *(1,) * (out.dim() - 1))
                result = out if result is None else torch.where(mask, out, result)
            return result
        return self.by_task(states, lambda examples: torch.cat(
            [fn(task, part) for task, part in zip(self.tasks, examples.split(self.sizes))]))

    def by_blocks(self, states: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """`fn(blocks)` on the rows of `states` (batch first) laid out as one block per task ([`task_blocks`]):
        `blocks` is `[len(tasks), width * rest, features]`, block `i` holding the examples of `tasks[i]` (padded);
        `fn` may change the last dimension. Its result is put back in batch order (a known layout only)."""
        slots, positions, width = self.task_blocks
        blocks = (states if slots is None else states.index_select(0, slots)).reshape(len(self.tasks), -1,
                                                                                      states.shape[-1])
        out = fn(blocks)
        out = out.reshape(len(self.tasks) * width, *states.shape[1:-1], out.shape[-1])
        return out if positions is None else out.index_select(0, positions)

    def by_task(self, states: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """`fn(examples)` on the rows of `states` laid out task by task (the examples of `tasks[i]` side by side,
        `sizes[i]` of them, in the order of `tasks`), its result put back in batch order: one sort and one unsort,
        none where the batch is laid out so already (a known layout only)."""
        if self.order is None:  # each task's examples side by side: slices, no gather or scatter
            return fn(states)
        return fn(states.index_select(0, self.order)).index_select(0, self.inverse)


def permutation(order: Sequence[int], device: torch.device) -> tuple[torch.LongTensor, torch.LongTensor]:
    """The batch indices `order` and the indices that undo it, as tensors on `device`."""
    inverse = [0] * len(order)
    for position, index in enumerate(order):
        inverse[index] = position
    return torch.tensor(order, dtype=torch.long, device=device), torch.tensor(inverse, dtype=torch.long, device=device)


def task_route(
    config: HeadSelectionConfigMixin,
    side: str,
    task_ids: torch.Tensor | Sequence[int] | int | str | None,
    batch_size: int,
    device: torch.device,
) -> TaskRoute:
    """Validate the task ids of one side, or fill in the default task, and route them; `ValueError` names the rule
    broken.

    `task_ids` may be a `LongTensor[batch]`, a list of ids or of task names (one per example), one id (an int or a
    0-dimensional tensor), or a task name for the whole batch. When it is omitted the side's default task is used,
    else its only task. One int, a name or the default cost no host synchronisation; a tensor costs one (validation
    and routing share it).
    """
    tasks = config.tasks(side)
    if task_ids is None:
        default = getattr(config, f"default_{side}_task")
        if default is None and len(tasks) > 1:
            raise ValueError(
                f"{side}_task_ids is required: the model has several {side} tasks {tasks} and no default "
                f"(pass {side}_task_ids, or use from_pretrained(..., task=...) / set_default_task(...))"
            )
        task_ids = config.task_id(side, default) if default is not None else 0
    if isinstance(task_ids, bool):  # an int to Python, not a task
        raise ValueError(f"{side}_task_ids must hold integer task indices or task names, got {task_ids}")
    if isinstance(task_ids, str):
        task_ids = config.task_id(side, task_ids)
    if isinstance(task_ids, int):
        if not 0 <= task_ids < len(tasks):
            _raise_out_of_range(side, tasks, task_ids)
        return TaskRoute.single(task_ids, batch_size, device)
    task_ids = torch.as_tensor(task_names_to_ids(config, side, task_ids), device=device)
    check_integer_ids(side, task_ids)
    if task_ids.dim() == 0:  # one id for the whole batch
        task_ids = task_ids.expand(batch_size)
    if task_ids.dim() != 1 or task_ids.shape[0] != batch_size:
        raise ValueError(
            f"{side}_task_ids must have shape [batch_size] = [{batch_size}], got {list(task_ids.shape)}"
        )
    task_ids = task_ids.long()
    if is_compiling():  # no host synchronisation in traced code
        return TaskRoute.traced(task_ids, len(tasks))
    host_ids = task_ids.tolist()  # the one synchronisation: validation and layout read the same copy
    bad = next((task_id for task_id in host_ids if not 0 <= task_id < len(tasks)), None)
    if bad is not None:
        _raise_out_of_range(side, tasks, bad)
    return TaskRoute.build(task_ids, host_ids)


def check_integer_ids(side: str, task_ids: torch.Tensor) -> None:
    """`ValueError` unless the id tensor holds integers (not floats, complex numbers or booleans)."""
    if task_ids.dtype.is_floating_point or task_ids.dtype.is_complex or task_ids.dtype == torch.bool:
        raise ValueError(f"{side}_task_ids must hold integer task indices, got dtype {task_ids.dtype}")


def task_names_to_ids(config: HeadSelectionConfigMixin, side: str, task_ids):
    """A list (or tuple) of task names, one per example, as their ids on `side` (a `ValueError` names an unknown
    one); anything else is returned as it is."""
    if isinstance(task_ids, (list, tuple)) and any(isinstance(task_id, str) for task_id in task_ids):
        return [config.task_id(side, task_id) if isinstance(task_id, str) else task_id for task_id in task_ids]
    return task_ids


def task_names(
    config: HeadSelectionConfigMixin,
    task: str | None = None,
    encoder_task: str | None = None,
    decoder_task: str | None = None,
) -> dict[str, str]:
    """`{side: task name}` from the task arguments of `set_default_task`, exports and pipelines.

    `task` names the task of every side that knows it (a name known on neither side is a `ValueError` listing the
    tasks); `encoder_task` / `decoder_task` set one side (checked against its tasks) and take precedence. Sides not
    named are left out.
    """
    names = {}
    if task is not None:
        names = {side: task for side in SIDES if task in config.tasks(side)}
        if not names:
            raise ValueError(
                f"unknown task {task!r}: the encoder tasks are {config.encoder_tasks} and the decoder tasks are "
                f"{config.decoder_tasks}"
            )
    for side, name in (("encoder", encoder_task), ("decoder", decoder_task)):
        if name is not None:
            config.task_id(side, name)  # ValueError naming the known tasks
            names[side] = name
    return names


def _raise_out_of_range(side: str, tasks: list[str], task_id: int):
    raise ValueError(f"{side} task id {task_id} is out of range: the {side} tasks are {dict(enumerate(tasks))}")


def keyed_route(config: HeadSelectionConfigMixin, sides: Sequence[str], routes: dict) -> TaskRoute:
    """The route keyed by the tasks of `sides`: one side's route, or that of the pair keys
    ([`HeadSelectionConfigMixin.routing_key`])."""
    if len(sides) == 1:
        return routes[sides[0]]
    encoder, decoder = routes["encoder"], routes["decoder"]
    if encoder.single_task is not None and decoder.single_task is not None:
        pair = config.routing_key(sides, {"encoder": encoder.single_task, "decoder": decoder.single_task})
        return TaskRoute.single(pair, encoder.ids.shape[0], encoder.ids.device)
    pairs = config.routing_key(sides, {"encoder": encoder.ids, "decoder": decoder.ids})
    if is_compiling():
        return TaskRoute.traced(pairs, config.num_keys(sides))
    return TaskRoute.build(pairs)


@dataclass(frozen=True)
class Routing:
    """How one forward pass is routed, as the model's `forward` hands it to every layer (keyword
    `head_selection_routing`): the [`TaskRoute`] of each side, validated once, and the `HeadDraw` of every component
    (`{component: HeadDraw}`: one Gumbel-sigmoid sample of all layers in training; `None` when evaluating without
    autograd, where the layers use their cached choice)."""

    encoder: TaskRoute
    decoder: TaskRoute | None  # None: the encoder called alone (`generate`'s encoder pass) routes only its side
    draws: dict | None = None
    # sides -> keyed route, built by the first layer that asks: a pair-keyed route of a mixed batch reads the ids on
    # the host, once per forward pass rather than once per layer
    _keyed: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def keyed(self, config: HeadSelectionConfigMixin, sides: Sequence[str]) -> TaskRoute:
        """The route keyed by the tasks of `sides` (see [`keyed_route`]); built once per forward pass (traced:
        every time, no host-side state)."""
        if self.decoder is None and "decoder" in sides:
            raise ValueError(f"this routing has no decoder route, but a layer keyed by {tuple(sides)} needs one")
        if is_compiling():
            return keyed_route(config, sides, {"encoder": self.encoder, "decoder": self.decoder})
        sides = tuple(sides)
        route = self._keyed.get(sides)
        if route is None:
            route = self._keyed[sides] = keyed_route(config, sides, {"encoder": self.encoder, "decoder": self.decoder})
        return route

    @property
    def interleaved(self) -> bool:
        """Whether both sides' layouts are known and some side's tasks do not lie side by side: what [`grouped`]
        can improve. A few attribute reads: checked first on every forward pass."""
        encoder, decoder = self.encoder, self.decoder
        if decoder is None or not (encoder.layout_known and decoder.layout_known):
            return False
        return encoder.interleaved or decoder.interleaved

    def grouped(self) -> tuple[torch.LongTensor, torch.LongTensor, Routing] | None:
        """The batch reordered so that each decoder task's examples, and within them each encoder task's, lie side by
        side: `(order, inverse, the routing of the reordered batch)`. `None` when not [`interleaved`] (nothing to
        gain, or a layout unknown: traced). The layers then take contiguous slices of the batch instead of gathering
        and scattering its rows in every layer."""
        if not self.interleaved:
            return None
        encoder, decoder = self.encoder, self.decoder
        encoder_tasks, decoder_tasks = encoder.example_tasks(), decoder.example_tasks()
        host_order = sorted(range(len(encoder_tasks)), key=lambda index: (decoder_tasks[index], encoder_tasks[index]))
        order, inverse = permutation(host_order, encoder.ids.device)
        routing = Routing(encoder.reordered(order, host_order), decoder.reordered(order, host_order), self.draws)
        return order, inverse, routing


def take_examples(value, index: torch.LongTensor):
    """`value` with its examples (the first dimension of every tensor in it) taken in the order `index`: a tensor, a
    tuple or list of them, a model output or a cache (reordered in place, as beam search reorders it). Scalars and
    other values are returned as they are."""
    if isinstance(value, torch.Tensor):
        return value.index_select(0, index.to(value.device)) if value.dim() else value
    if isinstance(value, (tuple, list)):
        return type(value)(take_examples(item, index) for item in value)
    if isinstance(value, dict):  # model outputs (`ModelOutput` subclasses) and plain dicts
        return type(value)(**{key: take_examples(item, index) for key, item in value.items()})
    if hasattr(value, "reorder_cache"):
        value.reorder_cache(index)
    return value


def route_from_kwargs(config: HeadSelectionConfigMixin, sides: Sequence[str], kwargs: dict, reference: torch.Tensor):
    """The route keyed by `sides` of the keyword arguments a layer got: from the model's [`Routing`], or, for a
    submodule called directly (as `generate` calls the encoder), from the raw `encoder_task_ids` /
    `decoder_task_ids` (absent: the default task); `reference` gives batch size and device. Only the sides asked for
    are validated."""
    routing = kwargs.get(ROUTING_KWARG)
    if routing is not None:
        return routing.keyed(config, sides)
    routes = {
        side: task_route(config, side, kwargs.get(f"{side}_task_ids"), reference.shape[0], reference.device)
        for side in sides
    }
    return keyed_route(config, sides, routes)


__all__ = [
    "EVAL_WEIGHTS_KWARG",
    "LAYER_KWARGS",
    "ROUTING_KWARG",
    "TASK_ID_KWARGS",
    "Routing",
    "TaskRoute",
    "first_tensor",
    "is_compiling",
    "is_strict_exporting",
    "keyed_route",
    "permutation",
    "route_from_kwargs",
    "take_examples",
    "task_names",
    "task_route",
]
