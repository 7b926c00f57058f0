"""The head-selection configuration (`hf_headsel/configuration_head_selection.py`), for both families: defaults,
validation (every invalid combination raises `ValueError` at creation), save / load, and the keyword spec
(DESIGN.md section 4)."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from conftest import (
    ALL_COMPONENTS,
    DECODER_TASKS,
    ENCODER_TASKS,
    HEADS,
)
from hf_headsel import COMPONENTS, STRATEGIES

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
    with pytest.raises(ValueError, match="different task counts .* no total_decoder_attention_heads serves them all"):
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
        (dict(decoder_tasks=["news", "pooled"]), "decoder_tasks names a task 'pooled': the name of the corpus-level"),
        (dict(encoder_tasks=[]), "encoder_tasks"),
        (dict(decoder_tasks=["fr", ""]), "decoder_tasks"),
        (dict(default_encoder_task="fr"), "default_encoder_task"),
        (dict(default_decoder_task="en"), "default_decoder_task"),
        (dict(head_selection_temperature=0.0), "head_selection_temperature"),
        (dict(head_selection_kl_weight=-0.1), "head_selection_kl_weight"),
        (dict(head_selection_noise_scale=-1.0), "head_selection_noise_scale"),
        (dict(encoder_tasks="en"), "encoder_tasks must be a list of strings"),
        (dict(head_selection_components="decoder_self"), "head_selection_components must be a list of strings"),
        (dict(head_selection_strategy=None), "head_selection_strategy must not be None"),
        (dict(cross_attention_task_key=None), "cross_attention_task_key must not be None"),
        (dict(head_selection_temperature=None), "head_selection_temperature must not be None"),
        (dict(head_selection_temperature=float("nan")), "head_selection_temperature must be finite"),
        (dict(head_selection_temperature=float("inf")), "head_selection_temperature must be finite"),
        (dict(head_selection_kl_weight=float("nan")), "head_selection_kl_weight must be finite"),
        (dict(head_selection_temperature="5"), "head_selection_temperature must be a number"),
        (dict(total_encoder_attention_heads=8.0), "total_encoder_attention_heads must be an integer"),
        (dict(task_adapter_dim=True), "task_adapter_dim must be an integer"),
    ],
    ids=[
        "unknown-strategy",
        "unknown-component",
        "duplicate-component",
        "unknown-task-type",
        "unknown-cross-key",
        "duplicate-encoder-task",
        "duplicate-decoder-task",
        "task-named-pooled",
        "empty-task-list",
        "empty-task-name",
        "bad-default-encoder-task",
        "bad-default-decoder-task",
        "zero-temperature",
        "negative-kl-weight",
        "negative-noise-scale",
        "task-list-as-a-string",
        "components-as-a-string",
        "none-strategy",
        "none-cross-key",
        "none-temperature",
        "nan-temperature",
        "infinite-temperature",
        "nan-kl-weight",
        "temperature-as-a-string",
        "float-total-heads",
        "bool-adapter-dim",
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
    "head_selection_noise_scale",
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
        head_selection_noise_scale=0.5,
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


def test_tuples_are_accepted_and_stored_as_lists(family):
    config = family.config(decoder_tasks=tuple(DECODER_TASKS), head_selection_components=("decoder_self",))
    assert config.decoder_tasks == list(DECODER_TASKS) and config.head_selection_components == ["decoder_self"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(head_selection_strategy="bogus"), "head_selection_strategy must be one of"),
        (dict(head_selection_temperature=-1.0), "head_selection_temperature must be > 0"),
        (dict(head_selection_noise_scale=float("nan")), "head_selection_noise_scale must be finite"),
        (dict(default_decoder_task="xx"), "default_decoder_task='xx' is not one of"),
    ],
)
def test_keywords_given_to_from_pretrained_are_checked(family, tmp_path, overrides, message):
    # the stock `from_dict` sets them on the config after its `__post_init__` ran
    family.config().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=message):
        family.config_class.from_pretrained(tmp_path, **overrides)
    config, unused = family.config_class.from_pretrained(tmp_path, head_selection_temperature=2.0, unknown_keyword=1,
                                                         return_unused_kwargs=True)
    assert config.head_selection_temperature == 2.0 and unused == {"unknown_keyword": 1}


@pytest.mark.parametrize("overrides", [dict(tasks=["de", "fr"]), dict(heads=4), dict(total_heads=8)])
def test_a_keyword_named_like_a_config_method_is_refused(family, tmp_path, overrides):
    # a stock config keeps unknown keywords as attributes: this one would hide the method ("'list' object is not
    # callable" when the model is built)
    message = rf"\['{next(iter(overrides))}'\] name methods of head-selection configs, not keywords"
    with pytest.raises(ValueError, match=message):
        family.config(**overrides)
    family.config().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=message):  # the stock `from_dict` sets a keyword naming an attribute
        family.config_class.from_pretrained(tmp_path, **overrides)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, **overrides}))
    with pytest.raises(ValueError, match=message):
        family.config_class.from_pretrained(tmp_path)


def test_config_load_validates(family, tmp_path):
    family.config().save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    saved = json.loads(path.read_text())
    saved["head_selection_strategy"] = "bogus"
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="head_selection_strategy"):
        family.config_class.from_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# The keyword spec, the routing key and the attention paths
# ---------------------------------------------------------------------------------------------------------------


def test_keyword_spec_lists_every_keyword_once_with_help_role_and_type():
    import dataclasses
    import typing

    from hf_headsel.configuration_head_selection import (
        HEAD_SELECTION_CONFIG_KEYS,
        KEYWORD_ROLES,
        HeadSelectionConfigMixin,
        head_selection_keywords,
    )

    keywords = head_selection_keywords()
    assert tuple(k.name for k in keywords) == HEAD_SELECTION_CONFIG_KEYS
    assert HEAD_SELECTION_CONFIG_KEYS == tuple(f.name for f in dataclasses.fields(HeadSelectionConfigMixin))
    assert set(HEADSEL_KEYS) <= set(HEAD_SELECTION_CONFIG_KEYS)
    for keyword in keywords:
        assert keyword.help and keyword.role in KEYWORD_ROLES, keyword
        assert not isinstance(keyword.type, str), keyword  # resolved, usable by HfArgumentParser
    by_name = {k.name: k for k in keywords}
    assert by_name["head_selection_strategy"].choices == STRATEGIES
    assert by_name["head_selection_components"].choices == COMPONENTS
    assert by_name["head_selection_temperature"].default == 5.0
    assert typing.get_args(by_name["encoder_tasks"].type) == (list[str], type(None))
    assert [k.name for k in head_selection_keywords("tasks")] == ["encoder_tasks", "decoder_tasks"]
    assert [k.name for k in head_selection_keywords("runtime")] == [
        "head_selection_temperature", "head_selection_noise_scale", "head_selection_kl_weight"]
    assert [k.name for k in head_selection_keywords("default")] == ["default_encoder_task", "default_decoder_task"]
    assert {k.name for k in head_selection_keywords("structure")} == {
        "task_type", "head_selection_strategy", "head_selection_components", "total_encoder_attention_heads",
        "total_decoder_attention_heads", "cross_attention_task_key", "task_adapter_dim", "task_adapter_key"}
    with pytest.raises(ValueError, match="unknown keyword roles"):
        head_selection_keywords("structural")


@pytest.mark.parametrize("overrides, message", [
    (dict(task_adapter_key="layer"), "task_adapter_key"),
    (dict(task_adapter_dim=-1), "task_adapter_dim"),
])
def test_keyword_rules_of_the_spec_are_checked(family, overrides, message):
    with pytest.raises(ValueError, match=message):
        family.config(**overrides)


def test_routing_key_numbers_pairs_encoder_major(family):
    config = family.config()
    assert config.routing_key(("decoder",), {"encoder": 1, "decoder": 2}) == 2
    assert config.routing_key(("encoder",), {"encoder": 1, "decoder": 2}) == 1
    pairs = [(e, d) for e in range(len(ENCODER_TASKS)) for d in range(len(DECODER_TASKS))]
    keys = [config.routing_key(("encoder", "decoder"), {"encoder": e, "decoder": d}) for e, d in pairs]
    assert keys == list(range(config.num_keys(("encoder", "decoder"))))
    ids = config.routing_key(("encoder", "decoder"), {"encoder": torch.tensor([0, 1]), "decoder": torch.tensor([2, 0])})
    assert ids.tolist() == [2, len(DECODER_TASKS)]


def test_attention_path_names_the_stock_attention_modules(family):
    from hf_headsel.configuration_head_selection import attention_path

    model = family.model(head_selection_components=ALL_COMPONENTS)
    expected = {"encoder_self": "encoder.layers.1.self_attn", "decoder_self": "decoder.layers.1.self_attn",
                "decoder_cross": "decoder.layers.1.encoder_attn"}
    for component, path in expected.items():
        assert attention_path(component, 1) == path
        assert model.base_model.get_submodule(path).component == component


def test_a_config_edited_after_it_was_made_is_checked_when_a_model_is_built(family):
    # the model was built, then failed at its first forward with an unflatten error naming no rule
    config = family.model().config
    config.total_decoder_attention_heads = 6
    with pytest.raises(ValueError, match="group strategy needs total_decoder_attention_heads=6 to be a multiple"):
        family.model_class(config)


@pytest.mark.parametrize("keyword, value", [("head_selection_temperature", 0.0), ("head_selection_temperature", -1.0),
                                            ("head_selection_noise_scale", -0.5)])
def test_a_sampling_setting_changed_at_run_time_is_checked_in_training(family, keyword, value):
    # -1 inverted the choice and trained silently
    model = family.model().train()
    setattr(model.config, keyword, value)
    with pytest.raises(ValueError, match="head_selection_temperature must be > 0 and head_selection_noise_scale >= 0"):
        model(**family.inputs(), labels=family.labels(), encoder_task_ids=[0, 1, 1, 0], decoder_task_ids=[0, 2, 1, 2])
