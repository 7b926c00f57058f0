# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Modeling: what a head-selection decoder-only language model (a family's `...ForCausalLM`, the decoder alone) adds
to [`HeadSelectionModelMixin`].

* [`HeadSelectionCausalLMMixin`]: selects in the decoder's components only, routes the source task only where a
  layer reads it, groups a mixed batch where the stock forward calls the decoder.
* [`HeadSelCausalLMOutput`]: the stock output plus `head_selection_kl`.

Copied next to saved models as remote code (a family's modeling module imports it); imports only torch, transformers
and its sibling modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

from .configuration_head_selection import SIDES, component_side
from .modeling_head_selection import HeadSelectionModelMixin


@dataclass
class HeadSelCausalLMOutput(CausalLMOutputWithCrossAttentions):
    """[`CausalLMOutputWithCrossAttentions`] plus `head_selection_kl`, as [`HeadSelSeq2SeqLMOutput`] adds it."""

    head_selection_kl: torch.FloatTensor | None = None


class HeadSelectionCausalLMMixin(HeadSelectionModelMixin):
    """[`HeadSelectionModelMixin`] for a family's decoder-only `...ForCausalLM` (mixed in before it): the decoder
    alone, its self-attention (and its cross-attention, when given `encoder_hidden_states`) selecting heads per
    example as the encoder-decoder model's decoder does.

    It has no encoder, so it selects in the config's decoder components only: an `encoder_self` component is dropped
    from the config (as the stock class sets `is_encoder_decoder=False` on it). An encoder-decoder checkpoint loads
    as the stock class loads it: the encoder's weights (and selector) unused, and the embeddings it ties to
    `model.shared` missing. A cross-attention keyed by the source (`cross_attention_task_key` `"encoder"` or
    `"pair"`) is routed by `encoder_task_ids`, the source task of `encoder_hidden_states`; otherwise no source task is
    needed.

    As the decoder of an `EncoderDecoderModel`, which hands each `decoder_*` keyword on without its prefix, it takes
    the decoder task ids as `task_ids` too (and the source task ids of a pair-keyed cross-attention as
    `decoder_encoder_task_ids` given to that model), see [`decoder_task_ids_of`].
    """

    head_selection_output_class = HeadSelCausalLMOutput
    grouped_call_path = "decoder"  # the stock forward calls `self.model.decoder`, past the wrapper

    def install_head_selection(self) -> None:
        """Keep the config's decoder components (a `ValueError` if none), then install them."""
        config = self.config
        decoder_components = [c for c in config.head_selection_components or () if component_side(c) == "decoder"]
        if not decoder_components:
            raise ValueError(
                f"{type(self).__name__} is a decoder: it selects heads in decoder_self or decoder_cross, and "
                f"head_selection_components={config.head_selection_components} names neither"
            )
        config.head_selection_components = decoder_components
        super().install_head_selection()

    @staticmethod
    def decoder_task_ids_of(decoder_task_ids, task_ids):
        """The decoder task ids of a forward call: `decoder_task_ids`, or `task_ids`, the name `EncoderDecoderModel`
        hands its `decoder_task_ids` on under (it strips the `decoder_` prefix). Both given is a `ValueError`."""
        if task_ids is None:
            return decoder_task_ids
        if decoder_task_ids is not None:
            raise ValueError("pass the decoder task ids once: as decoder_task_ids, or as task_ids (the name an "
                             "EncoderDecoderModel hands its decoder_task_ids on under), not both")
        return task_ids

    def unread_sides(self) -> tuple[str, ...]:
        """The encoder side, unless a cross-attention or the adapters are keyed by the source task."""
        config = self.config
        read = {side for component in config.head_selection_components for side in config.component_sides(component)}
        if config.task_adapter_dim:
            read.update(config.adapter_sides("decoder"))
        return tuple(side for side in SIDES if side not in read)


__all__ = ["HeadSelCausalLMOutput", "HeadSelectionCausalLMMixin"]
