# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The "all candidates" baseline of `benchmarks/overhead.py`: head selection computed the wasteful way.

The fairseq reference implementation of head selection projects queries, keys and values for all `H'` candidate
heads, attends with all of them, and only then keeps the `H` heads each example's task selects. This module does
the same inside `hf_headsel`'s own attention classes, so it computes exactly what the head-selection attention of
each family (`HeadSelMarianAttention`, `HeadSelSpeech2TextAttention`) computes (same parameters, same head choice,
same gates and the same Gumbel draws in training) at `H'` heads' cost:

1. `q_proj`, `k_proj`, `v_proj` produce all `H' * head_dim` features (the KV cache holds all `H'` heads);
2. attention runs over all `H'` heads;
3. each example gathers its task's `H` selected heads into slots `0 .. H-1` and, in training, multiplies them by
   the straight-through gates, before `out_proj`.

The forward lives once, in [`AllCandidatesAttentionMixin`]; each family gets a class that puts it in front of its
head-selection attention ([`ALL_CANDIDATES_CLASSES`] maps one to the other). It is a benchmark baseline, not part of
the package. Use [`use_all_candidates_attention`] on a copy of a head-selection model to swap it in.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from hf_headsel.compat import takes_stock_cache_name
from hf_headsel.routing import LAYER_KWARGS, ROUTING_KWARG, route_from_kwargs
from hf_headsel.modeling_headsel_marian import HeadSelMarianAttention
from hf_headsel.modeling_headsel_speech_to_text import HeadSelSpeech2TextAttention


class AllCandidatesAttentionMixin:
    """Put in front of a family's head-selection attention: all `H'` candidate heads computed, the unselected ones
    dropped afterwards. Same parameters, selector and head choice as the class it extends."""

    @takes_stock_cache_name
    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        cache=None,
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        route = route_from_kwargs(self.config, self.config.component_sides(self.component), kwargs, hidden_states)
        # the package's own choice: the model's draw for this forward pass (a Gumbel-sigmoid sample in training)
        heads, gates = self._layer_choice(kwargs.get(ROUTING_KWARG), hidden_states.device)
        kwargs = {key: value for key, value in kwargs.items() if key not in LAYER_KWARGS}
        example_heads = heads.to(hidden_states.device)[route.ids]  # [batch, H]
        example_gates = None if gates is None else gates[route.ids]  # [batch, H]

        is_cross_attention = key_value_states is not None
        input_shape = hidden_states.shape[:-1]
        # All H' candidates: [batch, H', time, head_dim]
        query_states = self.q_proj(hidden_states).view(*input_shape, -1, self.head_dim).transpose(1, 2)

        is_updated = False
        if cache is not None:
            if isinstance(cache, EncoderDecoderCache):
                is_updated = cache.is_updated.get(self.layer_idx)
                if is_cross_attention:
                    curr_cache = cache.cross_attention_cache
                else:
                    curr_cache = cache.self_attention_cache
            else:
                curr_cache = cache

        current_states = key_value_states if is_cross_attention else hidden_states
        if is_cross_attention and cache is not None and is_updated:
            key_states = curr_cache.layers[self.layer_idx].keys
            value_states = curr_cache.layers[self.layer_idx].values
        else:
            kv_shape = (*current_states.shape[:-1], -1, self.head_dim)
            key_states = self.k_proj(current_states).view(kv_shape).transpose(1, 2)
            value_states = self.v_proj(current_states).view(kv_shape).transpose(1, 2)
            if cache is not None:  # the cache holds all H' heads
                key_states, value_states = curr_cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)
                if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                    cache.is_updated[self.layer_idx] = True

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
        # attn_output: [batch, time, H', head_dim]; keep each example's H selected heads, slot by slot.
        batch, time = attn_output.shape[:2]
        index = example_heads[:, None, :, None].expand(batch, time, self.num_heads, self.head_dim)
        attn_output = attn_output.gather(2, index)
        if example_gates is not None:
            attn_output = attn_output * example_gates[:, None, :, None].to(attn_output.dtype)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


class AllCandidatesMarianAttention(AllCandidatesAttentionMixin, HeadSelMarianAttention):
    """[`HeadSelMarianAttention`] computing all `H'` candidate heads, then dropping the unselected ones."""


class AllCandidatesSpeech2TextAttention(AllCandidatesAttentionMixin, HeadSelSpeech2TextAttention):
    """[`HeadSelSpeech2TextAttention`] computing all `H'` candidate heads, then dropping the unselected ones."""


#: The head-selection attention of every family -> its all-candidates counterpart.
ALL_CANDIDATES_CLASSES: dict[type, type] = {
    HeadSelMarianAttention: AllCandidatesMarianAttention,
    HeadSelSpeech2TextAttention: AllCandidatesSpeech2TextAttention,
}


def use_all_candidates_attention(model: nn.Module) -> int:
    """Swap every head-selection attention of `model` for its all-candidates class ([`ALL_CANDIDATES_CLASSES`]),
    in place.

    Only the class changes (same parameters, same selector); returns how many layers were swapped.
    """
    swapped = 0
    for module in model.modules():
        replacement = ALL_CANDIDATES_CLASSES.get(type(module))
        if replacement is not None:
            module.__class__ = replacement
            swapped += 1
    if not swapped:
        names = ", ".join(cls.__name__ for cls in ALL_CANDIDATES_CLASSES)
        raise ValueError(f"the model has no head-selection attention layer to swap (one of {names})")
    return swapped


__all__ = [
    "ALL_CANDIDATES_CLASSES",
    "AllCandidatesAttentionMixin",
    "AllCandidatesMarianAttention",
    "AllCandidatesSpeech2TextAttention",
    "use_all_candidates_attention",
]
