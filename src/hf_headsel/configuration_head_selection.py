# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The head-selection configuration shared by every model family: its keywords, their validation, and the facts
derived from them (tasks, heads and routing keys of each side and component).

* [`HeadSelectionConfigMixin`]: the keywords, mixed into a stock config dataclass (`MarianConfig`,
  `Speech2TextConfig`) by each family's configuration module.
* The vocabulary of the method: [`COMPONENTS`], [`STRATEGIES`], [`SIDES`], and [`component_side`], the side whose
  layers hold a component.

Copied next to saved models as remote code; imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

COMPONENTS = ("encoder_self", "decoder_self", "decoder_cross")
STRATEGIES = ("group", "subset", "task_specific")
TASK_TYPES = ("lang", "domain")
CROSS_ATTENTION_TASK_KEYS = ("decoder", "encoder", "pair")
SIDES = ("encoder", "decoder")
ADAPTER_KEYS = ("direction", "task")


def component_side(component: str) -> str:
    """The side whose layers hold a component: `"encoder"` for `encoder_self`, else `"decoder"`."""
    return "encoder" if component == "encoder_self" else "decoder"


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


__all__ = [
    "COMPONENTS",
    "SIDES",
    "STRATEGIES",
    "HeadSelectionConfigMixin",
    "component_side",
]
