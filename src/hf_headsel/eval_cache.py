# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Evaluation caches: values derived from a module's parameters (a task's weight rows, stacked projections), kept
for the decoding steps of a `generate` call until one of the parameters they were derived from changes.

Copied next to saved models as remote code; imports only torch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

# Optimizer steps taken in this process. A fused optimizer (`fused=True`, the Trainer's default `adamw_torch_fused`)
# writes the parameters without bumping their `_version`: every cached value is recomputed after any step.
_OPTIMIZER_STEPS = [0]


def _count_optimizer_step(optimizer, args, kwargs) -> None:
    _OPTIMIZER_STEPS[0] += 1


register_optimizer_step_post_hook(_count_optimizer_step)


def version_of(tensor: torch.Tensor) -> int | None:
    """The in-place write counter of `tensor` (`_version`), or `None` for an inference tensor (made under
    `torch.inference_mode()`), which has none: a memo keyed on it can only trust identity within one call."""
    return None if tensor.is_inference() else tensor._version


class ParameterDerivedCache:
    """Values computed from some source tensors, each kept while its sources are the same tensors at the same
    in-place version.

    A source replaced (`load_state_dict(assign=True)`) has a new identity; one whose storage was replaced
    (`param.data = t`, `vector_to_parameters`) a new data pointer; one changed in place through autograd-visible ops
    (`load_state_dict`, `copy_` under `no_grad`, optimizer steps) a new version counter, and any optimizer step of
    the process invalidates every entry (fused optimizers write without a version bump). In-place writes through
    `param.data` change none of these: `model.clear_head_selection_cache()` after them ([`EvalCacheMixin`] clears the
    cache on moves and casts, and a head-selecting layer when a projection is replaced). The sources are kept alive
    with their entry, so that their ids cannot be reused by new tensors meanwhile.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple] = {}

    def get(self, key: Hashable, sources: Sequence[torch.Tensor], compute: Callable[[], object]):
        """The value cached under `key`, or `compute()` (then cached) when there is none or its sources changed.
        Nothing is kept for an inference tensor (made under `torch.inference_mode()`): it has no version counter."""
        try:
            state = (_OPTIMIZER_STEPS[0], *((id(source), source._version, source.data_ptr()) for source in sources))
        except RuntimeError:  # "Inference tensors do not track version counter"
            return compute()
        entry = self._entries.get(key)
        if entry is None or entry[0] != state:
            entry = (state, compute(), tuple(sources))
            self._entries[key] = entry
        return entry[1]

    def keep_one(self, key: Hashable, of_kind: Callable[[Hashable], bool] | None = None) -> None:
        """Drop the entries other than `key` whose keys are `of_kind` (default: all): where only the latest of a kind
        is worth keeping (the rows of the last set of tasks a server's batches mixed)."""
        # over a snapshot of the keys, tolerating entries gone meanwhile: threads may share a served model
        for stale in [k for k in list(self._entries) if k != key and (of_kind is None or of_kind(k))]:
            self._entries.pop(stale, None)

    def keys(self) -> list[Hashable]:
        return list(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def __reduce__(self):
        # A pickled or deep-copied model starts with an empty cache: the states hold the ids of the original's tensors,
        # which mean nothing in another process, and the copy's values are recomputed from its own parameters.
        return type(self), ()


class EvalCacheMixin:
    """A module holding a [`ParameterDerivedCache`] as `self._eval_cache` (set up by `init_eval_cache()`), cleared
    when the module moves or is cast, when it switches between training and evaluation, and by `clear_eval_cache()`
    (what `model.clear_head_selection_cache()` calls on every such module)."""

    def init_eval_cache(self) -> None:
        self._eval_cache = ParameterDerivedCache()

    def _uses_eval_cache(self) -> bool:
        """Whether a call may use the cache: in evaluation without autograd (what is computed for training or under
        autograd must stay differentiable, and its parameters change at every step)."""
        return not (self.training or torch.is_grad_enabled())

    def clear_eval_cache(self) -> None:
        cache = self.__dict__.get("_eval_cache")  # absent before `init_eval_cache()`
        if cache is not None:
            cache.clear()

    def _apply(self, fn, *args, **kwargs):
        # `.to()`, `.half()`, `.cuda()` replace `param.data`: the cached values belong to the old tensors
        self.clear_eval_cache()
        return super()._apply(fn, *args, **kwargs)

    def train(self, mode: bool = True):
        self.clear_eval_cache()
        return super().train(mode)


__all__ = ["EvalCacheMixin", "ParameterDerivedCache", "version_of"]
