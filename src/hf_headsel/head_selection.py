# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Attention head selection (Gong et al., 2021) for Transformers encoder-decoder models.

The whole mechanism lives in this module and is shared by every model family:

* [`HeadSelectionConfigMixin`]: the configuration keywords and their validation.
* [`HeadSelector`]: the per-task logits `phi` of one attention component (`[tasks, layers, H']`) and the rule
  that turns scores into the `H` heads a task uses (group, subset or task-specific strategy).
* [`TaskRoute`]: the task id of every example of a batch, validated once per forward pass.
* [`HeadSelectionAttentionMixin`]: an attention layer with `H'` candidate heads of which every example uses the
  `H` its task selects. Only the selected heads are projected, attended and cached.
* [`HeadSelectionModelMixin`]: routing, default tasks, the KL term and `selected_heads()` for the top-level model.

This file is copied next to the saved model for `trust_remote_code=True` loading, so it imports nothing but
`torch` and `transformers`.
"""

from __future__ import annotations

import math
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

from .adapters import TaskAdapters

COMPONENTS = ("encoder_self", "decoder_self", "decoder_cross")
STRATEGIES = ("group", "subset", "task_specific")
TASK_TYPES = ("lang", "domain")
CROSS_ATTENTION_TASK_KEYS = ("decoder", "encoder", "pair")
SIDES = ("encoder", "decoder")
ROUTE_KWARGS = ("encoder_task_ids", "decoder_task_ids")
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
        return math.prod(len(self.tasks(side)) for side in sides)

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

    def layer_choice(self, layer: int, sample: bool, temperature: float):
        """The heads `[tasks, H]` of every task in `layer`, and their gates (`None` when deterministic).

        With `sample=True` the scores are a Gumbel-sigmoid sample `y = sigmoid((phi + g1 - g2) / tau)`, redrawn on
        every call, and each selected head gets the straight-through gate `1 - y.detach() + y`: value 1, gradient
        to `phi`. Otherwise the scores are `phi` itself and no gate is applied.
        """
        if not self.learned:
            return self.task_specific_heads(device=None if self.logits is None else self.logits.device), None
        logits = self.logits[:, layer]
        if not sample:
            return self.choose(logits), None
        y = torch.sigmoid((logits + _gumbel_like(logits) - _gumbel_like(logits)) / temperature)
        heads = self.choose(y)
        gates = 1.0 - y.detach() + y
        return heads, gates.gather(-1, heads)

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
    """The task of every example in a batch, and the examples of every task present.

    `groups` holds `(task, example_indices)` pairs; `example_indices` is `None` when one task holds the whole batch,
    so the common single-task batch costs what the stock model costs. Built once per forward pass (the only host
    synchronisation routing needs) and passed down to the attention layers as a keyword argument.
    """

    ids: torch.LongTensor
    groups: tuple[tuple[int, torch.LongTensor | None], ...]

    @classmethod
    def build(cls, ids: torch.LongTensor, num_tasks: int) -> "TaskRoute":
        counts = torch.bincount(ids, minlength=num_tasks).tolist()
        present = [task for task, count in enumerate(counts) if count]
        if len(present) == 1:
            return cls(ids, ((present[0], None),))
        order = torch.argsort(ids, stable=True)
        indices = order.split([counts[task] for task in present])
        return cls(ids, tuple(zip(present, indices)))

    @property
    def single_task(self) -> int | None:
        return self.groups[0][0] if len(self.groups) == 1 else None


def resolve_task_ids(
    config: HeadSelectionConfigMixin,
    side: str,
    task_ids: torch.Tensor | Sequence[int] | int | str | None,
    batch_size: int,
    device: torch.device,
) -> torch.LongTensor:
    """Validate the task ids of one side, or fill in the default task; `ValueError` names the rule broken.

    `task_ids` may be a `LongTensor[batch]`, a list of ids, one id, or a task name for the whole batch. When it is
    omitted the side's default task is used, else its only task.
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
        return torch.full((batch_size,), task_ids, dtype=torch.long, device=device)
    task_ids = torch.as_tensor(task_ids, device=device)
    if task_ids.dtype.is_floating_point or task_ids.dtype.is_complex or task_ids.dtype == torch.bool:
        raise ValueError(f"{side}_task_ids must hold integer task indices, got dtype {task_ids.dtype}")
    if task_ids.dim() != 1 or task_ids.shape[0] != batch_size:
        raise ValueError(
            f"{side}_task_ids must have shape [batch_size] = [{batch_size}], got {list(task_ids.shape)}"
        )
    low, high = torch.stack(torch.aminmax(task_ids)).tolist() if batch_size else (0, 0)
    if low < 0 or high >= len(tasks):
        _raise_out_of_range(side, tasks, low if low < 0 else high)
    return task_ids.long()


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
    pair = routes["encoder"].ids * len(config.decoder_tasks) + routes["decoder"].ids
    return TaskRoute.build(pair, config.num_keys(sides))


def route_from_kwargs(config: HeadSelectionConfigMixin, sides: Sequence[str], kwargs: dict, reference: torch.Tensor):
    """The route keyed by `sides`, from the `encoder_task_ids` / `decoder_task_ids` keyword arguments a layer got.

    They are [`TaskRoute`]s when the model's `forward` built them, raw ids when a submodule was called directly
    (as `generate` calls the encoder), or absent (the default task); `reference` gives batch size and device.
    """
    routes = {}
    for side in sides:
        value = kwargs.get(f"{side}_task_ids")
        if not isinstance(value, TaskRoute):
            ids = resolve_task_ids(config, side, value, reference.shape[0], reference.device)
            value = TaskRoute.build(ids, len(config.tasks(side)))
        routes[side] = value
    return keyed_route(config, sides, routes)


# --------------------------------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------------------------------


MIXED_BATCH_PROJECTIONS = ("auto", "grouped", "gathered")


class HeadSelectionAttentionMixin:
    """Turns a stock attention layer (`q_proj`, `k_proj`, `v_proj`, `out_proj`) into one with `H'` candidate heads.

    Mixed in before the stock attention class, so output capture (`output_attentions=True`) still recognises it.
    The query/key/value projections produce `H' * head_dim` features, candidate `h` owning rows
    `h*head_dim .. (h+1)*head_dim - 1`. Each example projects only the `H` heads its task selects (the weight rows
    are sliced per task, once per task in evaluation), attends with them like the stock layer, and the output
    projection (`d_model x d_model`) sees them in slots `0 .. H-1`. The KV cache holds only the selected heads.
    """

    eager_attention: Callable  # the stock family's eager attention function, set by the family module
    #: How a batch that mixes tasks is projected (see [`_projections`]): `"grouped"` (one matmul per task present, on
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
        return f"component={self.component}, layer={self.selection_layer}, heads={self.num_heads}, total_heads={self.total_heads}"

    def _apply(self, fn, *args, **kwargs):
        # `.to()`, `.half()`, `.cuda()`: the cached weight slices belong to the old tensors.
        self._task_weights_cache.clear()
        return super()._apply(fn, *args, **kwargs)

    # ---- weights of one task ----------------------------------------------------------------------------------

    def _rows(self, heads: torch.LongTensor) -> torch.LongTensor:
        """Projection rows of the candidate heads `heads` (`[H]`), slot by slot."""
        return (heads[:, None] * self.head_dim + torch.arange(self.head_dim, device=heads.device)).flatten()

    def _slice_task_weights(self, heads: torch.LongTensor):
        """(q weight, q bias, kv weight, kv bias) restricted to `heads`; key and value rows are stacked."""
        rows = self._rows(heads.to(self.q_proj.weight.device))

        def take(linear: nn.Linear):
            return linear.weight.index_select(0, rows), None if linear.bias is None else linear.bias.index_select(
                0, rows
            )

        (wq, bq), (wk, bk), (wv, bv) = take(self.q_proj), take(self.k_proj), take(self.v_proj)
        return wq, bq, torch.cat([wk, wv]), None if bk is None else torch.cat([bk, bv])

    def _weights_state(self) -> tuple:
        """What the cached slices depend on: each source tensor (by identity) and its in-place version counter."""
        # Read through `_modules` / `_parameters`: this runs in every layer call, and `nn.Module.__getattr__` is slow.
        projections = [self._modules[name]._parameters for name in ("q_proj", "k_proj", "v_proj")]
        params = [p[kind] for kind in ("weight", "bias") for p in projections] + [self.selector.logits]
        return tuple((id(p), p._version) for p in params if p is not None)

    def _eval_cached(self, key, compute: Callable[[], object]):
        """`compute()` cached under `key` until the weights or `phi` change (evaluation without autograd only).

        Recomputed when a projection weight or `phi` is replaced (`load_state_dict(assign=True)`) or changed in place
        through autograd-visible ops (optimizer steps, `load_state_dict`, `copy_` under `no_grad`), and dropped when
        the module moves (`.to()`) or switches between `train()` and `eval()`. Writes through `param.data` bypass
        the version counters: call `model.clear_head_selection_cache()` after those.
        """
        state = self._weights_state()
        cached = self._task_weights_cache.get(key)
        if cached is None or cached[0] != state:
            # keep the source tensors alive with the entry, so that their ids cannot be reused by new tensors
            sources = [p for p in self.parameters(recurse=True)] + [self.selector.logits]
            cached = (state, compute(), sources)
            self._task_weights_cache[key] = cached
        return cached[1]

    def _layer_heads(self) -> tuple[torch.LongTensor, torch.Tensor | None]:
        """The heads `[tasks, H]` of this layer and their gates: a fresh Gumbel-sigmoid sample in training, the
        deterministic choice otherwise (cached in evaluation without autograd)."""
        if not (self.training or torch.is_grad_enabled()):
            return self._eval_cached("heads", lambda: self.selector.layer_choice(self.selection_layer, False, 1.0))
        sample = self.training and self.selector.learned
        temperature = float(self.config.head_selection_temperature)
        return self.selector.layer_choice(self.selection_layer, sample=sample, temperature=temperature)

    def _cached_task_weights(self, task: int):
        """The deterministic weight slices of `task`, used without autograd (see [`_eval_cached`])."""
        return self._eval_cached(task, lambda: self._slice_task_weights(self._layer_heads()[0][task]))

    def clear_task_weights_cache(self) -> None:
        self._task_weights_cache.clear()

    def train(self, mode: bool = True):
        self._task_weights_cache.clear()
        return super().train(mode)

    def _task_weights_fn(self, route: TaskRoute) -> tuple[Callable[[int], tuple], torch.Tensor | None]:
        """A function from task to its weight slices, and the per-example gates `[batch, H]` (`None` in eval).

        In training the choice is redrawn on every call (Gumbel-sigmoid sample); without autograd the slices are
        cached per task, so a decoding step costs what the stock model's does.
        """
        if not (self.training or torch.is_grad_enabled()):
            return self._cached_task_weights, None
        heads, gates = self._layer_heads()
        sliced = {}

        def task_weights(task: int):
            if task not in sliced:
                sliced[task] = self._slice_task_weights(heads[task])
            return sliced[task]

        return task_weights, None if gates is None else gates[route.ids]

    # ---- routing ----------------------------------------------------------------------------------------------

    def _project(self, states: torch.Tensor, route: TaskRoute, weights: Callable[[int], tuple]) -> torch.Tensor:
        """`states @ W_task^T + b_task` for every example, one matmul per task present in the batch."""
        if route.single_task is not None:
            return F.linear(states, *weights(route.single_task))
        out = None
        for task, index in route.groups:
            part = F.linear(states.index_select(0, index), *weights(task))
            if out is None:
                out = part.new_empty(states.shape[0], *part.shape[1:])
            out = out.index_copy(0, index, part)
        return out

    def _gathers_mixed_batches(self, states: torch.Tensor) -> bool:
        mode = self.mixed_batch_projection
        if mode not in MIXED_BATCH_PROJECTIONS:
            raise ValueError(f"mixed_batch_projection must be one of {MIXED_BATCH_PROJECTIONS}, got {mode!r}")
        # auto: where kernels are launch-bound (CUDA) or the batch is one decoding step, a fixed number of kernels
        # beats one group of kernels per task; otherwise grouped does the stock model's arithmetic.
        return mode == "gathered" or (mode == "auto" and (states.device.type == "cuda" or states.shape[-2] == 1))

    def _projections(self, route: TaskRoute, states: torch.Tensor):
        """Functions giving the queries and the (keys, values) of the selected heads, `[batch, time, H, head_dim]`,
        and the per-example gates `[batch, H]` (`None` without sampling).

        A single-task batch (and, with `mixed_batch_projection="grouped"`, every batch) projects only the selected
        heads' weight rows, one matmul per task present. `"gathered"` projects a mixed batch onto all `H'`
        candidates and gathers each example's `H` heads: `H'/H` times the projection work, but a fixed number of
        kernels and no loop over tasks, which is what counts where small kernels are launch-bound (CUDA).
        """
        split = partial(torch.Tensor.unflatten, dim=-1, sizes=(-1, self.head_dim))
        if route.single_task is not None or not self._gathers_mixed_batches(states):
            task_weights, gates = self._task_weights_fn(route)

            def queries(x):
                return split(self._project(x, route, lambda task: task_weights(task)[:2]))

            def keys_values(x):
                return tuple(map(split, self._project(x, route, lambda task: task_weights(task)[2:]).chunk(2, -1)))

            return queries, keys_values, gates
        heads, gates = self._layer_heads()
        example_heads = heads.to(states.device)[route.ids]  # [batch, H]

        def gathered(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
            candidates = split(F.linear(x, linear.weight, linear.bias))  # [batch, time, H', head_dim]
            index = example_heads[:, None, :, None].expand(-1, candidates.shape[1], -1, self.head_dim)
            return candidates.gather(2, index)

        return (partial(gathered, self.q_proj), lambda x: (gathered(self.k_proj, x), gathered(self.v_proj, x)),
                None if gates is None else gates[route.ids])

    # ---- forward ----------------------------------------------------------------------------------------------

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values=None,
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Input shape: Batch x Time x Channel. Mirrors the stock attention, heads chosen per example."""
        route = route_from_kwargs(self.config, self.config.component_sides(self.component), kwargs, hidden_states)
        kwargs = {key: value for key, value in kwargs.items() if key not in ROUTE_KWARGS}
        queries, keys_values, gates = self._projections(route, hidden_states)

        is_cross_attention = key_value_states is not None
        query_states = queries(hidden_states).transpose(1, 2)

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

        current_states = key_value_states if is_cross_attention else hidden_states
        if is_cross_attention and past_key_values is not None and is_updated:
            key_states = curr_past_key_values.layers[self.layer_idx].keys
            value_states = curr_past_key_values.layers[self.layer_idx].values
        else:
            key_states, value_states = (states.transpose(1, 2) for states in keys_values(current_states))
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
        if gates is not None:  # [batch, time, H, head_dim] * [batch, 1, H, 1]
            attn_output = attn_output * gates[:, None, :, None].to(attn_output.dtype)
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


# --------------------------------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class HeadSelSeq2SeqLMOutput(Seq2SeqLMOutput):
    """[`Seq2SeqLMOutput`] plus `head_selection_kl`: the token-weighted KL of the batch (computed when `labels` are
    given), already added to `loss` with weight `config.head_selection_kl_weight`."""

    head_selection_kl: torch.FloatTensor | None = None


class HeadSelectionModelMixin:
    """Routing, default tasks, the KL term and `selected_heads()` for a stock encoder-decoder model.

    Mixed in before the stock `...ForConditionalGeneration` class. The family module calls
    [`~HeadSelectionModelMixin.install_head_selection`] at the end of `__init__` and routes its `forward` through
    [`~HeadSelectionModelMixin.task_routes`] and [`~HeadSelectionModelMixin.add_head_selection_kl`].
    """

    attention_class: type  # the family's head-selection attention class

    def install_head_selection(self) -> None:
        """Add the selectors and swap the attention of every selecting component for a head-selection one."""
        config = self.config
        self.head_selection = HeadSelection(config)
        for component, selector in self.head_selection.items():
            layers = self.model.encoder.layers if component == "encoder_self" else self.model.decoder.layers
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
        config = self.config
        for side, layers in (("encoder", self.model.encoder.layers), ("decoder", self.model.decoder.layers)):
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

    def generate(self, inputs: torch.Tensor | None = None, *args, encoder_task_ids=None, decoder_task_ids=None,
                 **kwargs):
        """`GenerationMixin.generate`, every example routed by its `encoder_task_ids` / `decoder_task_ids`.

        `generate` hands the encoder no `decoder_*` keyword; when the encoder needs the decoder tasks too (adapters
        keyed by direction) the encoder outputs are computed here, with both.
        """
        # lists must become tensors for `generate` to expand them to batch x beams
        encoder_task_ids, decoder_task_ids = (
            torch.as_tensor(ids) if isinstance(ids, (list, tuple)) else ids for ids in (encoder_task_ids, decoder_task_ids)
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
        """Validate the ids of both sides once and return them as [`TaskRoute`] keyword arguments."""
        config = self.config
        routes = {}
        for side, ids in (("encoder", encoder_task_ids), ("decoder", decoder_task_ids)):
            if isinstance(ids, TaskRoute):
                routes[f"{side}_task_ids"] = ids
                continue
            ids = resolve_task_ids(config, side, ids, batch_size, device)
            routes[f"{side}_task_ids"] = TaskRoute.build(ids, len(config.tasks(side)))
        return routes

    def head_selection_kl(self, routes: dict, labels: torch.LongTensor) -> torch.Tensor:
        """The batch KL: per component, the mean of the task KLs weighted by each task's target tokens."""
        tokens = (labels != -100).sum(dim=-1).float()
        if tokens.sum() == 0:
            tokens = torch.ones_like(tokens)
        side_routes = {side: routes[f"{side}_task_ids"] for side in SIDES}
        total = tokens.new_zeros(())
        for component, selector in self.head_selection.items():
            task_kl = selector.task_kl()
            if task_kl is None:
                continue
            route = keyed_route(self.config, self.config.component_sides(component), side_routes)
            total = total + (task_kl.to(tokens.device)[route.ids] * tokens).sum() / tokens.sum()
        return total

    def add_head_selection_kl(self, outputs, labels, routes) -> HeadSelSeq2SeqLMOutput:
        """Wrap stock outputs; with `labels`, add `head_selection_kl_weight * KL` to the loss."""
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
