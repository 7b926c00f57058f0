"""Checks that need a CUDA device: the CUDA attention backends, mixed-task batches of both families on the GPU's
default projection (`auto` gathers there), single-task training (gathered there too), half-precision training, and
activation checkpointing offloaded to pinned host memory.

Skipped where there is no GPU (CI has none); run them on a GPU machine with `pytest tests/test_cuda.py`.
"""

import pytest
import torch

from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel

from conftest import (
    DECODER_IDS,
    ENCODER_IDS,
    MIXED,
    STRATEGY_CONFIGS,
    extract_stock_model,
    mixed_model,
    projections_used,
    take,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

BACKENDS = ["eager", "sdpa", "flex_attention"]


def _model(**overrides) -> HeadSelMarianMTModel:
    torch.manual_seed(0)
    config = HeadSelMarianConfig(
        vocab_size=64, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1, forced_eos_token_id=None, decoder_start_token_id=2,
        encoder_tasks=["en", "de"], decoder_tasks=["fr", "es", "it"],
        head_selection_components=["encoder_self", "decoder_self", "decoder_cross"], **overrides,
    )
    return HeadSelMarianMTModel(config).cuda()


def _batch():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(3, 64, (4, 9), generator=generator)
    input_ids[1, 6:] = 0
    return {
        "input_ids": input_ids.cuda(),
        "attention_mask": (input_ids != 0).long().cuda(),
        "labels": torch.randint(3, 64, (4, 7), generator=generator).cuda(),
        "encoder_task_ids": torch.tensor([0, 1, 1, 0]).cuda(),
        "decoder_task_ids": torch.tensor([2, 0, 1, 1]).cuda(),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_cuda_backends_agree_with_eager(backend):
    model, batch = _model().eval(), _batch()
    with torch.no_grad():
        reference = model(**batch).logits
        model.set_attn_implementation(backend)
        logits = model(**batch).logits
    torch.testing.assert_close(logits, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cuda_mixed_batch_generation_equals_one_by_one(backend):
    model, batch = _model().eval(), _batch()
    model.set_attn_implementation(backend)
    kwargs = {"num_beams": 3, "max_new_tokens": 6, "min_new_tokens": 6}
    mixed = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"],
                           encoder_task_ids=batch["encoder_task_ids"], decoder_task_ids=batch["decoder_task_ids"],
                           **kwargs)
    for row in range(batch["input_ids"].shape[0]):
        one = model.generate(batch["input_ids"][row : row + 1, : int(batch["attention_mask"][row].sum())],
                             encoder_task_ids=batch["encoder_task_ids"][row : row + 1],
                             decoder_task_ids=batch["decoder_task_ids"][row : row + 1], **kwargs)
        assert mixed[row, : one.shape[1]].tolist() == one[0].tolist()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_half_precision_training_learns_and_moves_selection_logits(dtype, backend):
    model = _model(head_selection_kl_weight=0.1, dropout=0.0)
    model.set_attn_implementation(backend)
    model.train()
    batch = _batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    phi_before = model.head_selection["decoder_self"].logits.detach().clone()
    losses = []
    for _ in range(50):
        with torch.autocast("cuda", dtype=dtype):
            out = model(**batch)
        assert torch.isfinite(out.loss)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.loss.item())
    assert losses[-1] < losses[0] * 0.5
    assert not torch.equal(model.head_selection["decoder_self"].logits.detach(), phi_before)


def test_cuda_single_task_training_gathers_and_equals_the_selected_rows(monkeypatch):
    # `auto` on CUDA projects a single-task training batch over all candidates; "grouped" keeps the selected rows
    from hf_headsel.attention import HeadSelectionAttentionMixin

    model = _model(dropout=0.0)
    one_task = {"encoder_task_ids": torch.tensor([1] * 4), "decoder_task_ids": torch.tensor([2] * 4)}
    batch = {**_batch(), **_cuda(one_task)}
    results = {}
    for mode in ("auto", "grouped"):
        monkeypatch.setattr(HeadSelectionAttentionMixin, "mixed_batch_projection", mode)

        def step():
            model.train()
            torch.manual_seed(3)  # the same Gumbel draws
            loss = model(**batch).loss
            loss.backward()
            grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
            results[mode] = loss.detach(), grads
            model.zero_grad(set_to_none=True)

        assert {name for name, _ in projections_used(step)} == ({"gathered"} if mode == "auto" else {"grouped"})
    (loss0, grads0), (loss1, grads1) = results["auto"], results["grouped"]
    torch.testing.assert_close(loss0, loss1)
    assert grads0.keys() == grads1.keys()
    for name in grads0:
        torch.testing.assert_close(grads0[name], grads1[name], msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("every_n_layers", [1, 2])
def test_activation_checkpointing_offloaded_to_the_host_gives_the_unchecked_gradients(every_n_layers):
    """`activation_checkpointing_enable(offload=True)` (Transformers 5.24) keeps the saved activations in pinned host
    memory, which needs an accelerator (the stock model refuses it on the CPU too)."""
    if not hasattr(HeadSelMarianMTModel, "activation_checkpointing_enable"):
        pytest.skip("activation_checkpointing_enable is Transformers 5.24's")
    results = []
    for offload in (False, True):
        model = _model()
        if offload:
            model.activation_checkpointing_enable(every_n_layers=every_n_layers, offload=True)
        model.train()
        torch.manual_seed(3)  # the same Gumbel draws and dropout masks
        loss = model(**_batch()).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (loss0, grads0), (loss1, grads1) = results
    torch.testing.assert_close(loss1, loss0)
    assert grads0.keys() == grads1.keys() and any(name.startswith("head_selection.") for name in grads0)
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name], msg=lambda m: f"{name}: {m}")


def test_bf16_weights_generate_like_float32_routing():
    model = _model().eval()
    batch = _batch()
    model.to(torch.bfloat16)
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    tokens = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"],
                            encoder_task_ids=batch["encoder_task_ids"], decoder_task_ids=batch["decoder_task_ids"],
                            num_beams=2, max_new_tokens=5)
    assert tokens.shape[0] == 4


def _cuda(tensors: dict) -> dict:
    return {key: value.cuda() for key, value in tensors.items()}


@pytest.mark.parametrize("strategy", sorted(STRATEGY_CONFIGS))
def test_cuda_mixed_batch_equals_each_examples_stock_model(family, strategy):
    # every example of a mixed batch gets the logits of the stock model made of its own selected heads
    model = mixed_model(family, strategy)
    # extracted on the CPU, where the helper builds its rows, before the model moves
    stocks = [extract_stock_model(family, model, int(encoder), int(decoder)).cuda()
              for encoder, decoder in zip(ENCODER_IDS, DECODER_IDS)]
    model.cuda()
    inputs, decoder_input_ids = _cuda(family.inputs()), family.decoder_input_ids().cuda()
    with torch.no_grad():
        logits = model(**inputs, decoder_input_ids=decoder_input_ids, **_cuda(MIXED)).logits
        for i, stock in enumerate(stocks):
            reference = stock(**take(inputs, i), decoder_input_ids=decoder_input_ids[i : i + 1]).logits
            torch.testing.assert_close(logits[i : i + 1], reference, rtol=1e-4, atol=1e-4)


def test_cuda_mixed_generation_equals_one_by_one_for_each_family(family):
    model = mixed_model(family).cuda()
    inputs, ids = _cuda(family.inputs()), _cuda(MIXED)
    kwargs = {"num_beams": 2, "max_new_tokens": 5, "min_new_tokens": 5}
    mixed = model.generate(**inputs, **ids, **kwargs)
    for i in range(len(ENCODER_IDS)):
        one = model.generate(**take(inputs, i), **take(ids, i), **kwargs)
        assert mixed[i, : one.shape[1]].tolist() == one[0].tolist()
