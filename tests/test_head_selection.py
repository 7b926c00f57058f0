"""Unit behaviour of the shared core (`hf_headsel/head_selection.py`): config validation and defaults, the head
choice of every strategy, Gumbel-sigmoid sampling, the KL term and the loss (DESIGN.md sections 2-4)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import (
    ALL_COMPONENTS,
    DECODER_TASKS,
    ENCODER_TASKS,
    HEADS,
    LAYERS,
    component_task,
    randomize_selector_logits,
)
from hf_headsel import COMPONENTS, STRATEGIES, HeadSelector, HeadSelSeq2SeqLMOutput

# ---------------------------------------------------------------------------------------------------------------
# Config: defaults
# ---------------------------------------------------------------------------------------------------------------


def test_public_constants():
    assert COMPONENTS == ("encoder_self", "decoder_self", "decoder_cross")
    assert STRATEGIES == ("group", "subset", "task_specific")


def test_config_defaults(family):
    config = family.config_class(**family.base_kwargs)
    assert config.model_type == {"marian": "headsel_marian", "speech_to_text": "headsel_speech_to_text"}[family.name]
    assert config.encoder_tasks == ["default"]
    assert config.decoder_tasks == ["default"]
    assert config.task_type == "lang"
    assert config.head_selection_strategy == "group"
    assert config.head_selection_components == ["encoder_self", "decoder_self"]
    assert config.total_encoder_attention_heads == 2 * HEADS
    assert config.total_decoder_attention_heads == 2 * HEADS
    assert config.head_selection_temperature == 5.0
    assert config.head_selection_kl_weight == 0.0
    assert config.default_encoder_task is None
    assert config.default_decoder_task is None
    assert config.cross_attention_task_key == "decoder"
    # the stock meaning of the stock keywords is kept: H heads per task
    assert config.encoder_attention_heads == HEADS
    assert config.decoder_attention_heads == HEADS


def test_default_total_heads_is_twice_each_sides_heads(family):
    config = family.config(encoder_attention_heads=2, decoder_attention_heads=8)
    assert config.total_encoder_attention_heads == 4
    assert config.total_decoder_attention_heads == 16


def test_task_specific_default_total_heads_is_tasks_times_heads(family):
    config = family.config(head_selection_strategy="task_specific")
    assert config.total_encoder_attention_heads == len(ENCODER_TASKS) * HEADS
    assert config.total_decoder_attention_heads == len(DECODER_TASKS) * HEADS


def test_task_specific_pair_default_total_heads_is_encoder_tasks_times_decoder_tasks_times_heads(family):
    config = family.config(
        head_selection_strategy="task_specific",
        head_selection_components=["decoder_cross"],
        cross_attention_task_key="pair",
    )
    assert config.total_decoder_attention_heads == len(ENCODER_TASKS) * len(DECODER_TASKS) * HEADS


def test_explicit_total_heads_are_kept(family):
    config = family.config(total_encoder_attention_heads=12, total_decoder_attention_heads=4)
    assert config.total_encoder_attention_heads == 12
    assert config.total_decoder_attention_heads == 4


# ---------------------------------------------------------------------------------------------------------------
# Config: validation (every invalid combination raises ValueError at creation)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_total_heads_below_heads_is_rejected(family, side):
    with pytest.raises(ValueError, match=f"total_{side}_attention_heads"):
        family.config(**{f"total_{side}_attention_heads": HEADS - 1})


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_group_needs_total_heads_multiple_of_heads(family, side):
    with pytest.raises(ValueError, match="multiple"):
        family.config(**{f"total_{side}_attention_heads": HEADS + 2})


def test_subset_accepts_total_heads_not_multiple_of_heads(family):
    config = family.config(head_selection_strategy="subset", total_encoder_attention_heads=HEADS + 2)
    assert config.total_encoder_attention_heads == HEADS + 2


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_task_specific_needs_total_heads_equal_tasks_times_heads(family, side):
    with pytest.raises(ValueError, match="task_specific"):
        family.config(head_selection_strategy="task_specific", **{f"total_{side}_attention_heads": 5 * HEADS})


def test_task_specific_pair_needs_encoder_tasks_times_decoder_tasks_times_heads(family):
    kwargs = dict(
        head_selection_strategy="task_specific",
        head_selection_components=["decoder_cross"],
        cross_attention_task_key="pair",
    )
    with pytest.raises(ValueError, match="task_specific"):
        family.config(total_decoder_attention_heads=len(DECODER_TASKS) * HEADS, **kwargs)
    config = family.config(total_decoder_attention_heads=len(ENCODER_TASKS) * len(DECODER_TASKS) * HEADS, **kwargs)
    assert config.total_decoder_attention_heads == 24


def test_task_specific_components_of_one_side_with_different_task_counts_are_rejected(family):
    # decoder_self needs T_dec * H candidates, a pair-keyed decoder_cross T_enc * T_dec * H: one H' cannot be both
    with pytest.raises(ValueError, match="task_specific"):
        family.config(
            head_selection_strategy="task_specific",
            head_selection_components=["decoder_self", "decoder_cross"],
            cross_attention_task_key="pair",
        )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(head_selection_strategy="random"), "head_selection_strategy"),
        (dict(head_selection_components=["encoder_cross"]), "head_selection_components"),
        (dict(head_selection_components=["encoder_self", "encoder_self"]), "twice"),
        (dict(task_type="language"), "task_type"),
        (dict(cross_attention_task_key="source"), "cross_attention_task_key"),
        (dict(encoder_tasks=["en", "de", "en"]), "twice"),
        (dict(decoder_tasks=["fr", "fr"]), "twice"),
        (dict(encoder_tasks=[]), "encoder_tasks"),
        (dict(decoder_tasks=["fr", ""]), "decoder_tasks"),
        (dict(default_encoder_task="fr"), "default_encoder_task"),
        (dict(default_decoder_task="en"), "default_decoder_task"),
        (dict(head_selection_temperature=0.0), "head_selection_temperature"),
        (dict(head_selection_kl_weight=-0.1), "head_selection_kl_weight"),
    ],
    ids=[
        "unknown-strategy",
        "unknown-component",
        "duplicate-component",
        "unknown-task-type",
        "unknown-cross-key",
        "duplicate-encoder-task",
        "duplicate-decoder-task",
        "empty-task-list",
        "empty-task-name",
        "bad-default-encoder-task",
        "bad-default-decoder-task",
        "zero-temperature",
        "negative-kl-weight",
    ],
)
def test_invalid_config_is_rejected(family, overrides, message):
    with pytest.raises(ValueError, match=message):
        family.config(**overrides)


def test_valid_defaults_and_every_valid_choice_are_accepted(family):
    for strategy, key, task_type in itertools.product(STRATEGIES, ["decoder", "encoder", "pair"], ["lang", "domain"]):
        components = ["encoder_self", "decoder_cross"] if strategy == "task_specific" else ALL_COMPONENTS
        config = family.config(
            head_selection_strategy=strategy,
            head_selection_components=components,
            cross_attention_task_key=key,
            task_type=task_type,
            default_encoder_task="de",
            default_decoder_task="it",
        )
        assert config.head_selection_strategy == strategy
        assert config.default_encoder_task == "de" and config.default_decoder_task == "it"


# ---------------------------------------------------------------------------------------------------------------
# Config: save / load
# ---------------------------------------------------------------------------------------------------------------

HEADSEL_KEYS = (
    "encoder_tasks",
    "decoder_tasks",
    "task_type",
    "head_selection_strategy",
    "head_selection_components",
    "total_encoder_attention_heads",
    "total_decoder_attention_heads",
    "head_selection_temperature",
    "head_selection_kl_weight",
    "default_encoder_task",
    "default_decoder_task",
    "cross_attention_task_key",
)


def test_config_save_load_round_trip(family, tmp_path):
    config = family.config(
        task_type="domain",
        head_selection_strategy="subset",
        head_selection_components=["decoder_self", "decoder_cross"],
        total_encoder_attention_heads=12,
        total_decoder_attention_heads=6,
        head_selection_temperature=2.5,
        head_selection_kl_weight=0.3,
        default_encoder_task="de",
        default_decoder_task="fr",
        cross_attention_task_key="pair",
    )
    config.save_pretrained(tmp_path)
    loaded = family.config_class.from_pretrained(tmp_path)
    assert type(loaded) is family.config_class
    for key in HEADSEL_KEYS:
        assert getattr(loaded, key) == getattr(config, key), key
    for key, value in family.base_kwargs.items():
        expected = list(value) if isinstance(value, tuple) else value
        actual = getattr(loaded, key)
        assert (list(actual) if isinstance(actual, tuple) else actual) == expected, key
    again = family.config_class.from_dict(loaded.to_dict())
    assert {k: getattr(again, k) for k in HEADSEL_KEYS} == {k: getattr(config, k) for k in HEADSEL_KEYS}


def test_config_load_validates(family, tmp_path):
    family.config().save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    saved = json.loads(path.read_text())
    saved["head_selection_strategy"] = "bogus"
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="head_selection_strategy"):
        family.config_class.from_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# HeadSelector.choose
# ---------------------------------------------------------------------------------------------------------------


def test_group_choice_takes_best_candidate_of_each_group():
    selector = HeadSelector("group", num_tasks=1, num_layers=1, heads=2, total_heads=6)
    # group 0 = {0, 2, 4}, group 1 = {1, 3, 5}
    scores = torch.tensor([0.1, 0.9, 0.5, 0.2, 0.3, 0.4])
    assert selector.choose(scores).tolist() == [2, 1]
    scores = torch.tensor([0.1, 0.0, 0.5, 0.2, 0.7, 0.4])
    assert selector.choose(scores).tolist() == [4, 5]


def test_group_choice_matches_brute_force():
    heads, total = 4, 12
    selector = HeadSelector("group", num_tasks=3, num_layers=2, heads=heads, total_heads=total)
    scores = torch.randn(3, 2, total)
    chosen = selector.choose(scores)
    assert chosen.shape == (3, 2, heads)
    assert chosen.dtype == torch.long
    for t, layer in itertools.product(range(3), range(2)):
        for g in range(heads):
            group = [g + j * heads for j in range(total // heads)]
            assert chosen[t, layer, g].item() == max(group, key=lambda c: scores[t, layer, c].item())


def test_group_choice_with_one_candidate_per_group_is_identity():
    selector = HeadSelector("group", num_tasks=2, num_layers=2, heads=4, total_heads=4)
    assert selector.choose(torch.randn(2, 2, 4)).tolist() == [[[0, 1, 2, 3]] * 2] * 2


@pytest.mark.parametrize(
    "scores, expected",
    [
        ([0.1, 0.2, 0.9, 0.8], [2, 3]),  # heads 2 and 3 win: head 2 first
        ([0.1, 0.2, 0.8, 0.9], [2, 3]),  # same, whatever their rank
        ([0.1, 0.8, 0.9, 0.2], [1, 2]),  # heads 1 and 2 win: head 2 last
        ([0.9, 0.1, 0.2, 0.95], [0, 3]),
    ],
)
def test_subset_choice_fills_slots_in_ascending_candidate_order(scores, expected):
    selector = HeadSelector("subset", num_tasks=1, num_layers=1, heads=2, total_heads=4)
    assert selector.choose(torch.tensor(scores)).tolist() == expected


def test_subset_choice_matches_brute_force():
    heads, total = 4, 7
    selector = HeadSelector("subset", num_tasks=3, num_layers=2, heads=heads, total_heads=total)
    scores = torch.randn(3, 2, total)
    chosen = selector.choose(scores)
    assert chosen.shape == (3, 2, heads)
    for t, layer in itertools.product(range(3), range(2)):
        best = sorted(range(total), key=lambda c: -scores[t, layer, c].item())[:heads]
        assert chosen[t, layer].tolist() == sorted(best)


def test_task_specific_heads_are_contiguous_blocks():
    selector = HeadSelector("task_specific", num_tasks=3, num_layers=2, heads=2, total_heads=6)
    assert selector.logits is None
    assert list(selector.parameters()) == []
    assert selector.task_specific_heads().tolist() == [[0, 1], [2, 3], [4, 5]]
    selected = selector.selected_heads()
    assert selected.shape == (3, 2, 2)
    assert selected.tolist() == [[[0, 1]] * 2, [[2, 3]] * 2, [[4, 5]] * 2]
    heads, gates = selector.layer_choice(1, sample=True, temperature=5.0)
    assert heads.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert gates is None


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_selected_heads_is_choice_of_logits(strategy):
    selector = HeadSelector(strategy, num_tasks=3, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.normal_()
    assert selector.logits.shape == (3, 2, 8)
    torch.testing.assert_close(selector.selected_heads(), selector.choose(selector.logits.detach()))


# ---------------------------------------------------------------------------------------------------------------
# Gumbel-sigmoid sampling and gates
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_sampled_choice_varies_between_calls(strategy):
    selector = HeadSelector(strategy, num_tasks=2, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.zero_()
    choices = {tuple(selector.layer_choice(0, sample=True, temperature=5.0)[0].flatten().tolist()) for _ in range(20)}
    assert len(choices) > 1


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_deterministic_choice_is_repeatable_and_ungated(strategy):
    selector = HeadSelector(strategy, num_tasks=2, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.normal_()
    for layer in range(2):
        first, gates = selector.layer_choice(layer, sample=False, temperature=5.0)
        assert gates is None
        torch.testing.assert_close(first, selector.choose(selector.logits[:, layer].detach()))
        for _ in range(5):
            torch.testing.assert_close(selector.layer_choice(layer, sample=False, temperature=5.0)[0], first)


def test_sampled_choice_follows_logits():
    # 4000 tasks, one group of two candidates: candidate 0 has logit 3, candidate 1 logit 0
    selector = HeadSelector("group", num_tasks=4000, num_layers=1, heads=1, total_heads=2)
    with torch.no_grad():
        selector.logits.copy_(torch.tensor([3.0, 0.0]).expand(4000, 1, 2))
    heads, _ = selector.layer_choice(0, sample=True, temperature=5.0)
    rate = (heads == 0).float().mean().item()
    # P(3 + L0 > L1) for independent standard logistic noises is about 0.87: noisy, but biased by phi
    assert 0.75 < rate < 0.97


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_straight_through_gates_are_one_with_gradient_to_selected_logits(strategy):
    selector = HeadSelector(strategy, num_tasks=3, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.normal_()
    layer = 1
    heads, gates = selector.layer_choice(layer, sample=True, temperature=5.0)
    assert heads.shape == gates.shape == (3, 4)
    torch.testing.assert_close(gates, torch.ones_like(gates))
    (gates * torch.arange(1.0, 5.0)).sum().backward()
    grad = selector.logits.grad
    assert grad is not None
    expected_nonzero = torch.zeros_like(grad, dtype=torch.bool)
    for t in range(3):
        expected_nonzero[t, layer, heads[t]] = True
    assert (grad[expected_nonzero] != 0).all()
    assert (grad[~expected_nonzero] == 0).all()


def test_gate_gradient_is_sigmoid_derivative_over_temperature():
    # one candidate per task: y = sigmoid((phi + g1 - g2) / tau), d gate / d phi = y (1 - y) / tau > 0
    selector = HeadSelector("group", num_tasks=500, num_layers=1, heads=1, total_heads=2)
    with torch.no_grad():
        selector.logits.zero_()
    heads, gates = selector.layer_choice(0, sample=True, temperature=2.0)
    gates.sum().backward()
    grad = selector.logits.grad[:, 0].gather(-1, heads)
    assert (grad > 0).all()
    assert (grad <= 0.25 / 2.0 + 1e-7).all()  # max of y (1 - y) / tau


@pytest.mark.parametrize("strategy", ["group", "subset", "task_specific"])
def test_draw_covers_every_task_and_layer(strategy):
    total = 12 if strategy == "task_specific" else 8
    selector = HeadSelector(strategy, num_tasks=3, num_layers=2, heads=4, total_heads=total)
    if selector.learned:
        with torch.no_grad():
            selector.logits.normal_()
    deterministic = selector.draw(sample=False, temperature=5.0)
    assert deterministic.gates is None
    torch.testing.assert_close(deterministic.heads, selector.selected_heads())
    sampled = selector.draw(sample=True, temperature=5.0)
    assert sampled.heads.shape == (3, 2, 4)
    for layer in range(2):
        heads, gates = sampled.layer(layer)
        torch.testing.assert_close(heads, sampled.heads[:, layer])
        if selector.learned:
            torch.testing.assert_close(gates, torch.ones(3, 4))
        else:
            assert gates is None and heads.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_training_forward_draws_once_per_component(family, monkeypatch):
    # One Gumbel-sigmoid sample of all layers per forward pass, shared by the layers, not one per layer call.
    model = family.model(head_selection_components=ALL_COMPONENTS)
    calls = []
    draw = HeadSelector.draw

    def counting_draw(self, *args, **kwargs):
        result = draw(self, *args, **kwargs)
        calls.append(result)
        return result

    monkeypatch.setattr(HeadSelector, "draw", counting_draw)
    model.train()
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    model(**family.inputs(), labels=family.labels(), **ids).loss.backward()
    assert len(calls) == len(ALL_COMPONENTS)
    assert all(draw.gates is not None and draw.gates.requires_grad for draw in calls)


def test_training_mode_resamples_and_eval_is_deterministic(family):
    model = family.model(head_selection_components=ALL_COMPONENTS)
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.zero_()  # every choice equally likely: samples differ
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    model.train()
    with torch.no_grad():
        sampled = [model(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits for _ in range(4)]
    assert any(not torch.allclose(sampled[0], other) for other in sampled[1:])
    model.eval()
    with torch.no_grad():
        first = model(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits
        for _ in range(3):
            torch.testing.assert_close(model(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits, first)
    # with autograd enabled, eval is the same deterministic computation
    torch.testing.assert_close(model(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits.detach(), first)


# ---------------------------------------------------------------------------------------------------------------
# KL
# ---------------------------------------------------------------------------------------------------------------


def direct_task_kl(logits: torch.Tensor, heads: int, total_heads: int) -> torch.Tensor:
    """KL(Bernoulli(q) || Bernoulli(pi)) = q log(q/pi) + (1-q) log((1-q)/(1-pi)), mean over layers and candidates."""
    q = torch.sigmoid(logits.detach().double())
    pi = heads / total_heads
    kl = q * torch.log(q / pi) + (1 - q) * torch.log((1 - q) / (1 - pi))
    return kl.mean(dim=(1, 2))


@pytest.mark.parametrize("strategy, heads, total", [("group", 4, 8), ("group", 2, 6), ("subset", 4, 7)])
def test_task_kl_equals_closed_form(strategy, heads, total):
    selector = HeadSelector(strategy, num_tasks=3, num_layers=2, heads=heads, total_heads=total)
    with torch.no_grad():
        selector.logits.normal_(0.0, 2.0)
    kl = selector.task_kl()
    assert kl.shape == (3,)
    assert (kl > 0).all()
    torch.testing.assert_close(kl, direct_task_kl(selector.logits, heads, total).float())


def test_task_kl_is_zero_at_the_prior():
    selector = HeadSelector("group", num_tasks=2, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.fill_(math.log(0.5 / 0.5))
    torch.testing.assert_close(selector.task_kl(), torch.zeros(2), atol=1e-7, rtol=0)


def test_task_kl_is_differentiable():
    selector = HeadSelector("subset", num_tasks=2, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.normal_()
    selector.task_kl().sum().backward()
    assert selector.logits.grad is not None and (selector.logits.grad != 0).any()


def test_task_kl_is_none_without_learned_selection():
    assert HeadSelector("task_specific", num_tasks=3, num_layers=2, heads=4, total_heads=12).task_kl() is None
    assert HeadSelector("group", num_tasks=3, num_layers=2, heads=4, total_heads=4).task_kl() is None


def expected_batch_kl(model, encoder_ids, decoder_ids, labels) -> torch.Tensor:
    """Hand computation: per component, sum over tasks present of (target tokens of the task / all target tokens)
    times the task's KL; summed over the components that learn a selection."""
    tokens = (labels != -100).sum(dim=-1).double()
    total = torch.zeros((), dtype=torch.float64)
    for component, selector in model.head_selection.items():
        if selector.logits is None or selector.total_heads == selector.heads:
            continue
        task_kl = direct_task_kl(selector.logits, selector.heads, selector.total_heads)
        tasks = [component_task(model.config, component, int(e), int(d)) for e, d in zip(encoder_ids, decoder_ids)]
        for task in sorted(set(tasks)):
            weight = sum(tokens[i] for i, t in enumerate(tasks) if t == task) / tokens.sum()
            total = total + weight * task_kl[task]
    return total.float()


@pytest.mark.parametrize("cross_key", ["decoder", "pair"])
def test_batch_kl_is_token_weighted_over_tasks_present(family, cross_key):
    model = family.model(head_selection_components=ALL_COMPONENTS, cross_attention_task_key=cross_key)
    randomize_selector_logits(model, scale=1.5)
    encoder_ids, decoder_ids = torch.tensor([0, 1, 1, 0]), torch.tensor([0, 2, 2, 0])  # decoder task 1 absent
    labels = family.labels(pad_last=3)
    labels[1, -1] = -100  # tasks now have different token counts
    out = model(**family.inputs(), labels=labels, encoder_task_ids=encoder_ids, decoder_task_ids=decoder_ids)
    assert isinstance(out, HeadSelSeq2SeqLMOutput)
    expected = expected_batch_kl(model, encoder_ids, decoder_ids, labels)
    torch.testing.assert_close(out.head_selection_kl, expected)
    # the weighting matters: a plain mean over examples differs
    assert expected.item() > 0
    unweighted = expected_batch_kl(model, encoder_ids, decoder_ids, torch.zeros_like(labels))
    assert not torch.allclose(expected, unweighted)


def test_batch_kl_is_reported_at_weight_zero_and_needs_labels(family):
    model = family.model()
    assert model.config.head_selection_kl_weight == 0.0
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    out = model(**family.inputs(), labels=family.labels(), **ids)
    assert out.head_selection_kl is not None and out.head_selection_kl.item() > 0
    no_labels = model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    assert no_labels.head_selection_kl is None
    assert no_labels.loss is None


@pytest.mark.parametrize(
    "overrides",
    [
        dict(head_selection_strategy="task_specific"),
        dict(total_encoder_attention_heads=HEADS, total_decoder_attention_heads=HEADS),
    ],
    ids=["task_specific", "no-selection"],
)
def test_batch_kl_is_zero_without_learned_selection(family, overrides):
    model = family.model(head_selection_kl_weight=1.0, **overrides)
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    out = model(**family.inputs(), labels=family.labels(), **ids)
    assert out.head_selection_kl is None or out.head_selection_kl.item() == 0.0
    reference = family.model(**overrides)  # weight 0: same parameters (same seed)
    torch.testing.assert_close(out.loss, reference(**family.inputs(), labels=family.labels(), **ids).loss)


def test_loss_is_cross_entropy_plus_weighted_kl(family):
    weight = 0.7
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    labels = family.labels()
    without = family.model(head_selection_kl_weight=0.0)
    with_kl = family.model(head_selection_kl_weight=weight)  # same seed: same parameters
    with torch.no_grad():
        out0 = without(**family.inputs(), labels=labels, **ids)
        out1 = with_kl(**family.inputs(), labels=labels, **ids)
    cross_entropy = F.cross_entropy(out0.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(out0.loss, cross_entropy)
    torch.testing.assert_close(out1.logits, out0.logits)
    torch.testing.assert_close(out1.head_selection_kl, out0.head_selection_kl)
    assert out0.head_selection_kl.item() > 0
    torch.testing.assert_close(out1.loss, cross_entropy + weight * out0.head_selection_kl)


def test_kl_term_trains_logits(family):
    """With a KL weight the loss gradient reaches every logit of the tasks present (the KL touches all candidates),
    and none of the absent tasks'."""
    model = family.model(head_selection_kl_weight=1.0)
    model.train()
    ids = dict(encoder_task_ids=torch.tensor([1, 1, 1, 1]), decoder_task_ids=torch.tensor([0, 2, 0, 2]))
    model(**family.inputs(), labels=family.labels(), **ids).loss.backward()
    enc = model.head_selection["encoder_self"].logits.grad
    dec = model.head_selection["decoder_self"].logits.grad
    assert (enc[1] != 0).all() and (enc[0] == 0).all()
    assert (dec[0] != 0).all() and (dec[2] != 0).all() and (dec[1] == 0).all()


# ---------------------------------------------------------------------------------------------------------------
# Init
# ---------------------------------------------------------------------------------------------------------------


def test_logits_are_initialised_uniformly_in_log_range(family):
    model = family.model(head_selection_components=ALL_COMPONENTS, head_selection_strategy="subset")
    low, high = math.log(0.01), 0.0
    for component, selector in model.head_selection.items():
        logits = selector.logits.detach()
        assert logits.shape == (model.config.num_tasks(component), LAYERS, 2 * HEADS)
        assert logits.min().item() >= low and logits.max().item() <= high
        assert logits.std().item() > 0.5  # spread over the range, not a constant (U(-4.6, 0) has std 1.33)


def test_logits_are_the_only_added_parameters(family):
    model = family.model(head_selection_components=ALL_COMPONENTS)
    stock = family.stock_model()
    added = set(dict(model.named_parameters())) - set(dict(stock.named_parameters()))
    assert added == {f"head_selection.{c}.logits" for c in ALL_COMPONENTS}
    assert set(dict(stock.named_parameters())) <= set(dict(model.named_parameters()))


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_gates_made_per_layer_equal_the_stacked_gates_with_their_gradients(strategy):
    """The draw for gradient checkpointing (gates made by each layer from phi and the one noise draw) gives the heads,
    gate values and phi gradients of the stacked draw, and links no two layers in one autograd graph."""
    selector = HeadSelector(strategy, num_tasks=3, num_layers=3, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.normal_()
    weights = torch.randn(3, 4)
    results = []
    for per_layer in (False, True):
        torch.manual_seed(5)
        draw = selector.draw(sample=True, temperature=2.0, gates_per_layer=per_layer)
        assert (draw.gates is None) == per_layer
        layers = [draw.layer(layer) for layer in range(3)]
        if per_layer:  # one backward per layer, as reentrant checkpointing runs them: no graph is shared
            for _, gates in layers:
                (gates * weights).sum().backward()
        else:
            sum((gates * weights).sum() for _, gates in layers).backward()
        results.append((draw.heads, [gates.detach() for _, gates in layers], selector.logits.grad.clone()))
        selector.logits.grad = None
    (heads, gates, grad), (layer_heads, layer_gates, layer_grad) = results
    torch.testing.assert_close(layer_heads, heads)
    for a, b in zip(layer_gates, gates):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(layer_grad, grad)
    assert grad.abs().sum() > 0
