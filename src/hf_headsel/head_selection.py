# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Attention head selection (Gong et al., 2021) for Transformers encoder-decoder models.

The whole mechanism lives in this module and is shared by every model family:

* [`HeadSelectionConfigMixin`]: the configuration keywords and their validation.
* [`HeadSelector`]: the per-task logits `phi` of one attention component (`[tasks, layers, H']`) and the rule
  that turns scores into the `H` heads a task uses (group, subset or task-specific strategy).
* [`TaskRoute`]: the task id of every example of a batch, validated once per forward pass.
* [`HeadSelectionAttentionMixin`]: an attention layer with `H'` candidate heads of which every example uses the
  `H` its task selects. Only the selected heads are projected, attended and cached.
* [`HeadSelectionBaseModelMixin`]: routing, default tasks, the KL term and `selected_heads()` for a top-level model
  (the base models); [`HeadSelectionModelMixin`] adds generation and the KL in the loss for the generation models.

This file is copied next to the saved model for `trust_remote_code=True` loading, so it imports nothing but
`torch` and `transformers`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_flash_attention_utils import FlashAttentionKwargs
from transformers.processing_utils import Unpack

from .adapters import TaskAdapters

COMPONENTS = ("encoder_self", "decoder_self", "decoder_cross")
STRATEGIES = ("group", "subset", "task_specific")
TASK_TYPES = ("lang", "domain")
CROSS_ATTENTION_TASK_KEYS = ("decoder", "encoder", "pair")
SIDES = ("encoder", "decoder")
ROUTE_KWARGS = ("encoder_task_ids", "decoder_task_ids")
DRAWS_KWARG = "head_selection_draws"  # {component: HeadDraw} of one forward pass, passed down to the layers
LAYER_KWARGS = (*ROUTE_KWARGS, DRAWS_KWARG)  # read by the head-selection layers, not passed on to attention functions
ADAPTER_KEYS = ("direction", "task")

# Initial logits: phi ~ U(log 0.01, log 1.0), as in the fairseq reference.
LOGIT_INIT_RANGE = (math.log(0.01), 0.0)


# --------------------------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------------------------


@dataclass(repr=False)
class HeadSelectionConfigMixin:
    """Head-selection keywords shared by every head-selection config (mixed into a stock config dataclass).

    Args:
        encoder_tasks / decoder_tasks (`list[str]`, defaults to `["default"]`):
            Ordered task names of each side. In the `"lang"` setting the encoder is keyed by the source language and
            the decoder by the target language; in the `"domain"` setting both sides list the domains.
        task_type (`str`, defaults to `"lang"`): `"lang"` or `"domain"`.
        head_selection_strategy (`str`, defaults to `"group"`): `"group"` (paper Eq. 6-7), `"subset"` (Eq. 5) or
            `"task_specific"` (Blackwood et al., 2018: task `t` owns candidates `t*H .. t*H+H-1`).
        head_selection_components (`list[str]`, defaults to `["encoder_self", "decoder_self"]`): the attention
            components that select heads, among `encoder_self`, `decoder_self` and `decoder_cross`.
        total_encoder_attention_heads / total_decoder_attention_heads (`int`, defaults to twice the stock head
            count, or `tasks * H` for `task_specific`): the pool size `H'` of each side.
        head_selection_temperature (`float`, defaults to 5.0): Gumbel-sigmoid temperature `tau`.
        head_selection_kl_weight (`float`, defaults to 0.0): weight of the KL term added to the loss.
        default_encoder_task / default_decoder_task (`str`, *optional*): task used when no ids are given.
        cross_attention_task_key (`str`, defaults to `"decoder"`): which task keys the cross-attention selection:
            `"decoder"` (target-specific), `"encoder"` (source-specific) or `"pair"` (the direction).
        task_adapter_dim (`int`, defaults to 0): bottleneck size of the per-task adapters after every encoder and
            decoder layer (Bapna and Firat, 2019; 256 in Gong et al.); 0 means no adapters.
        task_adapter_key (`str`, defaults to `"direction"`): adapters per direction (encoder task x decoder task,
            the multilingual setting) or per `"task"` (encoder adapters by encoder task, decoder adapters by decoder
            task: the multi-domain setting).
    """

    encoder_tasks: list[str] | None = None
    decoder_tasks: list[str] | None = None
    task_type: str = "lang"
    head_selection_strategy: str = "group"
    head_selection_components: list[str] | None = None
    total_encoder_attention_heads: int | None = None
    total_decoder_attention_heads: int | None = None
    head_selection_temperature: float | int = 5.0
    head_selection_kl_weight: float | int = 0.0
    default_encoder_task: str | None = None
    default_decoder_task: str | None = None
    cross_attention_task_key: str = "decoder"
    task_adapter_dim: int = 0
    task_adapter_key: str = "direction"

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.encoder_tasks = _task_list(self.encoder_tasks, "encoder_tasks")
        self.decoder_tasks = _task_list(self.decoder_tasks, "decoder_tasks")
        if self.head_selection_components is None:
            self.head_selection_components = ["encoder_self", "decoder_self"]
        self.head_selection_components = list(self.head_selection_components)
        _check_choice(self.task_type, TASK_TYPES, "task_type")
        _check_choice(self.head_selection_strategy, STRATEGIES, "head_selection_strategy")
        _check_choice(self.cross_attention_task_key, CROSS_ATTENTION_TASK_KEYS, "cross_attention_task_key")
        _check_choice(self.task_adapter_key, ADAPTER_KEYS, "task_adapter_key")
        if self.task_adapter_dim < 0:
            raise ValueError(f"task_adapter_dim must be >= 0 (0: no adapters), got {self.task_adapter_dim}")
        for component in self.head_selection_components:
            _check_choice(component, COMPONENTS, "head_selection_components")
        if len(set(self.head_selection_components)) != len(self.head_selection_components):
            raise ValueError(f"head_selection_components lists a component twice: {self.head_selection_components}")
        if self.head_selection_temperature <= 0:
            raise ValueError(f"head_selection_temperature must be > 0, got {self.head_selection_temperature}")
        if self.head_selection_kl_weight < 0:
            raise ValueError(f"head_selection_kl_weight must be >= 0, got {self.head_selection_kl_weight}")
        for side in SIDES:
            default = getattr(self, f"default_{side}_task")
            if default is not None and default not in self.tasks(side):
                raise ValueError(
                    f"default_{side}_task={default!r} is not one of the {side} tasks {self.tasks(side)}"
                )
            self._set_total_heads(side)

    def _set_total_heads(self, side: str) -> None:
        """Fill in the default `H'` of a side and check the rules of the strategy."""
        name = f"total_{side}_attention_heads"
        heads = self.heads(side)
        components = [c for c in self.head_selection_components if c.startswith(side)]
        strategy = self.head_selection_strategy
        if getattr(self, name) is None:
            if strategy == "task_specific" and components:
                setattr(self, name, self.num_tasks(components[0]) * heads)
            else:
                setattr(self, name, 2 * heads)
        total = getattr(self, name)
        if total < heads:
            raise ValueError(f"{name}={total} must be >= {side}_attention_heads={heads} (H' >= H)")
        if strategy == "group" and total % heads:
            raise ValueError(
                f"the group strategy needs {name}={total} to be a multiple of {side}_attention_heads={heads}"
            )
        for component in components:
            if strategy == "task_specific" and total != self.num_tasks(component) * heads:
                raise ValueError(
                    f"the task_specific strategy needs {name} = tasks x heads = {self.num_tasks(component)} x "
                    f"{heads} = {self.num_tasks(component) * heads} for {component}, got {total}"
                )

    # ---- facts derived from the keywords ----------------------------------------------------------------------

    def tasks(self, side: str) -> list[str]:
        """The task names of `side` (`"encoder"` or `"decoder"`)."""
        return self.encoder_tasks if side == "encoder" else self.decoder_tasks

    def heads(self, side: str) -> int:
        """`H`, the heads one task uses on `side`."""
        return self.encoder_attention_heads if side == "encoder" else self.decoder_attention_heads

    def total_heads(self, side: str) -> int:
        """`H'`, the candidate heads of a selecting attention layer on `side`."""
        return getattr(self, f"total_{side}_attention_heads")

    def component_sides(self, component: str) -> tuple[str, ...]:
        """The sides whose task ids key a component: one side, or both for a cross-attention keyed by pair."""
        if component == "encoder_self":
            return ("encoder",)
        if component == "decoder_cross" and self.cross_attention_task_key == "encoder":
            return ("encoder",)
        if component == "decoder_cross" and self.cross_attention_task_key == "pair":
            return ("encoder", "decoder")
        return ("decoder",)

    def adapter_sides(self, side: str) -> tuple[str, ...]:
        """The sides whose task ids key the adapters of `side`'s layers: both for a direction, else `side`."""
        return SIDES if self.task_adapter_key == "direction" else (side,)

    def num_tasks(self, component: str) -> int:
        """The number of tasks (rows of `phi`) of a component."""
        return self.num_keys(self.component_sides(component))

    def num_keys(self, sides: Sequence[str]) -> int:
        """The number of routing keys made of the tasks of `sides` (a pair key counts every combination)."""
        keys = 1
        for side in sides:  # a loop, not math.prod over a generator: torch.compile traces this in the adapters
            keys *= len(self.tasks(side))
        return keys

    def num_layers(self, component: str) -> int:
        return self.encoder_layers if component == "encoder_self" else self.decoder_layers

    def task_id(self, side: str, name: str) -> int:
        """The index of task `name` on `side`; a `ValueError` lists the known tasks."""
        tasks = self.tasks(side)
        if name not in tasks:
            raise ValueError(f"unknown {side} task {name!r}; the {side} tasks are {tasks}")
        return tasks.index(name)


def _task_list(tasks: Sequence[str] | None, name: str) -> list[str]:
    tasks = ["default"] if tasks is None else list(tasks)
    if not tasks or not all(isinstance(t, str) and t for t in tasks):
        raise ValueError(f"{name} must be a non-empty list of non-empty strings, got {tasks}")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"{name} lists a task twice: {tasks}")
    return tasks


def _check_choice(value, choices: Sequence[str], name: str) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


# --------------------------------------------------------------------------------------------------------------------
# Selector: phi, the choice of heads, the Gumbel-sigmoid sample and the KL
# --------------------------------------------------------------------------------------------------------------------


class HeadSelector(nn.Module):
    """The head choice of one attention component.

    Holds `logits` (`phi`, shape `[tasks, layers, H']`) for the learned strategies (none for `task_specific`) and
    turns scores into the candidate heads each task uses, listed slot by slot:

    * group: slot `g` takes the best-scoring candidate of group `{g + j*H : j < H'/H}`;
    * subset: the `H` best-scoring candidates, in ascending candidate order (the paper's description; the fairseq
      reference fills slots in rank order instead);
    * task_specific: task `t` uses candidates `t*H .. t*H+H-1`.
    """

    def __init__(self, strategy: str, num_tasks: int, num_layers: int, heads: int, total_heads: int):
        super().__init__()
        self.strategy = strategy
        self.num_tasks, self.num_layers = num_tasks, num_layers
        self.heads, self.total_heads = heads, total_heads
        self.learned = strategy != "task_specific"
        self.logits = nn.Parameter(torch.zeros(num_tasks, num_layers, total_heads)) if self.learned else None

    def extra_repr(self) -> str:
        return (
            f"strategy={self.strategy}, tasks={self.num_tasks}, layers={self.num_layers}, "
            f"heads={self.heads}, total_heads={self.total_heads}"
        )

    def choose(self, scores: torch.Tensor) -> torch.LongTensor:
        """Candidate heads per slot, `[..., H]`, from scores `[..., H']` (the highest-scoring ones win)."""
        heads = self.heads
        if self.strategy == "group":
            # candidate g + j*H sits at [..., j, g] of the [..., r, H] view
            best = scores.unflatten(-1, (self.total_heads // heads, heads)).argmax(dim=-2)
            return best * heads + torch.arange(heads, device=scores.device)
        return scores.topk(heads, dim=-1).indices.sort(dim=-1).values

    def task_specific_heads(self, device: torch.device | None = None) -> torch.LongTensor:
        """`[tasks, H]`: task `t` owns candidates `t*H .. t*H+H-1`."""
        offsets = torch.arange(self.num_tasks, device=device)[:, None] * self.heads
        return offsets + torch.arange(self.heads, device=device)

    def draw(self, sample: bool, temperature: float, device: torch.device | None = None,
             gates_per_layer: bool = False) -> "HeadDraw":
        """The heads of every task and layer, `[tasks, layers, H]`, and their gates (`None` when deterministic).

        With `sample=True` the scores are a Gumbel-sigmoid sample `y = sigmoid((phi + (g1 - g2)) / tau)`, redrawn
        on every call, and each selected head gets the straight-through gate `1 - y.detach() + y`: value 1,
        gradient to `phi`. Otherwise the scores are `phi` itself and no gate is applied. The model draws once per
        forward pass for all layers (a few kernels, not a few per layer).

        `gates_per_layer=True` (gradient checkpointing) keeps the one draw (the heads and the noise) but leaves the
        gates to be made by each layer from `phi` and its slice of the noise: no autograd graph then links the
        layers, which reentrant checkpointing needs (each layer's recomputation runs its own backward pass). The
        values and gradients are those of the stacked gates.
        """
        if not self.learned:  # nothing to sample: `sample` is ignored
            return HeadDraw(self.task_specific_heads(device)[:, None].expand(-1, self.num_layers, -1))
        logits = self.logits
        if not sample:
            return HeadDraw(self.choose(logits.detach()))
        noise = _gumbel_like(logits) - _gumbel_like(logits)  # drawn without autograd: it carries no graph
        if gates_per_layer:
            heads = self.choose(torch.sigmoid((logits.detach() + noise) / temperature))
            return HeadDraw(heads, logits=logits, noise=noise, temperature=temperature)
        y = torch.sigmoid((logits + noise) / temperature)
        heads = self.choose(y)
        return HeadDraw(heads, (1.0 - y.detach() + y).gather(-1, heads))

    def layer_choice(self, layer: int, sample: bool, temperature: float):
        """The heads `[tasks, H]` of every task in `layer` and their gates: one layer of a fresh [`draw`]."""
        return self.draw(sample, temperature).layer(layer)

    def selected_heads(self) -> torch.LongTensor:
        """The deterministic choice of every task and layer, `[tasks, layers, H]`."""
        if not self.learned:
            return self.task_specific_heads().unsqueeze(1).expand(-1, self.num_layers, -1).clone()
        with torch.no_grad():
            return self.choose(self.logits)

    def task_kl(self) -> torch.Tensor | None:
        """Closed-form KL between Bernoulli(sigmoid(phi)) and the prior Bernoulli(H/H'), per task: `[tasks]`.

        `None` when the component learns nothing (task-specific strategy, or `H' = H`: every head always used).
        """
        if not self.learned or self.total_heads == self.heads:
            return None
        prior = self.heads / self.total_heads
        logits = self.logits.float()
        log_q, log_not_q = F.logsigmoid(logits), F.logsigmoid(-logits)
        kl = log_q.exp() * (log_q - math.log(prior)) + log_not_q.exp() * (log_not_q - math.log1p(-prior))
        return kl.mean(dim=(1, 2))


@dataclass(frozen=True)
class HeadDraw:
    """The heads every task uses in every layer of one component, `[tasks, layers, H]`, for one forward pass, and
    their straight-through gates (same shape; `None` when the choice is deterministic).

    A draw made for gradient checkpointing has no stacked `gates` but `logits` (`phi`), the detached Gumbel
    `noise` (`g1 - g2`, same shape) and the `temperature`: [`layer`] then makes each layer's gates on its own."""

    heads: torch.LongTensor
    gates: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    noise: torch.Tensor | None = None
    temperature: float = 1.0

    def __post_init__(self):
        # one view per layer, taken at once: the backward pass then stacks one gradient instead of accumulating one
        # zero-padded gradient per layer
        layer_gates = None if self.gates is None else self.gates.unbind(1)
        object.__setattr__(self, "_layer_gates", layer_gates)

    def layer(self, layer: int) -> tuple[torch.LongTensor, torch.Tensor | None]:
        """The heads `[tasks, H]` and gates of one layer."""
        heads = self.heads[:, layer]
        if self.noise is not None:  # same elementwise ops as the stacked gates: same values, same gradients
            y = torch.sigmoid((self.logits[:, layer] + self.noise[:, layer]) / self.temperature).gather(-1, heads)
            return heads, 1.0 - y.detach() + y
        return heads, None if self._layer_gates is None else self._layer_gates[layer]


def _gumbel_like(tensor: torch.Tensor) -> torch.Tensor:
    uniform = torch.rand_like(tensor, dtype=torch.float32).clamp_(1e-10, 1.0 - 1e-7)
    return (-torch.log(-torch.log(uniform))).to(tensor.dtype)


class HeadSelection(nn.ModuleDict):
    """The selectors of a model, one per selecting component: `model.head_selection.<component>.logits`."""

    def __init__(self, config: HeadSelectionConfigMixin):
        super().__init__(
            {
                component: HeadSelector(
                    config.head_selection_strategy,
                    num_tasks=config.num_tasks(component),
                    num_layers=config.num_layers(component),
                    heads=config.heads(_side(component)),
                    total_heads=config.total_heads(_side(component)),
                )
                for component in config.head_selection_components
            }
        )


def _side(component: str) -> str:
    """The side whose layers hold a component."""
    return "encoder" if component == "encoder_self" else "decoder"


# --------------------------------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRoute:
    """The task of every example in a batch, and the batch laid out task by task.

    `tasks` lists the tasks present, in ascending order, and `sizes` their example counts. For a batch that mixes
    tasks, `order` sorts the examples by task (stable) and `inverse` undoes it; both are `None` when one task holds
    the whole batch, so the common single-task batch costs what the stock model costs. Built once per forward pass
    (the only host synchronisation routing needs) and passed down to the layers as a keyword argument.

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

    @classmethod
    def single(cls, task: int, batch_size: int, device: torch.device) -> "TaskRoute":
        """Every example on `task`: no host synchronisation at all."""
        return cls(torch.full((batch_size,), task, dtype=torch.long, device=device), (task,), (batch_size,))

    @classmethod
    def build(cls, ids: torch.LongTensor, num_tasks: int, counts: list[int] | None = None) -> "TaskRoute":
        """The route of valid ids `[batch]` (`counts`: their per-task counts, if already on the host)."""
        if counts is None:
            counts = torch.bincount(ids, minlength=num_tasks).tolist()
        tasks = tuple(task for task, count in enumerate(counts[:num_tasks]) if count)
        sizes = tuple(counts[task] for task in tasks)
        if len(tasks) <= 1:
            return cls(ids, tasks or (0,), sizes or (0,))
        order = torch.argsort(ids, stable=True)
        inverse = torch.empty_like(order).index_copy_(0, order, torch.arange(len(order), device=order.device))
        return cls(ids, tasks, sizes, order, inverse, torch.tensor(tasks, device=ids.device))

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
    def single_task(self) -> int | None:
        return self.tasks[0] if self.tasks is not None and len(self.tasks) == 1 else None

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
        parts = states.index_select(0, self.order).split(self.sizes)
        return torch.cat([fn(task, part) for task, part in zip(self.tasks, parts)]).index_select(0, self.inverse)


def task_route(
    config: HeadSelectionConfigMixin,
    side: str,
    task_ids: torch.Tensor | Sequence[int] | int | str | None,
    batch_size: int,
    device: torch.device,
) -> TaskRoute:
    """Validate the task ids of one side, or fill in the default task, and route them; `ValueError` names the rule
    broken.

    `task_ids` may be a `LongTensor[batch]`, a list of ids, one id, or a task name for the whole batch. When it is
    omitted the side's default task is used, else its only task. One id, a name or the default cost no host
    synchronisation; a tensor costs one (validation and routing share it).
    """
    tasks = config.tasks(side)
    if task_ids is None:
        default = getattr(config, f"default_{side}_task")
        if default is None and len(tasks) > 1:
            raise ValueError(
                f"{side}_task_ids is required: the model has several {side} tasks {tasks} and no default "
                f"(pass {side}_task_ids, or use from_pretrained(..., task=...) / set_default_task(...))"
            )
        task_ids = tasks.index(default) if default is not None else 0
    if isinstance(task_ids, str):
        task_ids = config.task_id(side, task_ids)
    if isinstance(task_ids, int):
        if not 0 <= task_ids < len(tasks):
            _raise_out_of_range(side, tasks, task_ids)
        return TaskRoute.single(task_ids, batch_size, device)
    task_ids = torch.as_tensor(task_ids, device=device)
    if task_ids.dtype.is_floating_point or task_ids.dtype.is_complex or task_ids.dtype == torch.bool:
        raise ValueError(f"{side}_task_ids must hold integer task indices, got dtype {task_ids.dtype}")
    if task_ids.dim() != 1 or task_ids.shape[0] != batch_size:
        raise ValueError(
            f"{side}_task_ids must have shape [batch_size] = [{batch_size}], got {list(task_ids.shape)}"
        )
    task_ids = task_ids.long()
    if _compiling():  # no host synchronisation in traced code
        return TaskRoute.traced(task_ids, len(tasks))
    # Counts per task plus one bin for out-of-range ids, read in the one synchronisation.
    in_range = (task_ids >= 0) & (task_ids < len(tasks))
    binned = torch.where(in_range, task_ids, len(tasks))
    counts = torch.zeros(len(tasks) + 1, dtype=torch.long, device=device).index_add_(0, binned, torch.ones_like(binned))
    counts = counts.tolist()
    if counts[-1]:
        _raise_out_of_range(side, tasks, task_ids[~in_range][0].item())
    return TaskRoute.build(task_ids, len(tasks), counts)


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
    """The route keyed by the tasks of `sides`: one side's route, or pairs `encoder * decoder_tasks + decoder`."""
    if len(sides) == 1:
        return routes[sides[0]]
    encoder, decoder = routes["encoder"], routes["decoder"]
    if encoder.single_task is not None and decoder.single_task is not None:
        pair = encoder.single_task * len(config.decoder_tasks) + decoder.single_task
        return TaskRoute.single(pair, len(encoder.ids), encoder.ids.device)
    pairs = encoder.ids * len(config.decoder_tasks) + decoder.ids
    if _compiling():
        return TaskRoute.traced(pairs, config.num_keys(sides))
    return TaskRoute.build(pairs, config.num_keys(sides))


def route_from_kwargs(config: HeadSelectionConfigMixin, sides: Sequence[str], kwargs: dict, reference: torch.Tensor):
    """The route keyed by `sides`, from the `encoder_task_ids` / `decoder_task_ids` keyword arguments a layer got.

    They are [`TaskRoute`]s when the model's `forward` built them, raw ids when a submodule was called directly
    (as `generate` calls the encoder), or absent (the default task); `reference` gives batch size and device.
    """
    routes = {}
    for side in sides:
        value = kwargs.get(f"{side}_task_ids")
        if not isinstance(value, TaskRoute):
            value = task_route(config, side, value, reference.shape[0], reference.device)
        routes[side] = value
    return keyed_route(config, sides, routes)


# --------------------------------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------------------------------


MIXED_BATCH_PROJECTIONS = ("auto", "grouped", "gathered")
#: The parts of the query/key/value projection a call needs: all three from one input (self-attention), or the
#: queries and the keys/values from different inputs (cross-attention). Rows of the stacked q/k/v weights, in units
#: of one projection's rows.
PARTS = {"qkv": (0, 3), "q": (0, 1), "kv": (1, 3)}


class HeadSelectionAttentionMixin:
    """Turns a stock attention layer (`q_proj`, `k_proj`, `v_proj`, `out_proj`) into one with `H'` candidate heads.

    Mixed in before the stock attention class, so output capture (`output_attentions=True`) still recognises it.
    The query/key/value projections produce `H' * head_dim` features, candidate `h` owning rows
    `h*head_dim .. (h+1)*head_dim - 1`. Each example projects only the `H` heads its task selects: the rows of the
    three projections are gathered into one `[3 * H * head_dim, d_model]` matrix per task (once per task in
    evaluation), so self-attention takes one matmul where the stock layer takes three. It attends with them like the
    stock layer, and the output projection (`d_model x d_model`) sees them in slots `0 .. H-1`. The KV cache holds
    only the selected heads.
    """

    eager_attention: Callable  # the stock family's eager attention function, set by the family module
    #: How a batch that mixes tasks is projected (see [`_projector`]): `"grouped"` (one matmul per task present, on
    #: its examples and its heads' rows: the stock model's work), `"gathered"` (one matmul over all `H'` candidates,
    #: then each example gathers its heads), or `"auto"`: gathered on CUDA and for one-token decoding steps, grouped
    #: otherwise. Set it on the class or on a layer; single-task batches always project only their selected heads.
    mixed_batch_projection: str = "auto"

    def enable_head_selection(self, component: str, layer: int, total_heads: int, selector: HeadSelector) -> None:
        self.component, self.selection_layer, self.total_heads = component, layer, total_heads
        bias = self.q_proj.bias is not None
        width = total_heads * self.head_dim
        self.q_proj = nn.Linear(self.embed_dim, width, bias=bias)
        self.k_proj = nn.Linear(self.embed_dim, width, bias=bias)
        self.v_proj = nn.Linear(self.embed_dim, width, bias=bias)
        # A plain reference, not a submodule: `phi` is registered once, on the model.
        self.__dict__["selector"] = selector
        self.__dict__["_task_weights_cache"] = {}

    def extra_repr(self) -> str:
        return (
            f"component={self.component}, layer={self.selection_layer}, heads={self.num_heads}, "
            f"total_heads={self.total_heads}"
        )

    def _apply(self, fn, *args, **kwargs):
        # `.to()`, `.half()`, `.cuda()`: the cached weight slices belong to the old tensors.
        self._task_weights_cache.clear()
        return super()._apply(fn, *args, **kwargs)

    # ---- weights ----------------------------------------------------------------------------------------------

    def _stacked_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The q, k and v weights (and biases) of all `H'` candidates stacked: `[3 * H' * head_dim, d_model]`."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
        return torch.cat([p.weight for p in projections]), bias

    def _task_weights(self, heads: torch.LongTensor) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The stacked q/k/v weight and bias of each row of `heads` (`[tasks, H]`): `[3 * H * head_dim, d_model]`,
        rows slot by slot. One gather for all the tasks, so training pays one scatter in the backward pass, not one
        per task and projection."""
        weight, bias = self._stacked_weights()
        rows = (heads.to(weight.device)[:, None, :, None] * self.head_dim + self._row_offsets(weight.device))
        rows = rows.flatten(1)  # [tasks, 3 * H * head_dim]

        def take(tensor: torch.Tensor | None) -> list:
            if tensor is None:
                return [None] * len(heads)
            if len(heads) == 1:
                return [tensor.index_select(0, rows[0])]
            return tensor.index_select(0, rows.flatten()).unflatten(0, rows.shape).unbind(0)

        return list(zip(take(weight), take(bias)))

    def _row_offsets(self, device: torch.device) -> torch.LongTensor:
        """`[3, 1, head_dim]`: the row of dimension `d` of head `h` in projection `p` (q, k, v = 0, 1, 2) of the
        stacked weights is `p * H' * head_dim + h * head_dim + d`; this holds `p * H' * head_dim + d`. Made once
        per device."""
        if _compiling():  # traced: a few constant kernels, no module state written
            projection = torch.arange(3, device=device)[:, None, None] * self.q_proj.out_features
            return projection + torch.arange(self.head_dim, device=device)
        offsets = self.__dict__.setdefault("_row_offsets_by_device", {})
        if device not in offsets:
            projection = torch.arange(3, device=device)[:, None, None] * self.q_proj.out_features
            offsets[device] = projection + torch.arange(self.head_dim, device=device)
        return offsets[device]

    def _weights_state(self) -> tuple:
        """What the cached weights depend on: each source tensor (by identity) and its in-place version counter."""
        # Read through `_modules` / `_parameters`: this runs in every layer call, and `nn.Module.__getattr__` is slow.
        modules = self._modules
        projections = ("q_proj", "k_proj", "v_proj")
        params = [modules[name]._parameters[kind] for name in projections for kind in ("weight", "bias")]
        params.append(self.selector.logits)
        return tuple((id(p), p._version) for p in params if p is not None)

    def _eval_cached(self, key, compute: Callable[[], object]):
        """`compute()` cached under `key` until the weights or `phi` change (evaluation without autograd only).

        Recomputed when a projection weight or `phi` is replaced (`load_state_dict(assign=True)`) or changed in place
        through autograd-visible ops (optimizer steps, `load_state_dict`, `copy_` under `no_grad`), and dropped when
        the module moves (`.to()`) or switches between `train()` and `eval()`. Writes through `param.data` bypass
        the version counters: call `model.clear_head_selection_cache()` after those.

        Under torch.compile the value is computed in the graph instead: the `(id, _version)` guard is host-side
        state that dynamo cannot trace, and a compiled graph must follow the weights without it.
        """
        if _compiling():
            return compute()
        state = self._weights_state()
        cached = self._task_weights_cache.get(key)
        if cached is None or cached[0] != state:
            # keep the source tensors alive with the entry, so that their ids cannot be reused by new tensors
            sources = [p for p in self.parameters(recurse=True)] + [self.selector.logits]
            cached = (state, compute(), sources)
            self._task_weights_cache[key] = cached
        return cached[1]

    def clear_task_weights_cache(self) -> None:
        self._task_weights_cache.clear()

    def train(self, mode: bool = True):
        self._task_weights_cache.clear()
        return super().train(mode)

    # ---- the choice of heads ----------------------------------------------------------------------------------

    def _uses_eval_cache(self) -> bool:
        return not (self.training or torch.is_grad_enabled())

    def _layer_choice(self, draws: dict | None, device: torch.device) -> tuple[torch.LongTensor, torch.Tensor | None]:
        """The heads `[tasks, H]` of this layer and their gates (`None` when deterministic).

        From the draw the model made for this forward pass (`head_selection_draws`, one Gumbel-sigmoid sample of all
        layers in training); without one (a layer called directly), drawn here by the same rule. Cached in
        evaluation without autograd.
        """
        if draws is not None:
            return draws[self.component].layer(self.selection_layer)
        if self._uses_eval_cache():
            layer = self.selection_layer
            return self._eval_cached("heads", lambda: self.selector.draw(False, 1.0, device).layer(layer))
        draw = self.selector.draw(self.training, float(self.config.head_selection_temperature), device)
        return draw.layer(self.selection_layer)

    def _cached_task_weights(self, task: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The deterministic stacked q/k/v weight and bias of `task`, for evaluation without autograd."""
        def compute():
            heads = self._layer_choice(None, device)[0]
            return self._task_weights(heads[task : task + 1])[0]

        return self._eval_cached(task, compute)

    # ---- projections ------------------------------------------------------------------------------------------

    def _gathers_mixed_batches(self, states: torch.Tensor) -> bool:
        mode = self.mixed_batch_projection
        if mode not in MIXED_BATCH_PROJECTIONS:
            raise ValueError(f"mixed_batch_projection must be one of {MIXED_BATCH_PROJECTIONS}, got {mode!r}")
        # auto: where kernels are launch-bound (CUDA) or the batch is one decoding step, a fixed number of kernels
        # beats one group of kernels per task; otherwise grouped does the stock model's arithmetic.
        return mode == "gathered" or (mode == "auto" and (states.device.type == "cuda" or states.shape[-2] == 1))

    def _projector(self, route: TaskRoute, states: torch.Tensor, draws: dict | None):
        """A function `project(x, part)` giving the selected heads' queries, keys and/or values of `x` (`part` in
        [`PARTS`]), each `[batch, time, H, head_dim]`, and the gates (`[H]` or `[batch, H]`; `None` without
        sampling).

        A single-task batch (and, with `mixed_batch_projection="grouped"`, every batch) projects only the selected
        heads' weight rows, one matmul per task present. `"gathered"` projects a mixed batch onto all `H'`
        candidates and gathers each example's `H` heads: `H'/H` times the projection work, but a fixed number of
        kernels and no loop over tasks, which is what counts where small kernels are launch-bound (CUDA).
        """
        # without autograd in evaluation, the choice and the weights come from the layer's cache
        heads, gates = (None, None) if self._uses_eval_cache() else self._layer_choice(draws, states.device)
        if gates is not None:  # one task's gates broadcast over the batch, else one row per example
            gates = gates[route.single_task] if route.single_task is not None else gates[route.ids]
        # a traced route (torch.compile) does not know which tasks it holds: each example gathers its heads
        if route.single_task is None and (not route.layout_known or self._gathers_mixed_batches(states)):
            return self._gathered_projector(route, heads, states.device), gates
        weights = self._weights_by_task(route, heads, states.device)
        return partial(self._project_grouped, route=route, weights=weights), gates

    def _weights_by_task(self, route: TaskRoute, heads: torch.LongTensor | None, device: torch.device) -> Callable:
        """task -> its stacked q/k/v weight and bias: from the cache (`heads=None`), or gathered for every task of
        `route` at once from `heads` (`[tasks, H]`)."""
        if heads is None:
            return partial(self._cached_task_weights, device=device)
        first = route.tasks[0]
        present = heads[first : first + 1] if route.task_index is None else heads[route.task_index]
        return dict(zip(route.tasks, self._task_weights(present))).__getitem__

    def _gathered_projector(self, route: TaskRoute, heads: torch.LongTensor | None, device: torch.device):
        """`project(x, part)` over all `H'` candidates, each example gathering its task's heads (`heads=None`: the
        cached choice and stacked weights)."""
        if heads is None:
            heads = self._layer_choice(None, device)[0]
            weight, bias = self._eval_cached("all", self._stacked_weights)
        else:
            weight, bias = self._stacked_weights()
        return partial(self._project_gathered, weight=weight, bias=bias, example_heads=heads[route.ids])

    def _part_rows(self, weight: torch.Tensor, bias: torch.Tensor | None, part: str, heads: int):
        """The rows of `part` of a stacked q/k/v weight and bias holding `heads` heads per projection."""
        if part == "qkv":  # all of them: a full-range slice would still cost a copy in the backward pass
            return weight, bias
        start, stop = (index * heads * self.head_dim for index in PARTS[part])
        return weight[start:stop], None if bias is None else bias[start:stop]

    def _project_grouped(self, x: torch.Tensor, part: str, route: TaskRoute, weights: Callable[[int], tuple]):
        """`x @ W_task^T + b_task` on the rows of `part`, one matmul per task present in the batch."""
        def project(task: int, examples: torch.Tensor) -> torch.Tensor:
            return F.linear(examples, *self._part_rows(*weights(task), part, self.num_heads))

        return route.per_task(x, project).unflatten(-1, (-1, self.num_heads, self.head_dim)).unbind(-3)

    def _project_gathered(self, x: torch.Tensor, part: str, weight: torch.Tensor, bias: torch.Tensor | None,
                          example_heads: torch.LongTensor):
        """All `H'` candidates of `part`, then each example's heads `example_heads` (`[batch, H]`) gathered."""
        candidates = F.linear(x, *self._part_rows(weight, bias, part, self.total_heads))
        candidates = candidates.unflatten(-1, (-1, self.total_heads, self.head_dim))  # [batch, time, n, H', hd]
        index = example_heads[:, None, None, :, None].expand(*candidates.shape[:3], -1, self.head_dim)
        return candidates.gather(3, index).unbind(-3)

    # ---- forward ----------------------------------------------------------------------------------------------

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values=None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Unpack[FlashAttentionKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Input shape: Batch x Time x Channel. Mirrors the stock attention, heads chosen per example."""
        route = route_from_kwargs(self.config, self.config.component_sides(self.component), kwargs, hidden_states)
        project, gates = self._projector(route, hidden_states, kwargs.get(DRAWS_KWARG))
        kwargs = {key: value for key, value in kwargs.items() if key not in LAYER_KWARGS}

        is_cross_attention = key_value_states is not None
        key_states = value_states = None
        if is_cross_attention:
            (query_states,) = project(hidden_states, "q")
        else:  # queries, keys and values in one matmul
            query_states, key_states, value_states = project(hidden_states, "qkv")
        query_states = query_states.transpose(1, 2)

        is_updated = False
        if past_key_values is not None:
            if isinstance(past_key_values, EncoderDecoderCache):
                is_updated = past_key_values.is_updated.get(self.layer_idx)
                if is_cross_attention:
                    curr_past_key_values = past_key_values.cross_attention_cache
                else:
                    curr_past_key_values = past_key_values.self_attention_cache
            else:
                curr_past_key_values = past_key_values

        if is_cross_attention and past_key_values is not None and is_updated:
            key_states = curr_past_key_values.layers[self.layer_idx].keys
            value_states = curr_past_key_values.layers[self.layer_idx].values
        else:
            if is_cross_attention:
                key_states, value_states = project(key_value_states, "kv")
            key_states, value_states = key_states.transpose(1, 2), value_states.transpose(1, 2)
            if past_key_values is not None:
                key_states, value_states = curr_past_key_values.update(key_states, value_states, self.layer_idx)
                if is_cross_attention and isinstance(past_key_values, EncoderDecoderCache):
                    past_key_values.is_updated[self.layer_idx] = True

        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, type(self).eager_attention
        )
        attn_output, attn_weights = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=0.0 if not self.training else self.dropout,
            scaling=self.scaling,
            **kwargs,
        )
        if gates is not None:  # [batch, time, H, head_dim] * [batch or 1, 1, H, 1]
            attn_output = attn_output * gates[..., None, :, None].to(attn_output.dtype)
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


# --------------------------------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class HeadSelSeq2SeqLMOutput(Seq2SeqLMOutput):
    """[`Seq2SeqLMOutput`] plus `head_selection_kl`: the token-weighted KL of the batch (computed when `labels` are
    given), already added to `loss` with weight `config.head_selection_kl_weight`.

    With `return_dict=False` the model returns `to_tuple()` of this output: the stock model's tuple (the fields that
    are not `None`, in order), then `head_selection_kl` as the last element when `labels` were given."""

    head_selection_kl: torch.FloatTensor | None = None


class HeadSelectionBaseModelMixin:
    """Routing, default tasks, the KL term and `selected_heads()` for a stock encoder-decoder model, with or without
    its language-model head.

    Mixed in before the stock base model class (`MarianModel`, `Speech2TextModel`); [`HeadSelectionModelMixin`]
    adds generation for the `...ForConditionalGeneration` classes. The family module calls
    [`~HeadSelectionBaseModelMixin.install_head_selection`] at the end of `__init__` and routes its `forward`
    through [`~HeadSelectionBaseModelMixin.task_routes`].

    The selectors live at the top of either model (`head_selection.<component>.logits`), not under the base model
    prefix: Transformers loads keys that match as they are, so a checkpoint of either class loads into the other
    with its selectors.
    """

    attention_class: type  # the family's head-selection attention class
    #: `{Auto class name: model class name}` of the family, written to `config.auto_map` by `save_pretrained` so
    #: that every Auto class the stock family supports loads the saved model with `trust_remote_code=True`.
    head_selection_auto_classes: dict[str, str] = {}

    def install_head_selection(self) -> None:
        """Add the selectors and swap the attention of every selecting component for a head-selection one."""
        config = self.config
        self.head_selection = HeadSelection(config)
        base = self.base_model  # the model itself for the base model classes
        for component, selector in self.head_selection.items():
            layers = base.encoder.layers if component == "encoder_self" else base.decoder.layers
            name = "encoder_attn" if component == "decoder_cross" else "self_attn"
            for index, layer in enumerate(layers):
                stock = getattr(layer, name)
                attention = self.attention_class(
                    embed_dim=stock.embed_dim,
                    num_heads=stock.num_heads,
                    dropout=stock.dropout,
                    is_decoder=stock.is_decoder,
                    bias=stock.q_proj.bias is not None,
                    is_causal=stock.is_causal,
                    config=config,
                    layer_idx=index if stock.layer_idx is None else stock.layer_idx,
                )
                attention.enable_head_selection(component, index, config.total_heads(_side(component)), selector)
                setattr(layer, name, attention)
        if config.task_adapter_dim:
            self._install_task_adapters()
        self.post_init()  # initialises only the new modules: the stock ones are marked initialised already

    def _install_task_adapters(self) -> None:
        """A [`TaskAdapters`] after every encoder and decoder layer (`layer.task_adapter`), applied by a forward
        hook that reads the task ids from the layer's keyword arguments."""
        config, base = self.config, self.base_model
        for side, layers in (("encoder", base.encoder.layers), ("decoder", base.decoder.layers)):
            sides = config.adapter_sides(side)
            for layer in layers:
                layer.task_adapter = TaskAdapters(config.num_keys(sides), config.d_model, config.task_adapter_dim)
                layer.register_forward_hook(_adapter_hook(config, sides), with_kwargs=True)

    def initialize_weights(self):
        super().initialize_weights()
        # The stock encoder and decoder are sub-models that initialise their own children with their own
        # `_init_weights`, which knows nothing of adapters: initialise those here (loaded tensors are skipped).
        for module in self.modules():
            if isinstance(module, TaskAdapters):
                self._init_weights(module)
                for parameter in module.parameters():
                    parameter._is_hf_initialized = True

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, HeadSelector) and module.logits is not None:
            init.uniform_(module.logits, *LOGIT_INIT_RANGE)
        if isinstance(module, TaskAdapters):  # up-projections at zero: fresh adapters change nothing
            init.ones_(module.layer_norm_weight)
            init.zeros_(module.layer_norm_bias)
            init.normal_(module.down_weight, std=self.config.init_std)
            init.zeros_(module.down_bias)
            init.zeros_(module.up_weight)
            init.zeros_(module.up_bias)

    # ---- tasks ------------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, *args, task: str | None = None, encoder_task: str | None = None,
                        decoder_task: str | None = None, **kwargs):
        """`PreTrainedModel.from_pretrained`, plus default tasks: see [`~HeadSelectionModelMixin.set_default_task`]."""
        model = super().from_pretrained(*args, **kwargs)
        if task is not None or encoder_task is not None or decoder_task is not None:
            model.set_default_task(task, encoder_task=encoder_task, decoder_task=decoder_task)
        return model

    def set_default_task(self, task: str | None = None, *, encoder_task: str | None = None,
                         decoder_task: str | None = None) -> None:
        """Set the tasks used when no `encoder_task_ids` / `decoder_task_ids` are given.

        `task` becomes the default of every side that knows it (a name known on neither side is an error);
        `encoder_task` / `decoder_task` set one side explicitly and take precedence.
        """
        for side, name in task_names(self.config, task, encoder_task, decoder_task).items():
            setattr(self.config, f"default_{side}_task", name)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`; with remote code (the classes registered for an Auto class, as
        importing `hf_headsel` does), `config.auto_map` names every model class of the family, so that `AutoModel`
        and the family's generation Auto class both load the folder, as they load a stock checkpoint."""
        if self._auto_class is not None and self.head_selection_auto_classes:
            module = type(self).__module__.split(".")[-1]  # the flat module name the saved file will have
            auto_map = dict(getattr(self.config, "auto_map", None) or {})
            auto_map.update({auto: f"{module}.{name}" for auto, name in self.head_selection_auto_classes.items()})
            self.config.auto_map = auto_map
        return super().save_pretrained(save_directory, *args, **kwargs)

    def clear_head_selection_cache(self) -> None:
        """Drop the per-task weight slices cached for evaluation (needed only after writes through `param.data`)."""
        for module in self.modules():
            if isinstance(module, HeadSelectionAttentionMixin):
                module.clear_task_weights_cache()

    def selected_heads(self) -> dict[str, torch.LongTensor]:
        """The deterministic choice: `{component: LongTensor[tasks, layers, H]}`, candidates listed slot by slot."""
        return {component: selector.selected_heads() for component, selector in self.head_selection.items()}

    # ---- forward helpers --------------------------------------------------------------------------------------

    def task_routes(self, encoder_task_ids, decoder_task_ids, batch_size: int, device: torch.device) -> dict:
        """The keyword arguments that route a forward pass through the layers: the ids of both sides, validated once,
        as [`TaskRoute`]s, and (unless evaluating without autograd, where the layers cache their choice) the
        [`HeadDraw`] of every component: one Gumbel-sigmoid sample of all layers per forward pass in training."""
        config = self.config
        routes = {}
        if self.training or torch.is_grad_enabled():
            temperature = float(config.head_selection_temperature)
            # under gradient checkpointing every layer makes its own gates (see `HeadSelector.draw`)
            per_layer = self.training and self._checkpoints_layers()
            routes[DRAWS_KWARG] = {
                component: selector.draw(self.training, temperature, device, gates_per_layer=per_layer)
                for component, selector in self.head_selection.items()
            }
        for side, ids in (("encoder", encoder_task_ids), ("decoder", decoder_task_ids)):
            if not isinstance(ids, TaskRoute):
                ids = self._remembered_route(side, ids, batch_size, device)
            routes[f"{side}_task_ids"] = ids
        return routes

    def _checkpoints_layers(self) -> bool:
        """Whether gradient checkpointing is on for any encoder or decoder layer."""
        base = self.base_model
        return any(getattr(layer, "gradient_checkpointing", False) for layer in (*base.encoder.layers,
                                                                                  *base.decoder.layers))

    def _remembered_route(self, side: str, ids, batch_size: int, device: torch.device) -> TaskRoute:
        """[`task_route`], remembered for the id tensor of the last call: `generate` passes the same tensor at every
        decoding step, which then costs no validation and no host synchronisation."""
        if _compiling():  # the memo is host-side state keyed on `_version`: traced code routes afresh
            return task_route(self.config, side, ids, batch_size, device)
        memo = self.__dict__.setdefault("_route_memo", {})
        if isinstance(ids, torch.Tensor):
            remembered = memo.get(side)
            # the tensor itself is kept in the memo, so its id cannot be reused; `_version` catches in-place writes
            if remembered is not None and remembered[0] is ids and remembered[1] == ids._version:
                route = remembered[2]
                if route.ids.shape[0] == batch_size and route.ids.device == device:
                    return route
        route = task_route(self.config, side, ids, batch_size, device)
        memo[side] = (ids, ids._version, route) if isinstance(ids, torch.Tensor) else None
        return route

    def head_selection_kl(self, routes: dict, labels: torch.LongTensor) -> torch.Tensor:
        """The batch KL: per component, the mean of the task KLs weighted by each task's target tokens."""
        tokens = (labels != -100).sum(dim=-1).float()
        # no target token at all: weigh the examples equally (`where`, not `if`: no host synchronisation, and
        # traceable by torch.compile)
        tokens = torch.where(tokens.sum() == 0, torch.ones_like(tokens), tokens)
        side_routes = {side: routes[f"{side}_task_ids"] for side in SIDES}
        total = tokens.new_zeros(())
        for component, selector in self.head_selection.items():
            task_kl = selector.task_kl()
            if task_kl is None:
                continue
            route = keyed_route(self.config, self.config.component_sides(component), side_routes)
            total = total + (task_kl.to(tokens.device)[route.ids] * tokens).sum() / tokens.sum()
        return total

class HeadSelectionModelMixin(HeadSelectionBaseModelMixin):
    """[`HeadSelectionBaseModelMixin`] plus generation, the KL in the loss, task export and upcycling, for the
    stock `...ForConditionalGeneration` classes (mixed in before them). The family's `forward` wraps the stock
    output with [`~HeadSelectionModelMixin.add_head_selection_kl`].
    """

    def generate(self, inputs: torch.Tensor | None = None, *args, encoder_task_ids=None, decoder_task_ids=None,
                 **kwargs):
        """`GenerationMixin.generate`, every example routed by its `encoder_task_ids` / `decoder_task_ids`.

        `generate` hands the encoder no `decoder_*` keyword; when the encoder needs the decoder tasks too (adapters
        keyed by direction) the encoder outputs are computed here, with both.
        """
        # lists must become tensors for `generate` to expand them to batch x beams
        encoder_task_ids, decoder_task_ids = (
            torch.as_tensor(ids) if isinstance(ids, (list, tuple)) else ids
            for ids in (encoder_task_ids, decoder_task_ids)
        )
        encoder_uses_decoder_tasks = "decoder" in self.config.adapter_sides("encoder") and self.config.task_adapter_dim
        if encoder_uses_decoder_tasks and kwargs.get("encoder_outputs") is None:
            inputs = kwargs.pop(self.main_input_name, inputs)
            encoder_inputs = {self.main_input_name: inputs} if inputs is not None else {
                "inputs_embeds": kwargs.pop("inputs_embeds", None)}
            with torch.no_grad():
                kwargs["encoder_outputs"] = self.get_encoder()(
                    **encoder_inputs,
                    attention_mask=kwargs.get("attention_mask"),
                    encoder_task_ids=encoder_task_ids,
                    decoder_task_ids=decoder_task_ids,
                    output_attentions=kwargs.get("output_attentions", self.generation_config.output_attentions),
                    output_hidden_states=kwargs.get(
                        "output_hidden_states", self.generation_config.output_hidden_states
                    ),
                    return_dict=True,
                )
        return super().generate(
            inputs, *args, encoder_task_ids=encoder_task_ids, decoder_task_ids=decoder_task_ids, **kwargs
        )

    def export_task_model(self, task: str | None = None, *, encoder_task: str | None = None,
                          decoder_task: str | None = None):
        """A stock model (H heads) computing what this model computes for one task: see
        `conversion.export_task_model`."""
        from .conversion import export_task_model  # imported here: conversion imports this module

        return export_task_model(self, task, encoder_task=encoder_task, decoder_task=decoder_task)

    @classmethod
    def from_stock(cls, stock_model_or_path, **head_selection_keywords):
        """A head-selection model upcycled from a stock checkpoint, equal to it for every task at initialisation:
        see `conversion.from_stock`."""
        from .conversion import from_stock

        return from_stock(cls, stock_model_or_path, **head_selection_keywords)

    def add_head_selection_kl(self, outputs, labels, routes) -> HeadSelSeq2SeqLMOutput:
        """Wrap stock outputs; with `labels`, add `head_selection_kl_weight * KL` to the loss."""
        # `return_dict=True` was asked of the stock forward; a `return_dict=False` tuple is made by `can_return_tuple`
        # on the head-selection forward, from this output (`head_selection_kl` last).
        outputs = HeadSelSeq2SeqLMOutput(**outputs)
        if labels is not None:
            kl = self.head_selection_kl(routes, labels)
            outputs.head_selection_kl = kl
            if self.config.head_selection_kl_weight:
                outputs.loss = outputs.loss + self.config.head_selection_kl_weight * kl
        return outputs


def _adapter_hook(config: HeadSelectionConfigMixin, sides: tuple[str, ...]):
    """A forward hook running a layer's output through the adapter of every example's task."""

    def hook(layer, args, kwargs, output):
        hidden_states = output[0] if isinstance(output, tuple) else output
        route = route_from_kwargs(config, sides, kwargs, hidden_states)
        adapted = layer.task_adapter(hidden_states, route)
        return (adapted, *output[1:]) if isinstance(output, tuple) else adapted

    return hook


def first_tensor(*candidates) -> torch.Tensor:
    """The first given tensor (or first tensor of a given model output): its batch size and device route the batch."""
    for candidate in candidates:
        if candidate is None:
            continue
        return candidate if isinstance(candidate, torch.Tensor) else candidate[0]
    raise ValueError("cannot infer the batch size: pass the model inputs, encoder_outputs or decoder inputs")


def _compiling() -> bool:
    """Whether torch.compile (dynamo) is tracing: host-side caches and host synchronisations are left out then."""
    return torch.compiler.is_compiling()
