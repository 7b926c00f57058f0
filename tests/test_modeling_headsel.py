"""Behaviour of the head-selection models, run for both families (Marian and Speech2Text): equality with the stock
model, per-example routing in forward, generation and training, the KV cache, attention backends, the eval weight
cache, task defaults, Auto classes and the cross-attention task keys (DESIGN.md sections 2-5)."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch
from transformers import AutoConfig

from conftest import (
    ALL_COMPONENTS,
    DECODER_TASKS,
    ENCODER_TASKS,
    HEAD_DIM,
    HEADS,
    LAYERS,
    MARIAN,
    SPEECH2TEXT,
    component_task,
    extract_stock_model,
    forward_logits,
    randomize_selector_logits,
    seed_everything,
    selecting_attentions,
    take,
)

ENCODER_IDS = torch.tensor([0, 1, 1, 0])
DECODER_IDS = torch.tensor([0, 2, 1, 2])
MIXED = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)

# Every strategy with selection in all three components (task_specific: the cross-attention is keyed by the decoder
# task, like decoder_self, so both decoder components need the same H' = T_dec * H).
STRATEGY_CONFIGS = {
    "group": dict(head_selection_strategy="group", head_selection_components=ALL_COMPONENTS),
    "subset": dict(
        head_selection_strategy="subset",
        head_selection_components=ALL_COMPONENTS,
        total_encoder_attention_heads=7,
        total_decoder_attention_heads=10,
    ),
    "task_specific": dict(head_selection_strategy="task_specific", head_selection_components=ALL_COMPONENTS),
}


def mixed_model(family, strategy: str = "group", **overrides):
    """A model selecting in all three components, with `phi` spread so that tasks select different heads."""
    model = family.model(**{**STRATEGY_CONFIGS[strategy], **overrides})
    randomize_selector_logits(model)
    return model


def alone(ids: dict, index: int) -> dict:
    return {key: value[index : index + 1] for key, value in ids.items()}


def fresh_copy(family, model):
    """A new model with the same config and parameters (hence an empty eval weight cache)."""
    clone = family.model(config=copy.deepcopy(model.config))
    clone.load_state_dict(model.state_dict())
    return clone.to(model.dtype).eval()


# ---------------------------------------------------------------------------------------------------------------
# (1) The stock model
# ---------------------------------------------------------------------------------------------------------------


def test_stock_checkpoint_loads_with_only_selector_logits_missing_and_same_logits(family, tmp_path):
    stock = family.stock_model()
    stock.save_pretrained(tmp_path)
    config = family.config(
        head_selection_components=ALL_COMPONENTS, total_encoder_attention_heads=HEADS, total_decoder_attention_heads=HEADS
    )
    model, info = family.model_class.from_pretrained(tmp_path, config=config, output_loading_info=True)
    assert type(model) is family.model_class
    assert set(info["missing_keys"]) == {f"head_selection.{c}.logits" for c in ALL_COMPONENTS}
    assert not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    for selector in model.head_selection.values():  # the new logits are initialised, not left empty
        assert selector.logits.min() >= math.log(0.01) and selector.logits.max() <= 0
        assert selector.logits.std() > 0
    model.eval()
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    expected = forward_logits(stock, inputs, decoder_input_ids)
    torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids, **MIXED), expected)
    # the loss too (labels with ignored positions)
    labels = family.labels()
    with torch.no_grad():
        torch.testing.assert_close(
            model(**inputs, labels=labels, **MIXED).loss, stock(**inputs, labels=labels).loss
        )


@pytest.mark.parametrize("ratio", [2, 3])
def test_upcycled_stock_heads_give_stock_logits_whatever_is_selected(family, ratio):
    """Group strategy: candidate g + j*H fills slot g, so a stock head g tiled r times is exact (DESIGN §2)."""
    stock = family.stock_model()
    model = family.model(
        head_selection_components=ALL_COMPONENTS,
        total_encoder_attention_heads=ratio * HEADS,
        total_decoder_attention_heads=ratio * HEADS,
    )
    state = stock.state_dict()
    for component, layer, _ in selecting_attentions(model):
        side = "encoder" if component == "encoder_self" else "decoder"
        name = "encoder_attn" if component == "decoder_cross" else "self_attn"
        for proj, kind in itertools.product(("q_proj", "k_proj", "v_proj"), ("weight", "bias")):
            key = f"model.{side}.layers.{layer}.{name}.{proj}.{kind}"
            state[key] = torch.cat([state[key]] * ratio)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert set(missing) == {f"head_selection.{c}.logits" for c in ALL_COMPONENTS} and not unexpected
    randomize_selector_logits(model)
    selected = model.selected_heads()
    assert any((selected[c] >= HEADS).any() for c in selected)  # some tiled copies are really used
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    expected = forward_logits(stock, inputs, decoder_input_ids)
    torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids, **MIXED), expected)


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_each_example_equals_the_stock_model_of_its_selected_heads(family, strategy):
    """Per example, the model is the stock model whose query/key/value heads are `selected_heads()` of the
    example's tasks, slot by slot (the output projection sees them in that order)."""
    model = mixed_model(family, strategy)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    logits = forward_logits(model, inputs, decoder_input_ids, **MIXED)
    for i in range(len(ENCODER_IDS)):
        stock = extract_stock_model(family, model, int(ENCODER_IDS[i]), int(DECODER_IDS[i]))
        torch.testing.assert_close(logits[i : i + 1], forward_logits(stock, take(inputs, i), decoder_input_ids[i : i + 1]))


# ---------------------------------------------------------------------------------------------------------------
# (2) Mixed-task batches, (3) generation
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_mixed_task_batch_equals_each_example_alone(family, strategy):
    model = mixed_model(family, strategy)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    batch = forward_logits(model, inputs, decoder_input_ids, **MIXED)
    for i in range(len(ENCODER_IDS)):
        single = forward_logits(model, take(inputs, i), decoder_input_ids[i : i + 1], **alone(MIXED, i))
        torch.testing.assert_close(batch[i : i + 1], single)
    # the routing matters: the same batch on one task pair gives other logits for the other examples
    uniform = forward_logits(
        model, inputs, decoder_input_ids, encoder_task_ids=torch.zeros(4, dtype=torch.long),
        decoder_task_ids=torch.zeros(4, dtype=torch.long),
    )
    torch.testing.assert_close(uniform[0], batch[0])
    for i in range(1, 4):
        assert not torch.allclose(uniform[i], batch[i])


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_mixed_task_batch_with_autograd_enabled_in_eval_equals_no_grad(family, strategy):
    model = mixed_model(family, strategy)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    expected = forward_logits(model, inputs, decoder_input_ids, **MIXED)
    out = model(**inputs, decoder_input_ids=decoder_input_ids, **MIXED).logits
    assert out.requires_grad
    torch.testing.assert_close(out.detach(), expected)


def pad_to(sequences: torch.LongTensor, length: int, pad: int) -> torch.LongTensor:
    return torch.nn.functional.pad(sequences, (0, length - sequences.shape[-1]), value=pad)


@pytest.mark.parametrize("num_beams", [1, 3], ids=["greedy", "beam3"])
@pytest.mark.parametrize("strategy", ["subset", "task_specific"])
def test_generate_mixed_batch_equals_each_example_alone(family, num_beams, strategy):
    model = mixed_model(family, strategy)
    inputs = family.inputs()
    kwargs = dict(num_beams=num_beams, do_sample=False, max_new_tokens=8)
    batch = model.generate(**inputs, **MIXED, **kwargs)
    rows = set()
    for i in range(len(ENCODER_IDS)):
        single = model.generate(**take(inputs, i), **alone(MIXED, i), **kwargs)
        assert single.shape[-1] <= batch.shape[-1]
        torch.testing.assert_close(batch[i : i + 1], pad_to(single, batch.shape[-1], family.pad_token_id))
        rows.add(tuple(batch[i].tolist()))
    assert len(rows) > 1  # the examples really generate different things


def test_generate_routes_every_beam_by_its_example(family):
    """Beam search on a batch of one repeated input: every example follows its own tasks."""
    model = mixed_model(family, "group")
    inputs = {k: v[:1].repeat(4, *[1] * (v.dim() - 1)) for k, v in family.inputs().items()}
    batch = model.generate(**inputs, **MIXED, num_beams=3, max_new_tokens=8)
    for i in range(4):
        single = model.generate(**take(inputs, i), **alone(MIXED, i), num_beams=3, max_new_tokens=8)
        torch.testing.assert_close(batch[i : i + 1], pad_to(single, batch.shape[-1], family.pad_token_id))


def test_generate_scores_equal_forward_logits(family):
    """The cached, sliced-once-per-task decoding path gives the same step logits as a full forward pass."""
    model = mixed_model(family, "subset")
    inputs = family.inputs()
    out = model.generate(
        **inputs, **MIXED, max_new_tokens=6, do_sample=False, output_logits=True, return_dict_in_generate=True
    )
    sequences = out.sequences
    assert len(out.logits) == sequences.shape[1] - 1
    full = forward_logits(model, inputs, sequences[:, :-1], **MIXED)
    for step, step_logits in enumerate(out.logits):
        torch.testing.assert_close(step_logits, full[:, step])


# ---------------------------------------------------------------------------------------------------------------
# (4) KV cache, (5) attention weights, (6) attention backends
# ---------------------------------------------------------------------------------------------------------------


def test_kv_cache_holds_only_selected_heads(family):
    model = mixed_model(family, "group")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    with torch.no_grad():
        out = model(**inputs, decoder_input_ids=decoder_input_ids, use_cache=True, **MIXED)
    encoder_length = out.encoder_last_hidden_state.shape[1]
    cache = out.past_key_values
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
            past_key_values=cache,
            use_cache=True,
            **MIXED,
        ).logits
    full = forward_logits(model, inputs, torch.cat([decoder_input_ids, next_ids], dim=1), **MIXED)
    torch.testing.assert_close(step[:, -1], full[:, -1])


def test_beam_search_cache_holds_only_selected_heads(family):
    model = mixed_model(family, "group")
    out = model.generate(**family.inputs(), **MIXED, num_beams=3, max_new_tokens=4, return_dict_in_generate=True)
    cache = out.past_key_values
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
# (7) Training: gradients reach only what the batch's tasks selected
# ---------------------------------------------------------------------------------------------------------------

TRAIN_ENCODER_IDS = torch.tensor([1, 1, 1, 1])  # encoder task 0 absent
TRAIN_DECODER_IDS = torch.tensor([0, 2, 0, 2])  # decoder task 1 absent

TRAIN_CONFIGS = {
    # H' = 3H: two present tasks cannot cover every candidate, so some receive no gradient
    "group": dict(head_selection_strategy="group", total_encoder_attention_heads=12, total_decoder_attention_heads=12),
    "subset": dict(head_selection_strategy="subset", total_encoder_attention_heads=12, total_decoder_attention_heads=12),
    "task_specific": dict(head_selection_strategy="task_specific"),
}


@pytest.mark.parametrize("strategy", list(TRAIN_CONFIGS))
def test_training_gradient_reaches_only_candidates_selected_by_present_tasks(family, strategy):
    model = family.model(head_selection_components=ALL_COMPONENTS, **TRAIN_CONFIGS[strategy])
    chosen = {}
    for component, selector in model.head_selection.items():
        if selector.learned:
            # phi = +-40: far beyond the Gumbel noise (|g1 - g2| < 20), so the training sample is the eval choice
            with torch.no_grad():
                selector.logits.normal_()
                mask = torch.zeros_like(selector.logits, dtype=torch.bool)
                mask.scatter_(-1, selector.choose(selector.logits), True)
                selector.logits.copy_(torch.where(mask, 40.0, -40.0))
        chosen[component] = selector.selected_heads()
    model.train()
    out = model(**family.inputs(), labels=family.labels(), encoder_task_ids=TRAIN_ENCODER_IDS,
                decoder_task_ids=TRAIN_DECODER_IDS)
    out.loss.backward()

    for component, layer, attention in selecting_attentions(model):
        present = sorted({
            component_task(model.config, component, int(e), int(d))
            for e, d in zip(TRAIN_ENCODER_IDS, TRAIN_DECODER_IDS)
        })
        used = set(chosen[component][present, layer].flatten().tolist())
        total = attention.q_proj.weight.shape[0] // HEAD_DIM
        assert 0 < len(used) < total
        for proj in ("q_proj", "k_proj", "v_proj"):
            grad = getattr(attention, proj).weight.grad.view(total, HEAD_DIM, -1)
            per_head = grad.abs().sum(dim=(1, 2))
            for head in range(total):
                if head in used:
                    assert per_head[head] > 0, (component, layer, proj, head)
                else:
                    assert per_head[head] == 0, (component, layer, proj, head)
        for proj in ("q_proj", "v_proj"):  # (a key bias never gets a gradient: softmax is shift invariant)
            per_head = getattr(attention, proj).bias.grad.view(total, HEAD_DIM).abs().sum(-1)
            assert all((per_head[h] > 0) == (h in used) for h in range(total)), (component, layer, proj)

    for component, selector in model.head_selection.items():
        if not selector.learned:
            assert selector.logits is None
            continue
        present = {component_task(model.config, component, int(e), int(d))
                   for e, d in zip(TRAIN_ENCODER_IDS, TRAIN_DECODER_IDS)}
        grad = selector.logits.grad
        for task in range(selector.num_tasks):
            if task in present:
                # the straight-through gate: gradient at the selected candidates only (KL weight 0)
                selected = torch.zeros_like(grad[task], dtype=torch.bool)
                selected.scatter_(-1, chosen[component][task], True)
                assert (grad[task][selected] != 0).all(), (component, task)
                assert (grad[task][~selected] == 0).all(), (component, task)
            else:
                assert (grad[task] == 0).all(), (component, task)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(family):
    results = []
    for checkpointing in (False, True):
        model = mixed_model(family, "group")
        if checkpointing:
            model.gradient_checkpointing_enable()
        model.train()
        seed_everything(7)
        loss = model(**family.inputs(), labels=family.labels(), **MIXED).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (loss0, grads0), (loss1, grads1) = results
    torch.testing.assert_close(loss1, loss0)
    assert grads0.keys() == grads1.keys()
    assert any(name.startswith("head_selection.") for name in grads0)
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name])


@pytest.fixture
def projection_mode(monkeypatch):
    """Set `mixed_batch_projection` on every head-selection attention class for one test."""
    from hf_headsel.head_selection import HeadSelectionAttentionMixin

    def set_mode(mode: str) -> None:
        monkeypatch.setattr(HeadSelectionAttentionMixin, "mixed_batch_projection", mode)

    return set_mode


def train_step(model, family, seed: int = 7):
    model.train()
    seed_everything(seed)
    loss = model(**family.inputs(), labels=family.labels(), **MIXED).loss
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    model.eval()
    return loss.detach(), grads


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_gathered_mixed_batches_compute_what_grouped_ones_do(family, strategy, projection_mode):
    """The two ways of projecting a mixed batch: eval logits, beam search, training loss and every gradient."""
    model = mixed_model(family, strategy)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    results = {}
    for mode in ("grouped", "gathered"):
        projection_mode(mode)
        model.clear_head_selection_cache()
        results[mode] = (
            forward_logits(model, inputs, decoder_input_ids, **MIXED),
            model.generate(**inputs, **MIXED, num_beams=3, do_sample=False, max_new_tokens=6),
            *train_step(model, family),
        )
    (logits0, tokens0, loss0, grads0), (logits1, tokens1, loss1, grads1) = results["grouped"], results["gathered"]
    torch.testing.assert_close(logits1, logits0)
    assert tokens1.tolist() == tokens0.tolist()
    torch.testing.assert_close(loss1, loss0)
    assert grads1.keys() == grads0.keys()
    for name in grads0:  # unselected candidates get exactly zero in both
        torch.testing.assert_close(grads1[name], grads0[name], msg=lambda m: f"{name}: {m}")


def test_mixed_batch_projection_is_checked(family, projection_mode):
    projection_mode("sometimes")
    with pytest.raises(ValueError, match="mixed_batch_projection must be one of"):
        forward_logits(mixed_model(family), family.inputs(), family.decoder_input_ids(), **MIXED)


# ---------------------------------------------------------------------------------------------------------------
# (8) The eval weight cache never serves stale weights
# ---------------------------------------------------------------------------------------------------------------


def eval_logits(model, family):
    return forward_logits(model, family.inputs(), family.decoder_input_ids(), **MIXED)


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
# (9) Routing and default tasks
# ---------------------------------------------------------------------------------------------------------------


def test_omitted_ids_use_the_default_task(family):
    model = mixed_model(family, "group", default_encoder_task="de", default_decoder_task="it")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    explicit = forward_logits(
        model, inputs, decoder_input_ids,
        encoder_task_ids=torch.full((4,), 1), decoder_task_ids=torch.full((4,), 2),
    )
    torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids), explicit)
    torch.testing.assert_close(
        forward_logits(model, inputs, decoder_input_ids, decoder_task_ids=torch.full((4,), 2)), explicit
    )
    # explicit ids override the default
    other = forward_logits(model, inputs, decoder_input_ids, **MIXED)
    assert not torch.allclose(other, explicit)
    kwargs = dict(num_beams=3, max_new_tokens=6)
    torch.testing.assert_close(
        model.generate(**inputs, **kwargs),
        model.generate(**inputs, encoder_task_ids=torch.full((4,), 1), decoder_task_ids=torch.full((4,), 2), **kwargs),
    )


def test_omitted_ids_use_the_only_task(family):
    model = mixed_model(family, "group", encoder_tasks=["en"], decoder_tasks=["fr"])
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    zeros = torch.zeros(4, dtype=torch.long)
    expected = forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=zeros, decoder_task_ids=zeros)
    torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids), expected)


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_omitted_ids_without_default_raise_listing_the_tasks(family, side):
    model = family.model(head_selection_components=ALL_COMPONENTS)
    ids = {f"{other}_task_ids": torch.zeros(4, dtype=torch.long) for other in ("encoder", "decoder") if other != side}
    tasks = ENCODER_TASKS if side == "encoder" else DECODER_TASKS
    with pytest.raises(ValueError, match=f"{side}_task_ids") as error:
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    assert all(repr(task) in str(error.value) for task in tasks)
    with pytest.raises(ValueError, match=f"{side}_task_ids"):
        model.generate(**family.inputs(), **ids, max_new_tokens=3)


@pytest.mark.parametrize("side", ["encoder", "decoder"])
@pytest.mark.parametrize("bad_id", [5, -1, 3], ids=["too-large", "negative", "just-past-end"])
def test_out_of_range_ids_raise_naming_the_tasks(family, side, bad_id):
    tasks = ENCODER_TASKS if side == "encoder" else DECODER_TASKS
    if bad_id == 3 and side == "encoder":
        bad_id = len(ENCODER_TASKS)
    model = family.model(head_selection_components=ALL_COMPONENTS)
    ids = dict(MIXED)
    ids[f"{side}_task_ids"] = torch.tensor([0, bad_id, 0, 0])
    with pytest.raises(ValueError, match=str(bad_id)) as error:
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    assert all(task in str(error.value) for task in tasks)


def test_task_route_lays_a_mixed_batch_out_task_by_task():
    from hf_headsel.head_selection import TaskRoute

    ids = torch.tensor([2, 0, 2, 1, 0, 2])
    route = TaskRoute.build(ids, num_tasks=4)
    assert route.tasks == (0, 1, 2) and route.sizes == (2, 1, 3) and route.single_task is None
    assert ids[route.order].tolist() == [0, 0, 1, 2, 2, 2]
    assert route.order[route.inverse].tolist() == list(range(6))
    states = torch.arange(6.0)[:, None]
    applied = route.per_task(states, lambda task, rows: rows * 10 + task)
    torch.testing.assert_close(applied, states * 10 + ids[:, None].float())
    single = TaskRoute.single(3, batch_size=2, device=torch.device("cpu"))
    assert single.single_task == 3 and single.ids.tolist() == [3, 3] and single.order is None


def test_an_id_tensor_is_routed_once_until_it_changes(family):
    # generate passes the same id tensor at every step: its route is remembered, but an in-place change (even to an
    # invalid id) is seen
    model = family.model(head_selection_components=ALL_COMPONENTS).eval()
    ids = torch.tensor([0, 2, 1, 2])
    first = model.task_routes(ENCODER_IDS, ids, 4, ids.device).decoder
    assert model.task_routes(ENCODER_IDS, ids, 4, ids.device).decoder is first
    assert model.task_routes(ENCODER_IDS, ids.clone(), 4, ids.device).decoder is not first
    ids[1] = 1
    assert model.task_routes(ENCODER_IDS, ids, 4, ids.device).decoder.ids.tolist() == [0, 1, 1, 2]
    ids[1] = len(DECODER_TASKS)
    with pytest.raises(ValueError, match="out of range"):
        model.task_routes(ENCODER_IDS, ids, 4, ids.device)


@pytest.mark.parametrize("side", ["encoder", "decoder"])
@pytest.mark.parametrize(
    "bad_ids",
    [torch.tensor([0, 1]), torch.tensor([[0, 1, 0, 1]]), torch.tensor([0.0, 1.0, 0.0, 1.0]),
     torch.tensor([True, False, True, False])],
    ids=["wrong-length", "two-dimensional", "float", "bool"],
)
def test_malformed_ids_raise(family, side, bad_ids):
    model = family.model()
    ids = dict(MIXED)
    ids[f"{side}_task_ids"] = bad_ids
    with pytest.raises(ValueError, match=f"{side}_task_ids"):
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)


def test_from_pretrained_task_sets_the_defaults_of_the_sides_that_know_it(family, tmp_path):
    # encoder tasks ["en", "de"], decoder tasks ["de", "fr", "it"]
    mixed_model(family, "group").save_pretrained(tmp_path)
    cases = [
        (("de", None, None), ("de", "de")),
        (("en", None, None), ("en", None)),
        (("fr", None, None), (None, "fr")),
        ((None, "de", None), ("de", None)),
        ((None, None, "it"), (None, "it")),
        ((None, "en", "fr"), ("en", "fr")),
        (("de", None, "it"), ("de", "it")),  # an explicit side wins over `task`
    ]
    for (task, encoder_task, decoder_task), (encoder_default, decoder_default) in cases:
        kwargs = {k: v for k, v in dict(task=task, encoder_task=encoder_task, decoder_task=decoder_task).items() if v}
        model = family.model_class.from_pretrained(tmp_path, **kwargs)
        assert model.config.default_encoder_task == encoder_default, kwargs
        assert model.config.default_decoder_task == decoder_default, kwargs
    model = family.model_class.from_pretrained(tmp_path, task="de").eval()
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    torch.testing.assert_close(
        forward_logits(model, inputs, decoder_input_ids),
        forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=torch.full((4,), 1),
                       decoder_task_ids=torch.full((4,), 0)),
    )
    # only the decoder knows "fr": the encoder still needs ids
    model = family.model_class.from_pretrained(tmp_path, task="fr").eval()
    with pytest.raises(ValueError, match="encoder_task_ids"):
        model(**inputs, decoder_input_ids=decoder_input_ids)
    torch.testing.assert_close(
        forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=ENCODER_IDS),
        forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=ENCODER_IDS,
                       decoder_task_ids=torch.full((4,), 1)),
    )


@pytest.mark.parametrize(
    "kwargs", [dict(task="xx"), dict(encoder_task="fr"), dict(decoder_task="en"), dict(task="de", decoder_task="xx")]
)
def test_from_pretrained_with_unknown_task_raises_naming_the_tasks(family, tmp_path, kwargs):
    family.model().save_pretrained(tmp_path)
    with pytest.raises(ValueError) as error:
        family.model_class.from_pretrained(tmp_path, **kwargs)
    side_tasks = {"task": ENCODER_TASKS + DECODER_TASKS, "encoder_task": ENCODER_TASKS, "decoder_task": DECODER_TASKS}
    key = "decoder_task" if "decoder_task" in kwargs else next(iter(kwargs))
    assert all(task in str(error.value) for task in side_tasks[key])


def test_set_default_task(family):
    model = mixed_model(family, "group")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    model.set_default_task("de")
    assert (model.config.default_encoder_task, model.config.default_decoder_task) == ("de", "de")
    torch.testing.assert_close(
        forward_logits(model, inputs, decoder_input_ids),
        forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=torch.full((4,), 1),
                       decoder_task_ids=torch.full((4,), 0)),
    )
    model.set_default_task(decoder_task="it")
    assert (model.config.default_encoder_task, model.config.default_decoder_task) == ("de", "it")
    model.set_default_task(encoder_task="en")
    assert (model.config.default_encoder_task, model.config.default_decoder_task) == ("en", "it")
    torch.testing.assert_close(
        forward_logits(model, inputs, decoder_input_ids),
        forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=torch.zeros(4, dtype=torch.long),
                       decoder_task_ids=torch.full((4,), 2)),
    )
    for bad, tasks in ((dict(task="xx"), ENCODER_TASKS + DECODER_TASKS), (dict(encoder_task="it"), ENCODER_TASKS),
                       (dict(decoder_task="en"), DECODER_TASKS)):
        with pytest.raises(ValueError) as error:
            model.set_default_task(**bad)
        assert all(task in str(error.value) for task in tasks), bad
    assert (model.config.default_encoder_task, model.config.default_decoder_task) == ("en", "it")


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_selected_heads_shapes_and_values(family, strategy):
    model = mixed_model(family, strategy)
    selected = model.selected_heads()
    assert set(selected) == set(ALL_COMPONENTS)
    for component, heads in selected.items():
        selector = model.head_selection[component]
        tasks = len(ENCODER_TASKS) if component == "encoder_self" else len(DECODER_TASKS)
        assert heads.shape == (tasks, LAYERS, HEADS)
        assert heads.dtype == torch.long
        if strategy == "task_specific":
            expected = (torch.arange(tasks)[:, None, None] * HEADS + torch.arange(HEADS)).expand(-1, LAYERS, -1)
        else:
            expected = selector.choose(selector.logits.detach())
        torch.testing.assert_close(heads, expected)
        assert heads.min() >= 0 and heads.max() < selector.total_heads
        # H distinct candidates per task and layer
        assert (heads.sort(-1).values.diff(dim=-1) > 0).all()


def test_selected_heads_of_a_pair_keyed_cross_attention(family):
    model = mixed_model(family, "group", cross_attention_task_key="pair")
    selected = model.selected_heads()
    assert selected["decoder_cross"].shape == (len(ENCODER_TASKS) * len(DECODER_TASKS), LAYERS, HEADS)
    assert selected["decoder_self"].shape == (len(DECODER_TASKS), LAYERS, HEADS)


# ---------------------------------------------------------------------------------------------------------------
# (10) Auto classes and save / load
# ---------------------------------------------------------------------------------------------------------------


def test_auto_classes_load_the_head_selection_model(family, tmp_path):
    model = mixed_model(family, "subset")
    model.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert type(config) is family.config_class
    loaded = family.auto_model_class.from_pretrained(tmp_path).eval()
    assert type(loaded) is family.model_class
    for component, heads in model.selected_heads().items():
        torch.testing.assert_close(loaded.selected_heads()[component], heads)
    torch.testing.assert_close(eval_logits(loaded, family), eval_logits(model, family))
    with_task = family.auto_model_class.from_pretrained(tmp_path, task="it")
    assert with_task.config.default_decoder_task == "it" and with_task.config.default_encoder_task is None


def test_auto_model_for_the_other_modality_rejects_the_config(family, tmp_path):
    other = SPEECH2TEXT if family is MARIAN else MARIAN
    family.model().save_pretrained(tmp_path)
    with pytest.raises(ValueError):
        other.auto_model_class.from_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# (11) Cross-attention task keys
# ---------------------------------------------------------------------------------------------------------------

PAIR_ENCODER_IDS = torch.tensor([0, 1, 0, 1])
PAIR_DECODER_IDS = torch.tensor([0, 0, 1, 1])


@pytest.mark.parametrize(
    "strategy, key",
    [("group", "decoder"), ("group", "encoder"), ("group", "pair"), ("subset", "pair"), ("task_specific", "decoder"),
     ("task_specific", "encoder"), ("task_specific", "pair")],
)
def test_cross_attention_task_key_routes_each_example(family, strategy, key):
    """Only the cross-attention selects; four copies of one input with task pairs (0,0), (1,0), (0,1), (1,1)."""
    model = family.model(
        head_selection_strategy=strategy, head_selection_components=["decoder_cross"], cross_attention_task_key=key
    )
    randomize_selector_logits(model)
    if strategy == "task_specific":
        tasks = {"decoder": len(DECODER_TASKS), "encoder": len(ENCODER_TASKS),
                 "pair": len(ENCODER_TASKS) * len(DECODER_TASKS)}[key]
        assert model.config.total_decoder_attention_heads == tasks * HEADS
    inputs = {k: v[:1].repeat(4, *[1] * (v.dim() - 1)) for k, v in family.inputs().items()}
    decoder_input_ids = family.decoder_input_ids(batch_size=1).repeat(4, 1)
    logits = forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=PAIR_ENCODER_IDS,
                            decoder_task_ids=PAIR_DECODER_IDS)
    same = {"decoder": [(0, 1), (2, 3)], "encoder": [(0, 2), (1, 3)], "pair": []}[key]
    for a, b in itertools.combinations(range(4), 2):
        if (a, b) in same:
            torch.testing.assert_close(logits[a], logits[b])
        else:
            assert not torch.allclose(logits[a], logits[b]), (a, b)
    for i in range(4):
        stock = extract_stock_model(family, model, int(PAIR_ENCODER_IDS[i]), int(PAIR_DECODER_IDS[i]))
        torch.testing.assert_close(logits[i : i + 1], forward_logits(stock, take(inputs, i), decoder_input_ids[:1]))
    # and generation routes the same way
    kwargs = dict(encoder_task_ids=PAIR_ENCODER_IDS, decoder_task_ids=PAIR_DECODER_IDS, num_beams=3, max_new_tokens=6)
    batch = model.generate(**inputs, **kwargs)
    for i in range(4):
        single = model.generate(
            **take(inputs, i), encoder_task_ids=PAIR_ENCODER_IDS[i : i + 1],
            decoder_task_ids=PAIR_DECODER_IDS[i : i + 1], num_beams=3, max_new_tokens=6,
        )
        torch.testing.assert_close(batch[i : i + 1], pad_to(single, batch.shape[-1], family.pad_token_id))


def test_pair_key_with_all_components_mixed_batch(family):
    model = mixed_model(family, "subset", cross_attention_task_key="pair")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    batch = forward_logits(model, inputs, decoder_input_ids, **MIXED)
    for i in range(4):
        stock = extract_stock_model(family, model, int(ENCODER_IDS[i]), int(DECODER_IDS[i]))
        torch.testing.assert_close(batch[i : i + 1], forward_logits(stock, take(inputs, i), decoder_input_ids[i : i + 1]))


# ---------------------------------------------------------------------------------------------------------------
# Task ids given as Python lists (accepted by forward)
# ---------------------------------------------------------------------------------------------------------------


def test_forward_accepts_task_ids_as_lists(family):
    model = mixed_model(family, "group")
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    torch.testing.assert_close(
        forward_logits(model, inputs, decoder_input_ids, encoder_task_ids=ENCODER_IDS.tolist(),
                       decoder_task_ids=DECODER_IDS.tolist()),
        forward_logits(model, inputs, decoder_input_ids, **MIXED),
    )


def test_generate_accepts_task_ids_as_lists_with_beam_search(family):
    model = mixed_model(family, "group")
    kwargs = dict(num_beams=3, max_new_tokens=5)
    torch.testing.assert_close(
        model.generate(**family.inputs(), encoder_task_ids=ENCODER_IDS.tolist(), decoder_task_ids=DECODER_IDS.tolist(),
                       **kwargs),
        model.generate(**family.inputs(), **MIXED, **kwargs),
    )


def test_one_task_by_name_or_int_equals_its_id_tensor(family):
    model = mixed_model(family, "group")
    batch = family.inputs()["attention_mask"].shape[0]
    encoder, decoder = ENCODER_TASKS[1], DECODER_TASKS[2]
    as_tensors = dict(encoder_task_ids=torch.full((batch,), 1), decoder_task_ids=torch.full((batch,), 2))
    for ids in (dict(encoder_task_ids=encoder, decoder_task_ids=decoder), dict(encoder_task_ids=1, decoder_task_ids=2)):
        torch.testing.assert_close(forward_logits(model, family.inputs(), family.decoder_input_ids(), **ids),
                                   forward_logits(model, family.inputs(), family.decoder_input_ids(), **as_tensors))
        kwargs = dict(num_beams=3, max_new_tokens=5)
        torch.testing.assert_close(model.generate(**family.inputs(), **ids, **kwargs),
                                   model.generate(**family.inputs(), **as_tensors, **kwargs))
