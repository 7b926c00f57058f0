"""The shared model mixins (`hf_headsel/modeling_head_selection.py`), for both families: the token-weighted batch
KL, the loss, the initialisation of the selector logits (DESIGN.md section 2), and loading with config keywords."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import (
    ALL_COMPONENTS,
    DECODER_IDS,
    DECODER_TASKS,
    ENCODER_IDS,
    HEADS,
    LAYERS,
    component_task,
    direct_task_kl,
    forward_logits,
    randomize_selector_logits,
)
from hf_headsel import HeadSelSeq2SeqLMOutput

# ---------------------------------------------------------------------------------------------------------------
# Batch KL and loss
# ---------------------------------------------------------------------------------------------------------------


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
    # no target token at all: the examples weigh equally (not 0 / 0, a NaN loss at any KL weight)
    silent = model(**family.inputs(), labels=torch.full_like(labels, -100), encoder_task_ids=encoder_ids,
                   decoder_task_ids=decoder_ids)  # fmt: skip
    torch.testing.assert_close(silent.head_selection_kl, unweighted)


def test_unequal_encoder_and_decoder_depths_select_per_side(family):
    # each component's selector has its own side's layers (every other test uses equal depths)
    model = family.model(head_selection_components=ALL_COMPONENTS, encoder_layers=3, decoder_layers=1)
    config = model.config
    shapes = {component: tuple(heads.shape) for component, heads in model.selected_heads().items()}
    assert shapes == {
        "encoder_self": (len(config.encoder_tasks), 3, config.encoder_attention_heads),
        "decoder_self": (len(config.decoder_tasks), 1, config.decoder_attention_heads),
        "decoder_cross": (len(config.decoder_tasks), 1, config.decoder_attention_heads),
    }
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    out = model(**family.inputs(), labels=family.labels(), **ids)
    assert torch.isfinite(out.loss) and len(model.generate(**family.inputs(), **ids, max_new_tokens=2)) == 4


def test_batch_kl_is_reported_at_weight_zero_and_needs_labels(family):
    model = family.model()
    assert model.config.head_selection_kl_weight == 0.0
    ids = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 1, 2]))
    out = model(**family.inputs(), labels=family.labels(), **ids)
    assert out.head_selection_kl is not None and out.head_selection_kl.item() > 0
    no_labels = model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    assert no_labels.head_selection_kl is None
    assert no_labels.loss is None


def test_a_training_forward_without_labels_says_that_a_weighted_kl_is_left_out(family, monkeypatch):
    # the KL is computed from the labels: a loss computed outside the model (the stock Trainer's label smoother pops
    # them) had no word of the weighted KL it leaves out; said (once: `warning_once`) where it applies only
    from hf_headsel import modeling_head_selection

    said = []
    monkeypatch.setattr(modeling_head_selection.logger, "warning_once", said.append)
    ids = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    inputs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    weighted = family.model(head_selection_kl_weight=0.5)
    weighted.train()(**inputs)
    assert len(said) == 1 and said[0].startswith("head_selection_kl_weight is 0.5 but this training forward got no "
                                                 "labels") and "label_smoothing_factor 0" in said[0]
    weighted(**family.inputs(), labels=family.labels(), **ids)  # with labels: added to the loss
    weighted.eval()(**inputs)  # evaluation: no loss to complete
    family.model().train()(**inputs)  # weight 0: nothing left out
    assert len(said) == 1


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


# ---------------------------------------------------------------------------------------------------------------
# Loading with config keywords
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [dict(head_selection_strategy="subset"), dict(decoder_tasks=list(reversed(DECODER_TASKS))),
     dict(head_selection_components=["decoder_self"]), dict(cross_attention_task_key="pair")],
    ids=["strategy", "reordered-tasks", "components", "cross-key"],
)
def test_loading_refuses_keywords_that_change_what_the_weights_were_trained_for(family, tmp_path, overrides):
    # each loads without a shape error: the weights would be read for other tasks or another choice rule
    family.model(head_selection_components=ALL_COMPONENTS).save_pretrained(tmp_path)
    name = next(iter(overrides))
    with pytest.raises(ValueError, match=f"from_pretrained\\(\\.\\.\\., {name}=.* would change the trained model"):
        family.model_class.from_pretrained(tmp_path, **overrides)


@pytest.mark.parametrize("through", ["auto-class", "config"])
def test_loading_refuses_a_structure_change_made_in_the_config(family, tmp_path, through):
    # AutoModel...from_pretrained sets the keywords on the config it builds and hands the model class that config
    model = family.model(head_selection_components=ALL_COMPONENTS)
    model.save_pretrained(tmp_path)
    reordered = list(reversed(DECODER_TASKS))
    with pytest.raises(ValueError, match="config=<a config with decoder_tasks=.* would change the trained model"):
        if through == "auto-class":
            family.auto_model_class.from_pretrained(tmp_path, decoder_tasks=reordered)
        else:
            family.model_class.from_pretrained(tmp_path, config=family.config(
                head_selection_components=ALL_COMPONENTS, decoder_tasks=reordered))
    loaded = family.auto_model_class.from_pretrained(tmp_path, head_selection_temperature=2.0)  # runtime: taken
    assert type(loaded) is family.model_class and loaded.config.head_selection_temperature == 2.0
    same = family.model_class.from_pretrained(tmp_path, config=type(model.config).from_pretrained(tmp_path))
    assert all(torch.equal(heads, model.selected_heads()[component])
               for component, heads in same.selected_heads().items())


@pytest.mark.parametrize("through", ["keyword", "auto-class", "config"])
@pytest.mark.parametrize("overrides", [dict(task_adapter_dim=0), dict(task_adapter_dim=16),
                                       dict(task_adapter_key="task")], ids=["dropped", "resized", "rekeyed"])
def test_loading_refuses_to_change_or_drop_trained_adapters(family, tmp_path, overrides, through):
    # task_adapter_dim=0 loaded without an error: the stock loading left the trained adapters out with a mere report
    family.model(task_adapter_dim=8).save_pretrained(tmp_path)
    name = next(iter(overrides))
    with pytest.raises(ValueError, match=f"{name}=.* would change the trained model.* saved with {name}="):
        if through == "keyword":
            family.model_class.from_pretrained(tmp_path, **overrides)
        elif through == "auto-class":
            family.auto_model_class.from_pretrained(tmp_path, **overrides)
        else:
            family.model_class.from_pretrained(tmp_path, config=family.config(**{"task_adapter_dim": 8, **overrides}))
    loaded = family.model_class.from_pretrained(tmp_path, task_adapter_dim=8)  # the saved value: taken
    assert loaded.config.task_adapter_dim == 8


def test_loading_adds_fresh_adapters_to_a_checkpoint_without_them(family, tmp_path):
    model = family.model()
    randomize_selector_logits(model)
    model.save_pretrained(tmp_path)
    loaded = family.model_class.from_pretrained(tmp_path, task_adapter_dim=8, task_adapter_key="task").eval()
    assert loaded.config.task_adapter_dim == 8 and loaded.config.task_adapter_key == "task"
    ids = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    torch.testing.assert_close(forward_logits(loaded, family.inputs(), family.decoder_input_ids(), **ids),
                               forward_logits(model, family.inputs(), family.decoder_input_ids(), **ids))


def test_loading_takes_runtime_keywords_and_the_saved_structure_unchanged(family, tmp_path):
    model = family.model(head_selection_components=ALL_COMPONENTS)
    randomize_selector_logits(model)
    model.save_pretrained(tmp_path)
    loaded = family.model_class.from_pretrained(
        tmp_path, decoder_tasks=tuple(DECODER_TASKS), head_selection_strategy="group", head_selection_temperature=2.0,
        head_selection_noise_scale=0.0, default_decoder_task=DECODER_TASKS[1],
    )
    assert loaded.config.head_selection_temperature == 2.0 and loaded.config.head_selection_noise_scale == 0.0
    assert loaded.config.default_decoder_task == DECODER_TASKS[1]
    assert all(torch.equal(heads, model.selected_heads()[component])
               for component, heads in loaded.selected_heads().items())
    with pytest.raises(ValueError, match="head_selection_temperature must be > 0"):
        family.model_class.from_pretrained(tmp_path, head_selection_temperature=-1.0)
