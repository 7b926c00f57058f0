# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Configuration of the head-selection Speech2Text model (speech recognition and speech translation)."""

from huggingface_hub.dataclasses import strict
from transformers import Speech2TextConfig

from .configuration_head_selection import HeadSelectionConfigMixin


@strict
class HeadSelSpeech2TextConfig(HeadSelectionConfigMixin, Speech2TextConfig):
    r"""A [`Speech2TextConfig`] with the head-selection keywords of [`HeadSelectionConfigMixin`].

    `encoder_attention_heads` / `decoder_attention_heads` keep their stock meaning: the `H` heads one task uses.
    `total_encoder_attention_heads` / `total_decoder_attention_heads` are the candidate pools `H'`.

    Example:

    ```python
    >>> from hf_headsel import HeadSelSpeech2TextConfig
    >>> config = HeadSelSpeech2TextConfig(
    ...     encoder_tasks=["es", "fr", "it"], decoder_tasks=["es", "fr", "it"], head_selection_strategy="subset"
    ... )
    >>> config.total_encoder_attention_heads
    8
    ```
    """

    model_type = "headsel_speech_to_text"


__all__ = ["HeadSelSpeech2TextConfig"]
