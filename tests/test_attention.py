"""Behaviour of the head-selection attention layers (`hf_headsel/attention.py`), for both families: the KV cache
and attention weights hold only the selected heads, every attention backend works, the evaluation weight cache
never serves stale weights (DESIGN.md section 5), and q/k/v projections replaced by other modules (LoRA-like
wrappers) compute what their merged weights compute, in evaluation, generation and training."""

from __future__ import annotations

import copy

import pytest
import torch

from hf_headsel.attention import PROJECTIONS
from hf_headsel.compat import CACHE_KWARG

from conftest import (
    DECODER_IDS,
    ENCODER_IDS,
    HEADS,
    HEAD_DIM,
    LAYERS,
    MIXED,
    eval_logits,
    extract_stock_model,
    forward_logits,
    fresh_copy,
    mixed_model,
    randomize_selector_logits,
    seed_everything,
    selecting_attentions,
    take,
)

# ---------------------------------------------------------------------------------------------------------------
# (4) KV cache, (5) attention weights, (6) attention backends
# ---------------------------------------------------------------------------------------------------------------


def test_kv_cache_holds_only_selected_heads(family):
    model = mixed_model(family, "group")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    with torch.no_grad():
        out = model(**inputs, decoder_input_ids=decoder_input_ids, use_cache=True, **MIXED)
    encoder_length = out.encoder_last_hidden_state.shape[1]
    cache = getattr(out, CACHE_KWARG)
    for layer in range(LAYERS):
        for states in (cache.self_attention_cache.layers[layer].keys, cache.self_attention_cache.layers[layer].values):
            assert states.shape == (4, HEADS, decoder_input_ids.shape[1], HEAD_DIM)
        for states in (cache.cross_attention_cache.layers[layer].keys, cache.cross_attention_cache.layers[layer].values):
            assert states.shape == (4, HEADS, encoder_length, HEAD_DIM)
    # continuing from the cache gives the logits of the full sequence
    next_ids = family.decoder_input_ids(length=1, seed=7)
    next_ids[:, 0] = 5
    with torch.no_grad():
        step = model(
            encoder_outputs=(out.encoder_last_hidden_state,),
            attention_mask=inputs["attention_mask"],
            decoder_input_ids=next_ids,
            cache=cache,
            use_cache=True,
            **MIXED,
        ).logits
    full = forward_logits(model, inputs, torch.cat([decoder_input_ids, next_ids], dim=1), **MIXED)
    torch.testing.assert_close(step[:, -1], full[:, -1])


def test_beam_search_cache_holds_only_selected_heads(family):
    model = mixed_model(family, "group")
    out = model.generate(**family.inputs(), **MIXED, num_beams=3, max_new_tokens=4, return_dict_in_generate=True)
    cache = getattr(out, CACHE_KWARG)
    for layer in range(LAYERS):
        assert cache.self_attention_cache.layers[layer].keys.shape[:2] == (12, HEADS)
        assert cache.cross_attention_cache.layers[layer].keys.shape[:2] == (12, HEADS)
        assert cache.self_attention_cache.layers[layer].keys.shape[-1] == HEAD_DIM


def test_output_attentions_have_selected_heads_only(family):
    model = mixed_model(family, "subset", attn_implementation="eager")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    with torch.no_grad():
        out = model(**inputs, decoder_input_ids=decoder_input_ids, output_attentions=True, **MIXED)
    encoder_length = out.encoder_last_hidden_state.shape[1]
    decoder_length = decoder_input_ids.shape[1]
    expected_shapes = {
        "encoder_attentions": (4, HEADS, encoder_length, encoder_length),
        "decoder_attentions": (4, HEADS, decoder_length, decoder_length),
        "cross_attentions": (4, HEADS, decoder_length, encoder_length),
    }
    for name, shape in expected_shapes.items():
        weights = getattr(out, name)
        assert len(weights) == LAYERS, name
        for layer_weights in weights:
            assert layer_weights.shape == shape, name
            torch.testing.assert_close(layer_weights.sum(-1), torch.ones(shape[:-1]))
    # they are the attention weights of the example's selected heads, slot by slot
    for i in range(4):
        stock = extract_stock_model(family, model, int(ENCODER_IDS[i]), int(DECODER_IDS[i]))
        with torch.no_grad():
            reference = stock(
                **take(inputs, i), decoder_input_ids=decoder_input_ids[i : i + 1], output_attentions=True
            )
        for name in expected_shapes:
            for ours, theirs in zip(getattr(out, name), getattr(reference, name)):
                torch.testing.assert_close(ours[i : i + 1], theirs)


def test_marian_eager_and_sdpa_give_equal_logits(marian):
    eager = mixed_model(marian, "subset", attn_implementation="eager")
    sdpa = mixed_model(marian, "subset", attn_implementation="sdpa")
    assert eager.config._attn_implementation == "eager"
    assert sdpa.config._attn_implementation == "sdpa"
    inputs, decoder_input_ids = marian.inputs(), marian.decoder_input_ids()
    torch.testing.assert_close(
        forward_logits(sdpa, inputs, decoder_input_ids, **MIXED), forward_logits(eager, inputs, decoder_input_ids, **MIXED)
    )
    eager.set_attn_implementation("sdpa")
    torch.testing.assert_close(
        forward_logits(eager, inputs, decoder_input_ids, **MIXED), forward_logits(sdpa, inputs, decoder_input_ids, **MIXED)
    )
    kwargs = dict(**MIXED, num_beams=3, max_new_tokens=6)
    torch.testing.assert_close(eager.generate(**inputs, **kwargs), sdpa.generate(**inputs, **kwargs))


def test_marian_flex_attention_gives_the_eager_logits(marian):
    """flex_attention on the CPU, which torch compiles here for evaluation forwards only: it has no backward on the
    CPU, and with torch 2.13 the stock model's generation with it fails inside torch's CPU kernel (index out of
    bounds), so a mixed batch's forward is what CI can check; generation with it runs on CUDA (test_cuda.py)."""
    eager = mixed_model(marian, "subset", attn_implementation="eager")
    flex = mixed_model(marian, "subset", attn_implementation="flex_attention")
    assert flex.config._attn_implementation == "flex_attention"
    inputs, decoder_input_ids = marian.inputs(), marian.decoder_input_ids()
    expected = forward_logits(eager, inputs, decoder_input_ids, **MIXED)
    torch.testing.assert_close(forward_logits(flex, inputs, decoder_input_ids, **MIXED), expected)


def test_marian_default_backend_is_the_stocks(marian):
    assert marian.model().config._attn_implementation == marian.stock_model().config._attn_implementation


def test_speech2text_refuses_sdpa_like_the_stock(speech2text, tmp_path):
    with pytest.raises(ValueError, match="does not support"):
        speech2text.stock_model(attn_implementation="sdpa")
    with pytest.raises(ValueError, match="does not support"):
        speech2text.model(attn_implementation="sdpa")
    model = speech2text.model()
    assert model.config._attn_implementation == "eager"
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="does not support"):
        speech2text.model_class.from_pretrained(tmp_path, attn_implementation="sdpa")
    loaded = speech2text.model_class.from_pretrained(tmp_path, attn_implementation="eager")
    assert loaded.config._attn_implementation == "eager"


# ---------------------------------------------------------------------------------------------------------------
# (8) The eval weight cache never serves stale weights
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("optimizer", ["sgd", "adamw-foreach"])
def test_eval_outputs_follow_an_optimizer_step(family, optimizer):
    model = mixed_model(family, "group")
    before = eval_logits(model, family)  # fills the eval cache
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=0.05, foreach=True)
    model.train()
    model(**family.inputs(), labels=family.labels(), **MIXED).loss.backward()
    opt.step()
    model.eval()
    after = eval_logits(model, family)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, eval_logits(fresh_copy(family, model), family))


def test_eval_outputs_follow_in_place_weight_changes(family):
    model = mixed_model(family, "group")
    before = eval_logits(model, family)
    with torch.no_grad():
        for _, _, attention in selecting_attentions(model):
            attention.v_proj.weight.mul_(-0.5)
    changed = eval_logits(model, family)
    assert not torch.allclose(changed, before)
    torch.testing.assert_close(changed, eval_logits(fresh_copy(family, model), family))
    # a changed phi changes the selection: flip every logit
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.neg_()
    flipped = eval_logits(model, family)
    assert not torch.allclose(flipped, changed)
    torch.testing.assert_close(flipped, eval_logits(fresh_copy(family, model), family))


def test_gathered_eval_follows_in_place_id_changes_and_a_new_choice(family, monkeypatch):
    """A mixed batch projected over all candidates keeps each example's heads while the id tensor and the choice are
    those of the last call (decoding steps): an in-place change of the ids, or of phi, is seen."""
    from hf_headsel.attention import HeadSelectionAttentionMixin

    monkeypatch.setattr(HeadSelectionAttentionMixin, "mixed_batch_projection", "gathered")
    model = mixed_model(family, "group")
    ids = {name: value.clone() for name, value in MIXED.items()}
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    before = forward_logits(model, inputs, decoder_input_ids, **ids)
    torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids, **ids), before)
    ids["decoder_task_ids"].copy_(ids["decoder_task_ids"].flip(0))  # same tensor, new ids
    moved = forward_logits(model, inputs, decoder_input_ids, **ids)
    assert not torch.allclose(moved, before)
    fresh_ids = {name: value.clone() for name, value in ids.items()}
    torch.testing.assert_close(moved, forward_logits(fresh_copy(family, model), inputs, decoder_input_ids, **fresh_ids))
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.neg_()
    flipped = forward_logits(model, inputs, decoder_input_ids, **ids)
    assert not torch.allclose(flipped, moved)
    torch.testing.assert_close(flipped, forward_logits(fresh_copy(family, model), inputs, decoder_input_ids, **fresh_ids))


def test_eval_outputs_follow_load_state_dict(family):
    model = mixed_model(family, "group")
    other = family.model(seed=99, config=copy.deepcopy(model.config))
    randomize_selector_logits(other, seed=99)
    before = eval_logits(model, family)
    model.load_state_dict(other.state_dict())
    after = eval_logits(model, family)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, eval_logits(other, family))


def test_eval_outputs_follow_load_state_dict_with_assign(family):
    model = mixed_model(family, "group")
    other = family.model(seed=99, config=copy.deepcopy(model.config))
    randomize_selector_logits(other, seed=99)
    expected = eval_logits(other, family)
    eval_logits(model, family)  # fills the cache
    model.load_state_dict(other.state_dict(), assign=True)  # same version counters as the old parameters
    torch.testing.assert_close(eval_logits(model, family), expected)


@pytest.mark.parametrize("refresh", ["eval", "clear_head_selection_cache"])
def test_eval_outputs_follow_updates_through_param_data_after_a_refresh(family, refresh):
    # writes through `param.data` bypass the version counters the cache watches (documented): a mode switch, as
    # every evaluation loop does, or `clear_head_selection_cache()` picks them up
    model = mixed_model(family, "group")
    eval_logits(model, family)  # fills the cache
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data.mul_(1.5)
    getattr(model, refresh)()
    torch.testing.assert_close(eval_logits(model, family), eval_logits(fresh_copy(family, model), family))


def test_eval_outputs_are_right_after_changing_dtype(family):
    model = mixed_model(family, "group")
    before = eval_logits(model, family)  # fills the cache in float32
    reference = fresh_copy(family, model).to(torch.float64)
    model.to(torch.float64)
    inputs = {k: v.double() if v.is_floating_point() else v for k, v in family.inputs().items()}
    out = forward_logits(model, inputs, family.decoder_input_ids(), **MIXED)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, forward_logits(reference, inputs, family.decoder_input_ids(), **MIXED))
    torch.testing.assert_close(out.float(), before, rtol=1e-4, atol=1e-4)
    model.to(torch.float32)
    torch.testing.assert_close(eval_logits(model, family), before)


# ---------------------------------------------------------------------------------------------------------------
# (9) Projections that are not plain nn.Linear (PEFT's LoRA, quantized layers): projected through the modules
# ---------------------------------------------------------------------------------------------------------------


class LowRankDelta(torch.nn.Module):
    """`base(x) + up(down(x))`, what a LoRA layer computes, written out: a projection with no `weight` of its own."""

    def __init__(self, base: torch.nn.Linear, rank: int = 2):
        super().__init__()
        self.base = base
        self.down = torch.nn.Linear(base.in_features, rank, bias=False)
        self.up = torch.nn.Linear(rank, base.out_features, bias=False)
        torch.nn.init.normal_(self.up.weight, std=0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.up(self.down(x))

    def merged(self) -> torch.nn.Linear:
        linear = copy.deepcopy(self.base)
        with torch.no_grad():
            linear.weight += self.up.weight @ self.down.weight
        return linear


def wrapped_and_merged(family, strategy: str = "group"):
    """A model whose selecting layers' q/k/v projections are [`LowRankDelta`]s, and a copy with each delta merged
    into a plain `nn.Linear`: the two compute the same function."""
    model = mixed_model(family, strategy)
    merged = copy.deepcopy(model)
    for (_, _, layer), (_, _, merged_layer) in zip(selecting_attentions(model), selecting_attentions(merged)):
        for name in PROJECTIONS:
            delta = LowRankDelta(getattr(layer, name))
            setattr(layer, name, delta)
            setattr(merged_layer, name, delta.merged())
    return model, merged


@pytest.mark.parametrize("strategy", ["group", "subset", "task_specific"])
def test_wrapped_projections_compute_what_their_merged_weights_compute(family, strategy):
    model, merged = wrapped_and_merged(family, strategy)
    assert all(layer._projects_through_modules() for _, _, layer in selecting_attentions(model))
    assert not any(layer._projects_through_modules() for _, _, layer in selecting_attentions(merged))
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    for ids in (MIXED, dict(encoder_task_ids=torch.tensor([1] * 4), decoder_task_ids=torch.tensor([2] * 4))):
        torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids, **ids),
                                   forward_logits(merged, inputs, decoder_input_ids, **ids))
    with torch.no_grad():
        generated = model.generate(**inputs, **MIXED, max_new_tokens=4, min_new_tokens=4, num_beams=2)
        assert torch.equal(generated, merged.generate(**inputs, **MIXED, max_new_tokens=4, min_new_tokens=4,
                                                      num_beams=2))


def test_wrapped_projections_train_like_their_merged_weights(family):
    """A training step (Gumbel draw seeded alike): the same loss, and the wrapped base weights get the gradients of
    the merged weights; the deltas' own parameters get theirs."""
    model, merged = wrapped_and_merged(family)
    losses, grads = [], []
    for m in (model, merged):
        m.train()
        seed_everything(7)
        loss = m(**family.inputs(), labels=family.labels(), **MIXED).loss
        loss.backward()
        losses.append(loss.detach())
        grads.append({n.replace(".base.", "."): p.grad for n, p in m.named_parameters() if p.grad is not None})
    torch.testing.assert_close(losses[0], losses[1])
    deltas = {n for n in grads[0] if ".down." in n or ".up." in n}
    assert deltas and all(grads[0][n].abs().sum() > 0 for n in deltas)
    assert set(grads[0]) - deltas == set(grads[1])
    for name, grad in grads[1].items():
        torch.testing.assert_close(grads[0][name], grad, msg=name)


def test_hooks_on_a_projection_fire_and_see_every_candidate(family):
    """A forward hook on `q_proj` (what interpretability tools register) is called as on the stock layer, with the
    projection's whole output (all `H'` candidates), and changes nothing."""
    model = mixed_model(family)
    expected = eval_logits(model, family)
    layer = selecting_attentions(model)[0][2]
    seen = []
    handle = layer.q_proj.register_forward_hook(lambda module, args, output: seen.append(output.shape[-1]))
    torch.testing.assert_close(eval_logits(model, family), expected)
    handle.remove()
    assert seen and set(seen) == {layer.total_heads * HEAD_DIM}
    assert not layer._projects_through_modules()  # the hook gone, the rows are sliced again


def test_pruned_projections_follow_their_masked_weights(family):
    """`torch.nn.utils.prune` computes `weight = weight_orig * weight_mask` in a forward pre-hook: the layer runs
    it, so a change of `weight_orig` (an optimizer step) is followed, as by the same model with the pruning made
    permanent."""
    from torch.nn.utils import prune

    model = mixed_model(family)
    for _, _, layer in selecting_attentions(model):
        for name in PROJECTIONS:
            prune.l1_unstructured(getattr(layer, name), "weight", amount=0.5)
    pruned_logits = eval_logits(model, family)
    with torch.no_grad():  # an optimizer step on the unpruned weights
        for _, _, layer in selecting_attentions(model):
            layer.q_proj.weight_orig.mul_(2.0)
    permanent = copy.deepcopy(model)
    for _, _, layer in selecting_attentions(permanent):
        for name in PROJECTIONS:
            prune.remove(getattr(layer, name), "weight")
    torch.testing.assert_close(eval_logits(model, family), eval_logits(permanent, family))
    assert not torch.allclose(eval_logits(model, family), pruned_logits)  # the step made a difference
