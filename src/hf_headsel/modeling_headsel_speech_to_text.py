# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Head-selection Speech2Text (ASR and speech translation): the stock `Speech2TextForConditionalGeneration` with
the shared head-selection core wired in.

The mechanism lives in `modeling_head_selection.py` (and the modules it imports); this module only names the stock
classes it extends.
"""

import torch
from transformers import Speech2TextForConditionalGeneration, Speech2TextModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import Seq2SeqModelOutput
from transformers.models.speech_to_text.modeling_speech_to_text import Speech2TextAttention, eager_attention_forward
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple

from .compat import CACHE_KWARG, takes_stock_cache_name
from .configuration_headsel_speech_to_text import HeadSelSpeech2TextConfig
from .attention import HeadSelectionAttentionMixin
from .modeling_head_selection import HeadSelectionBaseModelMixin, HeadSelectionModelMixin, HeadSelSeq2SeqLMOutput
from .routing import first_tensor

# Every Auto class the stock family is registered with, and its head-selection class (written to `auto_map`).
AUTO_CLASSES = {
    "AutoModel": "HeadSelSpeech2TextModel",
    "AutoModelForSpeechSeq2Seq": "HeadSelSpeech2TextForConditionalGeneration",
}


class HeadSelSpeech2TextAttention(HeadSelectionAttentionMixin, Speech2TextAttention):
    """[`Speech2TextAttention`] with `H'` candidate heads, of which each example uses the `H` its task selects."""

    eager_attention = staticmethod(eager_attention_forward)


class HeadSelSpeech2TextModel(HeadSelectionBaseModelMixin, Speech2TextModel):
    r"""[`Speech2TextModel`] (the bare encoder-decoder, no language-model head) with attention head selection.

    Routed like [`HeadSelSpeech2TextForConditionalGeneration`] by `encoder_task_ids` / `decoder_task_ids`, and
    loaded by `AutoModel` like the stock base model (also from a [`HeadSelSpeech2TextForConditionalGeneration`]
    checkpoint, selectors included). Returns the stock [`Seq2SeqModelOutput`].

    Example:

    ```python
    >>> import torch
    >>> from hf_headsel import HeadSelSpeech2TextConfig, HeadSelSpeech2TextModel
    >>> config = HeadSelSpeech2TextConfig(
    ...     vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    ...     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, input_feat_per_channel=20,
    ...     encoder_tasks=["es", "fr"], decoder_tasks=["es", "fr"],
    ... )
    >>> model = HeadSelSpeech2TextModel(config).eval()
    >>> out = model(torch.randn(2, 40, 20), decoder_input_ids=torch.tensor([[2, 5], [2, 6]]),
    ...             encoder_task_ids=[0, 1], decoder_task_ids=[0, 1])
    >>> out.last_hidden_state.shape
    torch.Size([2, 2, 64])
    ```
    """

    config_class = HeadSelSpeech2TextConfig
    attention_class = HeadSelSpeech2TextAttention
    head_selection_auto_classes = AUTO_CLASSES

    def __init__(self, config: HeadSelSpeech2TextConfig):
        super().__init__(config)
        self.install_head_selection()

    @can_return_tuple
    @takes_stock_cache_name
    def forward(
        self,
        input_features: torch.FloatTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.LongTensor | None = None,
        encoder_outputs: tuple[tuple[torch.Tensor]] | None = None,
        cache: Cache | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        encoder_task_ids: torch.LongTensor | None = None,
        decoder_task_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        r"""The stock forward, routed per example (`encoder_task_ids` / `decoder_task_ids` as in
        [`HeadSelSpeech2TextForConditionalGeneration.forward`])."""
        reference = first_tensor(input_features, encoder_outputs, decoder_input_ids, decoder_inputs_embeds)
        routing = self.task_routes(encoder_task_ids, decoder_task_ids, reference.shape[0], reference.device,
                                   other_keywords=kwargs)
        return self.routed_forward(
            super().forward,
            routing,
            input_features=input_features,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            **{CACHE_KWARG: cache},  # the installed transformers' name for it
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            return_dict=True,  # the tuple, if asked for, is made by `can_return_tuple` above
            **kwargs,
        )


class HeadSelSpeech2TextForConditionalGeneration(HeadSelectionModelMixin, Speech2TextForConditionalGeneration):
    r"""[`Speech2TextForConditionalGeneration`] with attention head selection (Gong et al., 2021).

    Every example is routed by its own task ids: `encoder_task_ids` index `config.encoder_tasks` (the spoken
    language, or the domain) and `decoder_task_ids` index `config.decoder_tasks` (the output language, or the
    domain). Omitted ids fall back to the default task of that side, else its only task.

    Example:

    ```python
    >>> import torch
    >>> from hf_headsel import HeadSelSpeech2TextConfig, HeadSelSpeech2TextForConditionalGeneration
    >>> config = HeadSelSpeech2TextConfig(
    ...     vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    ...     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, input_feat_per_channel=20,
    ...     encoder_tasks=["es", "fr"], decoder_tasks=["es", "fr"], default_encoder_task="fr",
    ...     default_decoder_task="fr",
    ... )
    >>> model = HeadSelSpeech2TextForConditionalGeneration(config).eval()
    >>> features = torch.randn(2, 40, 20)
    >>> tokens = model.generate(features, max_new_tokens=5)  # both examples use the default task, "fr"
    ```
    """

    config_class = HeadSelSpeech2TextConfig
    attention_class = HeadSelSpeech2TextAttention
    head_selection_auto_classes = AUTO_CLASSES

    def __init__(self, config: HeadSelSpeech2TextConfig):
        super().__init__(config)
        self.install_head_selection()

    @can_return_tuple
    @takes_stock_cache_name
    def forward(
        self,
        input_features: torch.FloatTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.LongTensor | None = None,
        encoder_outputs: tuple[tuple[torch.Tensor]] | None = None,
        cache: Cache | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        encoder_task_ids: torch.LongTensor | None = None,
        decoder_task_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> HeadSelSeq2SeqLMOutput:
        r"""The stock forward, routed per example.

        encoder_task_ids (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Index into `config.encoder_tasks` of every example.
        decoder_task_ids (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Index into `config.decoder_tasks` of every example.

        Returns the stock [`Seq2SeqLMOutput`] fields plus `head_selection_kl` (when `labels` are given); with
        `return_dict=False`, the stock tuple with `head_selection_kl` appended (when `labels` are given).
        """
        reference = first_tensor(input_features, encoder_outputs, decoder_input_ids, decoder_inputs_embeds, labels)
        routing = self.task_routes(encoder_task_ids, decoder_task_ids, reference.shape[0], reference.device,
                                   other_keywords=kwargs)
        outputs = super().forward(
            input_features,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            **{CACHE_KWARG: cache},  # the installed transformers' name for it
            decoder_inputs_embeds=decoder_inputs_embeds,
            labels=labels,
            use_cache=use_cache,
            return_dict=True,  # the tuple, if asked for, is made by `can_return_tuple` above
            head_selection_routing=routing,
            **kwargs,
        )
        return self.add_head_selection_kl(outputs, labels, routing)


__all__ = ["HeadSelSpeech2TextAttention", "HeadSelSpeech2TextForConditionalGeneration", "HeadSelSpeech2TextModel"]
