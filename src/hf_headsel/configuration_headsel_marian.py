# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Configuration of the head-selection Marian model (text translation)."""

from huggingface_hub.dataclasses import strict
from transformers import MarianConfig

from .configuration_head_selection import HeadSelectionConfigMixin


@strict
class HeadSelMarianConfig(HeadSelectionConfigMixin, MarianConfig):
    r"""A [`MarianConfig`] with the head-selection keywords of [`HeadSelectionConfigMixin`].

    `encoder_attention_heads` / `decoder_attention_heads` keep their stock meaning: the `H` heads one task uses.
    `total_encoder_attention_heads` / `total_decoder_attention_heads` are the candidate pools `H'`.

    Example:

    ```python
    >>> from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel
    >>> config = HeadSelMarianConfig(
    ...     vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    ...     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, pad_token_id=0,
    ...     decoder_start_token_id=0, encoder_tasks=["en"], decoder_tasks=["de", "fr"],
    ... )
    >>> config.total_decoder_attention_heads
    8
    >>> model = HeadSelMarianMTModel(config)
    ```
    """

    model_type = "headsel_marian"


__all__ = ["HeadSelMarianConfig"]
