"""Selection (`hf_headsel/selection.py`): the head choice of every strategy, Gumbel-sigmoid sampling and the
straight-through gates, and the closed-form KL of one selector (DESIGN.md section 2)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from conftest import (
    ALL_COMPONENTS,
    MIXED,
    direct_task_kl,
    mixed_model,
)
from hf_headsel import HeadSelector

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


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_noise_scale_zero_trains_on_the_deterministic_choice_and_draws_nothing(strategy):
    """`noise_scale=0`: every training draw is the evaluation choice (argmax phi), no random numbers are drawn, and
    the straight-through gates keep value 1 and the gradient y (1 - y) / tau of y = sigmoid(phi / tau)."""
    selector = HeadSelector(strategy, num_tasks=3, num_layers=2, heads=4, total_heads=8)
    with torch.no_grad():
        selector.logits.normal_()
    rng = torch.get_rng_state()
    draws = [selector.draw(sample=True, temperature=2.0, noise_scale=0.0) for _ in range(3)]
    assert torch.equal(torch.get_rng_state(), rng)
    for draw in draws:
        torch.testing.assert_close(draw.heads, selector.selected_heads())
    assert torch.equal(draws[0].gates, torch.ones_like(draws[0].gates))  # exactly: fl(fl(1 - y) + y) = 1 in [0, 1]
    draws[0].gates.sum().backward()
    y = torch.sigmoid(selector.logits.detach() / 2.0)
    expected = torch.zeros_like(y).scatter_(-1, draws[0].heads, (y * (1 - y) / 2.0).gather(-1, draws[0].heads))
    torch.testing.assert_close(selector.logits.grad, expected)


def test_noise_scale_multiplies_the_gumbel_difference():
    selector = HeadSelector("group", num_tasks=2, num_layers=2, heads=2, total_heads=6)
    noises = []
    for scale in (1.0, 2.5):
        torch.manual_seed(3)
        noises.append(selector.draw(sample=True, temperature=5.0, gates_per_layer=True, noise_scale=scale).noise)
    assert noises[0].abs().sum() > 0
    torch.testing.assert_close(noises[1], 2.5 * noises[0])


def test_noise_is_the_difference_of_two_gumbels_a_standard_logistic():
    # g1 - g2 of independent Gumbel(0, 1) draws is Logistic(0, 1): its CDF is the sigmoid (a single Gumbel's is
    # exp(-exp(-x)), off by up to 0.12)
    selector = HeadSelector("group", num_tasks=1000, num_layers=10, heads=5, total_heads=10)
    torch.manual_seed(0)
    noise = selector.draw(sample=True, temperature=5.0, gates_per_layer=True).noise.flatten().sort().values
    empirical = torch.arange(1, len(noise) + 1) / len(noise)
    assert (empirical - torch.sigmoid(noise)).abs().max() < 0.01  # Kolmogorov-Smirnov, n = 1e5: 0.006 at p = 0.001


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


def test_training_without_noise_computes_what_evaluation_computes(family):
    """`head_selection_noise_scale=0`: a training-mode forward pass (no dropout in the tiny configs) uses the
    evaluation choice and gates of exactly 1, so its logits are evaluation's, bit for bit, in every component."""
    model = family.model(head_selection_components=ALL_COMPONENTS, head_selection_noise_scale=0.0)
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.normal_()
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    model.train()
    trained = model(**inputs, decoder_input_ids=decoder_input_ids, **ids)
    trained.logits.sum().backward()
    assert all(selector.logits.grad.abs().sum() > 0 for selector in model.head_selection.values())
    model.eval()
    with torch.no_grad():
        evaluated = model(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits
    assert torch.equal(trained.logits.detach(), evaluated)


def test_an_encoder_called_alone_draws_by_the_models_rule(family):
    """Without the model's draw (the encoder called on its own, as `generate` and users call it) each layer draws by
    the same rule: in evaluation with autograd on, the deterministic choice (what `no_grad` and the whole model
    give); in training, the configured temperature (the same gradient to `phi` as through the whole model)."""
    model = family.model(head_selection_components=["encoder_self"], head_selection_temperature=0.5)
    selector = model.head_selection["encoder_self"]
    with torch.no_grad():
        selector.logits.normal_()
    inputs, ids = family.inputs(), torch.tensor([0, 1, 1, 0])
    encoder = model.get_encoder()
    alone = encoder(**inputs, encoder_task_ids=ids).last_hidden_state
    assert torch.equal(encoder(**inputs, encoder_task_ids=ids).last_hidden_state, alone)
    with torch.no_grad():
        assert torch.equal(encoder(**inputs, encoder_task_ids=ids).last_hidden_state, alone)
        whole = model(**inputs, decoder_input_ids=family.decoder_input_ids(), encoder_task_ids=ids,
                      decoder_task_ids=ids)
    torch.testing.assert_close(whole.encoder_last_hidden_state, alone.detach(), rtol=0, atol=0)

    model.config.head_selection_noise_scale = 0.0  # the same gates in both passes
    model.train()
    gradients = []
    for forward in (lambda: encoder(**inputs, encoder_task_ids=ids).last_hidden_state,
                    lambda: model(**inputs, decoder_input_ids=family.decoder_input_ids(), encoder_task_ids=ids,
                                  decoder_task_ids=ids).encoder_last_hidden_state):
        selector.logits.grad = None
        (forward() ** 2).sum().backward()
        gradients.append(selector.logits.grad.clone())
    assert gradients[0].abs().sum() > 0
    torch.testing.assert_close(gradients[0], gradients[1])


# ---------------------------------------------------------------------------------------------------------------
# KL of one selector
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Gates made per layer (gradient checkpointing)
# ---------------------------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("strategy", ["group", "subset", "task_specific"])
def test_a_model_offloaded_by_accelerate_computes_what_it_computes_loaded(family, strategy):
    """accelerate's offloading keeps every weight on the meta device but inside its module's forward: the layers
    take `phi` through the selector's forward (`draw`), so an offloaded model gives the loaded model's logits and
    tokens; `phi` read outside it is refused with the rule rather than computed on."""
    accelerate = pytest.importorskip("accelerate")
    inputs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
    model = mixed_model(family, strategy)
    with torch.no_grad():
        expected = model(**inputs).logits
        generated = model.generate(**family.inputs(), **MIXED, max_new_tokens=3, min_new_tokens=3)
        selected = model.selected_heads()
        offloaded = accelerate.cpu_offload(model, execution_device="cpu")
        torch.testing.assert_close(offloaded(**inputs).logits, expected)
        assert torch.equal(offloaded.generate(**family.inputs(), **MIXED, max_new_tokens=3, min_new_tokens=3),
                           generated)
        for component, heads in offloaded.selected_heads().items():
            assert torch.equal(heads, selected[component])
    selector = next(iter(offloaded.head_selection.values()))
    if selector.learned:
        with pytest.raises(ValueError, match="on the meta device .* outside the selector's forward"):
            selector.task_kl()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_model_built_from_its_config_in_half_precision_keeps_the_selection_logits_in_float32(family, dtype):
    # `from_config(..., dtype=)` builds under that default dtype; `_keep_in_fp32_modules_strict` promises float32 for
    # phi, as `from_pretrained(..., dtype=)` gives (below), whichever way the model is made
    config = family.config(head_selection_components=ALL_COMPONENTS)
    model = family.auto_model_class.from_config(config, dtype=dtype)
    assert {selector.logits.dtype for selector in model.head_selection.values()} == {torch.float32}
    assert model.model.encoder.layers[0].fc1.weight.dtype == dtype  # the rest is built in the dtype asked for


def test_half_precision_keeps_the_selection_logits_in_float32(family, tmp_path):
    # near-ties of phi rounded to equal values in bfloat16 and changed the heads chosen
    model = family.model()
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.fill_(-3.0)
            selector.logits[..., selector.heads:] = -2.995  # the second member of each group wins, by 0.005
    expected = model.selected_heads()
    assert torch.tensor(-2.995, dtype=torch.bfloat16) == torch.tensor(-3.0, dtype=torch.bfloat16)  # a tie there
    model.save_pretrained(tmp_path / "model")
    loaded = family.model_class.from_pretrained(tmp_path / "model", dtype=torch.bfloat16)
    for half in (loaded, family.model_class.from_pretrained(tmp_path / "model").half(), model.to(torch.bfloat16)):
        assert {selector.logits.dtype for selector in half.head_selection.values()} == {torch.float32}
        assert half.model.encoder.layers[0].fc1.weight.dtype != torch.float32  # the rest is cast
        for component, heads in half.selected_heads().items():
            assert torch.equal(heads, expected[component]), component
