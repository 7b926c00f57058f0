# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Batching prepared examples: padding, attention masks, task ids, and SpecAugment for training batches."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .audio import SpecAugment

LABEL_PAD = -100


def pad_sequences(sequences: list, value, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad `[len, ...]` sequences to `[batch, max_len, ...]`; returns `(padded, attention_mask)`."""
    arrays = [np.asarray(sequence) for sequence in sequences]
    lengths = [array.shape[0] for array in arrays]
    longest = max(lengths)
    padded = torch.full((len(arrays), longest, *arrays[0].shape[1:]), value, dtype=dtype)
    mask = torch.zeros(len(arrays), longest, dtype=torch.long)
    for index, (array, length) in enumerate(zip(arrays, lengths)):
        if length:
            padded[index, :length] = torch.as_tensor(array, dtype=dtype)
        mask[index, :length] = 1
    return padded, mask


@dataclass
class Seq2SeqCollator:
    """Collate prepared examples into model inputs.

    Args:
        speech: inputs are `input_features` (else `input_ids`).
        pad_token_id: padding of `input_ids` (labels are padded with -100; the model shifts them into decoder inputs).
        with_task_ids: pass `encoder_task_ids` / `decoder_task_ids` (not for the stock baseline model).
        spec_augment: masks applied to the features of every batch (give it to the training collator only).
        decoder_prefix_start: with `--task_tag`, the decoder start id: evaluation batches then carry
            `decoder_prefix_ids` = `[start, tag]` per example, the prefix generation is forced to (give it to the
            evaluation collator only).
    """

    speech: bool
    pad_token_id: int
    with_task_ids: bool = True
    spec_augment: SpecAugment | None = None
    decoder_prefix_start: int | None = None

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        batch = {}
        if self.speech:
            features, mask = pad_sequences([example["input_features"] for example in examples], 0.0, torch.float32)
            if self.spec_augment is not None:
                features = self.spec_augment(features, mask.sum(dim=1))
            batch["input_features"], batch["attention_mask"] = features, mask
        else:
            batch["input_ids"], batch["attention_mask"] = pad_sequences(
                [example["input_ids"] for example in examples], self.pad_token_id, torch.long)
        batch["labels"], _ = pad_sequences([example["labels"] for example in examples], LABEL_PAD, torch.long)
        if self.decoder_prefix_start is not None:  # every label sequence starts with its task tag
            start = torch.full((len(examples), 1), self.decoder_prefix_start, dtype=torch.long)
            batch["decoder_prefix_ids"] = torch.cat([start, batch["labels"][:, :1]], dim=1)
        if self.with_task_ids:
            for name in ("encoder_task_ids", "decoder_task_ids"):
                batch[name] = torch.tensor([int(example[name]) for example in examples], dtype=torch.long)
        return batch
