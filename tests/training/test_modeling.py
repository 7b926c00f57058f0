"""How the recipes build the model they train (`headsel_recipes/modeling.py`)."""

from __future__ import annotations

import torch
from transformers import MarianConfig, MarianMTModel

from headsel_recipes.arguments import HeadSelectionArguments, ModelArguments
from headsel_recipes.modeling import build_model, freeze_sinusoidal_positions
from headsel_recipes.tasks import MT

TINY_MARIAN = dict(vocab_size=40, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0,
                   decoder_start_token_id=0, eos_token_id=1, max_position_embeddings=16)


def position_tables(model) -> dict[str, torch.nn.Parameter]:
    return {name: parameter for name, parameter in model.named_parameters() if "embed_positions" in name}


def test_freezing_the_position_tables_of_a_loaded_checkpoint(tmp_path):
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    loaded = MarianMTModel.from_pretrained(tmp_path)
    # what makes it needed: a table loaded by `from_pretrained` requires gradients (and gets them from 5.24)
    assert all(parameter.requires_grad for parameter in position_tables(loaded).values())
    assert sorted(freeze_sinusoidal_positions(loaded)) == sorted(position_tables(loaded))
    assert not any(parameter.requires_grad for parameter in position_tables(loaded).values())
    assert freeze_sinusoidal_positions(loaded) == []  # nothing left to freeze


def test_the_shared_baseline_and_the_upcycled_model_train_the_same_kinds_of_parameters(tmp_path):
    """Both systems of a comparison start from one stock checkpoint: neither trains the fixed position tables."""
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    trainable = {}
    for shared in (True, False):
        model = build_model(MT, ModelArguments(model_name_or_path=str(tmp_path), shared_baseline=shared),
                            HeadSelectionArguments(), None, ["en"], ["de", "fr"])
        model.train()
        ids = {} if shared else {"decoder_task_ids": torch.tensor([0, 1])}
        model(input_ids=torch.tensor([[5, 6, 1], [7, 1, 0]]), labels=torch.tensor([[5, 1], [6, 1]]), **ids).loss.backward()
        assert all(parameter.grad is None for parameter in position_tables(model).values())
        trainable[shared] = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    # head selection adds its selection logits and candidate heads; it trains every parameter the baseline trains
    assert trainable[True] <= trainable[False]
