# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Head-selection Marian (text translation): the stock `MarianMTModel` (and `MarianModel`, `MarianForCausalLM`) with the
shared head-selection core wired in.

The mechanism lives in `modeling_head_selection.py` (and the modules it imports); this module only names the stock
classes it extends.
"""

import torch
from transformers import MarianForCausalLM, MarianModel, MarianMTModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqModelOutput
from transformers.models.marian.modeling_marian import MarianAttention, eager_attention_forward
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple

from .compat import CACHE_KWARG, takes_stock_cache_name
from .configuration_headsel_marian import HeadSelMarianConfig
from .attention import HeadSelectionAttentionMixin
from .modeling_head_selection import HeadSelectionBaseModelMixin, HeadSelectionModelMixin, HeadSelSeq2SeqLMOutput
from .modeling_head_selection_causal_lm import HeadSelCausalLMOutput, HeadSelectionCausalLMMixin
from .routing import first_tensor

# The Auto classes of the stock family's models, and their head-selection classes (written to `auto_map`).
AUTO_CLASSES = {
    "AutoModel": "HeadSelMarianModel",
    "AutoModelForSeq2SeqLM": "HeadSelMarianMTModel",
    "AutoModelForCausalLM": "HeadSelMarianForCausalLM",
}


class HeadSelMarianAttention(HeadSelectionAttentionMixin, MarianAttention):
    """[`MarianAttention`] with `H'` candidate heads, of which each example uses the `H` its task selects."""

    eager_attention = staticmethod(eager_attention_forward)


class HeadSelMarianModel(HeadSelectionBaseModelMixin, MarianModel):
    r"""[`MarianModel`] (the bare encoder-decoder, no language-model head) with attention head selection.

    Routed like [`HeadSelMarianMTModel`] by `encoder_task_ids` / `decoder_task_ids`, and loaded by `AutoModel`
    like the stock base model (also from a [`HeadSelMarianMTModel`] checkpoint, selectors included). Returns the
    stock [`Seq2SeqModelOutput`].

    Example:

    ```python
    >>> import torch
    >>> from hf_headsel import HeadSelMarianConfig, HeadSelMarianModel
    >>> config = HeadSelMarianConfig(
    ...     vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    ...     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, pad_token_id=0,
    ...     decoder_start_token_id=0, encoder_tasks=["en"], decoder_tasks=["de", "fr"],
    ... )
    >>> model = HeadSelMarianModel(config).eval()
    >>> out = model(torch.tensor([[5, 6, 7, 1]]), decoder_input_ids=torch.tensor([[0, 5]]), decoder_task_ids=[1])
    >>> out.last_hidden_state.shape
    torch.Size([1, 2, 64])
    ```
    """

    config_class = HeadSelMarianConfig
    attention_class = HeadSelMarianAttention
    head_selection_auto_classes = AUTO_CLASSES

    def __init__(self, config: HeadSelMarianConfig):
        super().__init__(config)
        self.install_head_selection()

    @can_return_tuple
    @takes_stock_cache_name
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        encoder_task_ids: torch.LongTensor | None = None,
        decoder_task_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        r"""The stock forward, routed per example (`encoder_task_ids` / `decoder_task_ids` as in
        [`HeadSelMarianMTModel.forward`])."""
        reference = first_tensor(input_ids, inputs_embeds, encoder_outputs, decoder_input_ids, decoder_inputs_embeds)
        routing = self.task_routes(encoder_task_ids, decoder_task_ids, reference.shape[0], reference.device,
                                   other_keywords=kwargs)
        return self.routed_forward(
            super().forward,
            routing,
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            **{CACHE_KWARG: cache},  # the installed transformers' name for it
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            return_dict=True,  # the tuple, if asked for, is made by `can_return_tuple` above
            **kwargs,
        )


class HeadSelMarianMTModel(HeadSelectionModelMixin, MarianMTModel):
    r"""[`MarianMTModel`] with attention head selection (Gong et al., 2021).

    Every example is routed by its own task ids: `encoder_task_ids` index `config.encoder_tasks` (the source
    language, or the domain) and `decoder_task_ids` index `config.decoder_tasks` (the target language, or the
    domain). Omitted ids fall back to the default task of that side, else its only task.

    Example:

    ```python
    >>> import torch
    >>> from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel
    >>> config = HeadSelMarianConfig(
    ...     vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    ...     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, pad_token_id=0,
    ...     decoder_start_token_id=0, encoder_tasks=["en"], decoder_tasks=["de", "fr"],
    ... )
    >>> model = HeadSelMarianMTModel(config).eval()
    >>> input_ids = torch.tensor([[5, 6, 7, 1], [8, 9, 1, 0]])  # the second example padded
    >>> out = model.generate(input_ids, attention_mask=input_ids.ne(0), decoder_task_ids=torch.tensor([0, 1]),
    ...                      max_new_tokens=5, num_beams=2)
    >>> model.selected_heads()["decoder_self"].shape  # tasks x layers x H
    torch.Size([2, 2, 4])
    ```
    """

    config_class = HeadSelMarianConfig
    attention_class = HeadSelMarianAttention
    head_selection_auto_classes = AUTO_CLASSES

    def __init__(self, config: HeadSelMarianConfig):
        super().__init__(config)
        self.install_head_selection()

    @can_return_tuple
    @takes_stock_cache_name
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
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
        reference = first_tensor(input_ids, inputs_embeds, encoder_outputs, decoder_input_ids, decoder_inputs_embeds)
        routing = self.task_routes(encoder_task_ids, decoder_task_ids, reference.shape[0], reference.device,
                                   other_keywords=kwargs)
        outputs = super().forward(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            **{CACHE_KWARG: cache},  # the installed transformers' name for it
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            labels=labels,
            use_cache=use_cache,
            return_dict=True,  # the tuple, if asked for, is made by `can_return_tuple` above
            head_selection_routing=routing,
            **kwargs,
        )
        return self.add_head_selection_kl(outputs, labels, routing)


class HeadSelMarianForCausalLM(HeadSelectionCausalLMMixin, MarianForCausalLM):
    r"""[`MarianForCausalLM`] (the decoder alone, a language model) with attention head selection.

    Every example is routed by its `decoder_task_ids` (index into `config.decoder_tasks`; omitted: the default
    decoder task, else the only one), and, for a cross-attention keyed by the source, by its `encoder_task_ids`. Only
    the decoder's components select: see [`HeadSelectionCausalLMMixin`]. Loaded by `AutoModelForCausalLM` like the
    stock class.

    Example:

    ```python
    >>> import torch
    >>> from hf_headsel import HeadSelMarianConfig, HeadSelMarianForCausalLM
    >>> config = HeadSelMarianConfig(
    ...     vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    ...     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, pad_token_id=0,
    ...     decoder_start_token_id=0, decoder_tasks=["de", "fr"], head_selection_components=["decoder_self"],
    ... )
    >>> model = HeadSelMarianForCausalLM(config).eval()
    >>> out = model.generate(torch.tensor([[0, 5], [0, 6]]), decoder_task_ids=["de", "fr"], max_new_tokens=3)
    >>> out.shape
    torch.Size([2, 5])
    ```
    """

    config_class = HeadSelMarianConfig
    attention_class = HeadSelMarianAttention
    head_selection_auto_classes = AUTO_CLASSES

    def __init__(self, config: HeadSelMarianConfig):
        super().__init__(config)
        self.install_head_selection()

    @can_return_tuple
    @takes_stock_cache_name
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        encoder_task_ids: torch.LongTensor | None = None,
        decoder_task_ids: torch.LongTensor | None = None,
        task_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> HeadSelCausalLMOutput:
        r"""The stock forward, routed per example.

        encoder_task_ids (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Index into `config.encoder_tasks` of every example: the source task of `encoder_hidden_states`, read
            only by a cross-attention keyed by the source.
        decoder_task_ids (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Index into `config.decoder_tasks` of every example.
        task_ids (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            `decoder_task_ids` as an `EncoderDecoderModel` hands them on (given to it as `decoder_task_ids`).

        Returns the stock [`CausalLMOutputWithCrossAttentions`] fields plus `head_selection_kl` (when `labels` are
        given); with `return_dict=False`, the stock tuple with `head_selection_kl` appended (when `labels` are given).
        """
        reference = first_tensor(input_ids, inputs_embeds)
        decoder_task_ids = self.decoder_task_ids_of(decoder_task_ids, task_ids)
        routing = self.task_routes(encoder_task_ids, decoder_task_ids, reference.shape[0], reference.device,
                                   other_keywords=kwargs)
        outputs = super().forward(
            input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            **{CACHE_KWARG: cache},  # the installed transformers' name for it
            inputs_embeds=inputs_embeds,
            labels=labels,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
            return_dict=True,  # the tuple, if asked for, is made by `can_return_tuple` above
            head_selection_routing=routing,
            **kwargs,
        )
        return self.add_head_selection_kl(outputs, labels, routing)


__all__ = ["HeadSelMarianAttention", "HeadSelMarianForCausalLM", "HeadSelMarianMTModel", "HeadSelMarianModel"]
