"""Routing (`hf_headsel/routing.py`), for both families: omitted ids and default tasks, validation of ids, the
route of a mixed batch, `from_pretrained(..., task=...)` / `set_default_task`, the cross-attention task keys and
task ids given as lists or names (DESIGN.md section 3)."""

from __future__ import annotations

import itertools

import pytest
import torch

from hf_headsel.compat import CACHE_KWARG, GENERATION_ENCODER_PASS

from conftest import (
    ALL_COMPONENTS,
    DECODER_IDS,
    DECODER_TASKS,
    ENCODER_IDS,
    ENCODER_TASKS,
    HEADS,
    MIXED,
    extract_stock_model,
    forward_logits,
    mixed_model,
    pad_to,
    randomize_selector_logits,
    selecting_attentions,
    step_scores,
    take,
)

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
@pytest.mark.parametrize("form", ["tensor", "int"])  # an int routes the whole batch without a tensor
def test_out_of_range_ids_raise_naming_the_tasks(family, side, bad_id, form):
    tasks = ENCODER_TASKS if side == "encoder" else DECODER_TASKS
    if bad_id == 3 and side == "encoder":
        bad_id = len(ENCODER_TASKS)
    model = family.model(head_selection_components=ALL_COMPONENTS)
    ids = dict(MIXED)
    ids[f"{side}_task_ids"] = torch.tensor([0, bad_id, 0, 0]) if form == "tensor" else bad_id
    with pytest.raises(ValueError, match=str(bad_id)) as error:
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    assert all(task in str(error.value) for task in tasks)


def test_a_call_without_any_input_says_what_routes_the_batch(family):
    """Routing needs the batch size: with no input, encoder outputs or decoder inputs, the error says so."""
    model = family.model()
    with pytest.raises(ValueError, match="cannot infer the batch size: pass the model inputs, encoder_outputs or "
                                         "decoder inputs"):
        model()


def test_task_route_takes_tasks_lying_side_by_side_as_slices():
    from hf_headsel.routing import TaskRoute

    ids = torch.tensor([2, 2, 0, 1, 1, 1])
    route = TaskRoute.build(ids)
    assert route.tasks == (2, 0, 1) and route.sizes == (2, 1, 3) and not route.interleaved
    assert route.task_index.tolist() == [2, 0, 1]
    states = torch.arange(6.0)[:, None]
    torch.testing.assert_close(route.per_task(states, lambda task, rows: rows * 10 + task), states * 10 + ids[:, None])
    assert TaskRoute.build(torch.tensor([1, 0, 1])).interleaved  # task 1 in two places: gathered


def test_task_route_lays_a_mixed_batch_out_task_by_task():
    from hf_headsel.routing import TaskRoute

    ids = torch.tensor([2, 0, 2, 1, 0, 2])
    route = TaskRoute.build(ids)
    assert route.tasks == (0, 1, 2) and route.sizes == (2, 1, 3) and route.single_task is None
    assert ids[route.order].tolist() == [0, 0, 1, 2, 2, 2]
    assert route.order[route.inverse].tolist() == list(range(6))
    states = torch.arange(6.0)[:, None]
    applied = route.per_task(states, lambda task, rows: rows * 10 + task)
    torch.testing.assert_close(applied, states * 10 + ids[:, None].float())
    single = TaskRoute.single(3, batch_size=2, device=torch.device("cpu"))
    assert single.single_task == 3 and single.ids.tolist() == [3, 3] and single.order is None


@pytest.mark.parametrize(
    "ids, blocks",
    [
        ([2, 0, 2, 1, 0, 2], [[1, 4, 1], [3, 3, 3], [0, 2, 5]]),  # interleaved, unequal: padded with the first example
        ([2, 2, 0, 0, 1, 1], None),  # side by side, equal: the batch is the blocks
        ([2, 2, 0, 1, 1, 1], [[0, 1, 0], [2, 2, 2], [3, 4, 5]]),  # side by side, unequal: blocks in batch order
    ],
)
def test_task_blocks_lay_a_mixed_batch_out_one_block_per_task(ids, blocks):
    from hf_headsel.routing import TaskRoute

    route = TaskRoute.build(torch.tensor(ids))
    slots, positions, width = route.task_blocks
    assert route.task_blocks[0] is slots  # built once per route
    if blocks is None:
        assert slots is None and positions is None and width == 2
        return
    assert width == 3 and slots.view(len(route.tasks), width).tolist() == blocks
    assert [[ids[i] for i in block] for block in blocks] == [[task] * width for task in route.tasks]
    assert slots[positions].tolist() == list(range(len(ids)))  # every example taken back from its own slot


@pytest.mark.parametrize("ids", [[2, 0, 2, 1, 0, 2], [2, 2, 0, 0, 1, 1], [2, 2, 0, 1, 1, 1]])
def test_by_blocks_hands_each_block_its_tasks_examples_and_puts_the_result_back_in_batch_order(ids):
    from hf_headsel.routing import TaskRoute

    route = TaskRoute.build(torch.tensor(ids))
    states = torch.arange(len(ids) * 2 * 3, dtype=torch.float).view(len(ids), 2, 3)  # [batch, time, features]
    seen = []

    def per_block(blocks):  # each block's own task added as a new last feature
        seen.append(blocks.shape)
        task = torch.tensor(route.tasks, dtype=blocks.dtype)[:, None, None].expand(*blocks.shape[:2], 1)
        return torch.cat([blocks, task], dim=-1)

    out = route.by_blocks(states, per_block)
    assert seen == [(len(route.tasks), route.task_blocks[2] * 2, 3)]
    assert torch.equal(out[..., :3], states) and out[..., 3].tolist() == [[task] * 2 for task in ids]


def test_an_id_tensor_is_routed_once_within_generate_until_it_changes(family):
    model = family.model(head_selection_components=ALL_COMPONENTS).eval()
    # outside generate every call routes afresh: a write no version counter sees (through `.data`, or a numpy array
    # sharing the tensor's memory) is followed (a memo kept across calls routed by the old ids)
    shared = torch.tensor([0, 2, 1, 2])
    model.task_routes(ENCODER_IDS, shared, 4, shared.device)
    shared.data[1] = 1
    route = model.task_routes(ENCODER_IDS, shared, 4, shared.device).decoder
    assert (route.host_ids, route.sizes) == ((0, 1, 1, 2), (1, 2, 1))  # the route's own reading, not the tensor
    # generate passes the same id tensor at every step: within the call its route is remembered, but an in-place
    # change (even to an invalid id) is seen
    model.__dict__["_generation_memo"] = {}  # as `generate` sets it
    ids = torch.tensor([0, 2, 1, 2])
    first = model.task_routes(ENCODER_IDS, ids, 4, ids.device).decoder
    assert model.task_routes(ENCODER_IDS, ids, 4, ids.device).decoder is first
    assert model.task_routes(ENCODER_IDS, ids.clone(), 4, ids.device).decoder is not first
    ids[1] = 1
    assert model.task_routes(ENCODER_IDS, ids, 4, ids.device).decoder.ids.tolist() == [0, 1, 1, 2]
    ids[1] = len(DECODER_TASKS)
    with pytest.raises(ValueError, match="out of range"):
        model.task_routes(ENCODER_IDS, ids, 4, ids.device)


@pytest.mark.parametrize("projection", ["auto", "gathered", "grouped", "batched"])
def test_generate_under_inference_mode_routes_like_no_grad_and_sees_ids_rewritten_between_calls(
        family, projection, projection_mode):
    """`torch.inference_mode()` (serving): ids made there have no version counter, so their routes are remembered
    for one `generate` call only; rewritten in place before the next call, the next call follows them."""
    projection_mode(projection)
    model = mixed_model(family, "group")
    rewritten = torch.tensor([2, 2, 0, 0])
    with torch.no_grad():
        expected = [step_scores(model, family, ENCODER_IDS, ids) for ids in (DECODER_IDS, rewritten)]
    assert not torch.equal(*expected)  # the tasks make a difference: the test can fail
    with torch.inference_mode():
        decoder_ids, encoder_ids = DECODER_IDS.clone(), ENCODER_IDS.clone()
        first = step_scores(model, family, encoder_ids, decoder_ids)
        decoder_ids.copy_(rewritten)
        second = step_scores(model, family, encoder_ids, decoder_ids)
    torch.testing.assert_close(first, expected[0])
    torch.testing.assert_close(second, expected[1])


def test_a_model_made_under_inference_mode_generates_what_it_does_outside(family):
    """Its parameters are inference tensors, without version counters: the evaluation caches keep nothing of them."""
    model = mixed_model(family, "group")
    with torch.no_grad():
        expected = step_scores(model, family, ENCODER_IDS, DECODER_IDS)
    with torch.inference_mode():
        clone = family.model(config=model.config).eval()
        clone.load_state_dict(model.state_dict())
        assert all(p.is_inference() for p in clone.parameters())
        for _ in range(2):  # the second call would reuse whatever the first kept
            torch.testing.assert_close(step_scores(clone, family, ENCODER_IDS, DECODER_IDS), expected)


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


@pytest.mark.parametrize("side", ["encoder", "decoder"])
@pytest.mark.parametrize("bad_ids", [True, torch.tensor(1.0)], ids=["bool", "float-scalar"])
def test_a_bool_or_a_float_scalar_is_not_a_task_id(family, side, bad_ids):
    # True is an int to Python: it would have routed every example to task 1
    model = family.model(head_selection_components=ALL_COMPONENTS)
    ids = {**MIXED, f"{side}_task_ids": bad_ids}
    with pytest.raises(ValueError, match=f"{side}_task_ids must hold integer task indices"):
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
    with pytest.raises(ValueError, match=f"{side}_task_ids must hold integer task indices"):
        model.generate(**family.inputs(), **ids, max_new_tokens=3)


@pytest.mark.parametrize("keyword", ["decoder_task_id", "task_ids"])
def test_a_misspelled_task_keyword_is_refused_not_ignored(family, keyword):
    # the stock forward passes unknown keywords on unread: the batch would run on the default task
    model = mixed_model(family, "group", default_encoder_task="de", default_decoder_task="it")
    base = family.base_model_class(model.config).eval()
    for forward in (model, base):
        with pytest.raises(ValueError, match=f"unknown keyword arguments \\['{keyword}'\\]"):
            forward(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **{keyword: DECODER_IDS})


def test_a_default_task_set_by_assignment_is_checked_when_used(family):
    model = mixed_model(family, "group")
    model.config.default_decoder_task = "xx"  # no config check runs on assignment
    with pytest.raises(ValueError, match="unknown decoder task 'xx'"):
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), encoder_task_ids=ENCODER_IDS)


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


@pytest.mark.parametrize("training", [True, False])
def test_a_pair_keyed_route_is_built_once_per_forward_pass(family, monkeypatch, training):
    """The pair-keyed route of a mixed batch (a host read of the ids) is built once per routing of a forward pass,
    not once per cross-attention layer."""
    from hf_headsel import routing

    model = mixed_model(family, "group", head_selection_components=list(ALL_COMPONENTS),
                        cross_attention_task_key="pair").train(training)
    built = []
    original = routing.keyed_route

    def counting(config, sides, routes):
        if len(sides) == 2:
            built.append((id(routes["encoder"]), id(routes["decoder"])))
        return original(config, sides, routes)

    monkeypatch.setattr(routing, "keyed_route", counting)
    with torch.set_grad_enabled(training):
        model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
    assert model.config.decoder_layers > 1 and built
    assert len(built) == len(set(built)), built


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


def test_task_names_one_per_example_equal_their_ids(family):
    model = mixed_model(family, "group")
    names = dict(encoder_task_ids=[ENCODER_TASKS[i] for i in ENCODER_IDS.tolist()],
                 decoder_task_ids=tuple(DECODER_TASKS[i] for i in DECODER_IDS.tolist()))
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    torch.testing.assert_close(forward_logits(model, inputs, decoder_input_ids, **names),
                               forward_logits(model, inputs, decoder_input_ids, **MIXED))
    kwargs = dict(num_beams=3, max_new_tokens=5)
    torch.testing.assert_close(model.generate(**inputs, **names, **kwargs), model.generate(**inputs, **MIXED, **kwargs))
    names["decoder_task_ids"] = ["xx"] + list(names["decoder_task_ids"][1:])
    for call in (lambda: model(**inputs, decoder_input_ids=decoder_input_ids, **names),
                 lambda: model.generate(**inputs, **names, **kwargs)):
        with pytest.raises(ValueError, match="unknown decoder task 'xx'"):
            call()


def test_one_task_by_name_or_int_equals_its_id_tensor(family):
    model = mixed_model(family, "group")
    batch = family.inputs()["attention_mask"].shape[0]
    encoder, decoder = ENCODER_TASKS[1], DECODER_TASKS[2]
    as_tensors = dict(encoder_task_ids=torch.full((batch,), 1), decoder_task_ids=torch.full((batch,), 2))
    for ids in (dict(encoder_task_ids=encoder, decoder_task_ids=decoder), dict(encoder_task_ids=1, decoder_task_ids=2),
                dict(encoder_task_ids=torch.tensor(1), decoder_task_ids=torch.tensor(2))):  # 0-dimensional: one id
        torch.testing.assert_close(forward_logits(model, family.inputs(), family.decoder_input_ids(), **ids),
                                   forward_logits(model, family.inputs(), family.decoder_input_ids(), **as_tensors))
        kwargs = dict(num_beams=3, max_new_tokens=5)
        torch.testing.assert_close(model.generate(**family.inputs(), **ids, **kwargs),
                                   model.generate(**family.inputs(), **as_tensors, **kwargs))


def test_layers_get_one_routing_keyword_with_the_routes_and_draws(family):
    """The model hands its layers one `Routing` (both sides' routes and, in training, the draws) under one keyword;
    the public keywords never carry anything but raw ids."""
    from hf_headsel.routing import ROUTING_KWARG, Routing

    model = family.model(head_selection_components=ALL_COMPONENTS)
    model.group_mixed_batches = False  # the batch as given (grouping: see the tests below)
    seen = []
    attention = selecting_attentions(model)[0][2]
    attention.register_forward_pre_hook(lambda module, args, kwargs: seen.append(dict(kwargs)), with_kwargs=True)
    for training in (True, False):
        model.train(training)
        seen.clear()
        with torch.set_grad_enabled(training):
            model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
        (kwargs,) = seen
        routing = kwargs[ROUTING_KWARG]
        assert isinstance(routing, Routing)
        assert not {"encoder_task_ids", "decoder_task_ids", "head_selection_draws"} & set(kwargs)
        assert routing.encoder.ids.tolist() == ENCODER_IDS.tolist()
        assert routing.decoder.ids.tolist() == DECODER_IDS.tolist()
        assert (routing.draws is not None) == training
        if training:
            assert set(routing.draws) == set(ALL_COMPONENTS)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generate_validates_each_id_tensor_once_not_per_layer(family, monkeypatch, num_beams):
    """`generate`'s encoder pass routes the encoder ids once for all its layers (each validation of an id tensor is
    a host synchronisation); the decoding steps reuse the routes of the first step. Beam search expands the ids once,
    which is routed once more. The output is the same as routing every layer by itself."""
    from transformers import GenerationMixin

    from hf_headsel import routing

    model = mixed_model(family, "group", head_selection_components=list(ALL_COMPONENTS)).eval()
    kwargs = dict(**family.inputs(), **MIXED, num_beams=num_beams, max_new_tokens=4)
    validated = []
    original = routing.task_route

    def counting(config, side, task_ids, *args):
        validated.append((side, tuple(task_ids.shape) if isinstance(task_ids, torch.Tensor) else task_ids))
        return original(config, side, task_ids, *args)

    monkeypatch.setattr(routing, "task_route", counting)
    monkeypatch.setattr("hf_headsel.modeling_head_selection.task_route", counting)
    generated = model.generate(**kwargs)
    batch, expanded = len(ENCODER_IDS), len(ENCODER_IDS) * num_beams
    steps = [("decoder", (batch,))] if num_beams == 1 else [("encoder", (expanded,)), ("decoder", (expanded,))]
    assert validated == [("encoder", (batch,)), *steps]
    # the stock encoder pass (raw ids, validated in every layer) generates the same
    monkeypatch.setattr(type(model), GENERATION_ENCODER_PASS, getattr(GenerationMixin, GENERATION_ENCODER_PASS))
    validated.clear()
    torch.testing.assert_close(model.generate(**kwargs), generated)
    layers = sum(1 for component, _, _ in selecting_attentions(model) if component == "encoder_self")
    assert validated == [("encoder", (batch,))] * layers + [("encoder", (expanded,)), ("decoder", (expanded,))]


def routing_seen_by_a_layer(family):
    """The `Routing` the first selecting attention layer gets in a forward pass of the `MIXED` batch."""
    from hf_headsel.routing import ROUTING_KWARG

    model = family.model(head_selection_components=ALL_COMPONENTS)
    seen = []
    attention = selecting_attentions(model)[0][2]
    attention.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs[ROUTING_KWARG]),
                                        with_kwargs=True)
    model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
    (routing,) = seen
    return routing


def test_a_mixed_batch_is_grouped_by_task_for_the_layers(family):
    """A full forward pass of an interleaved batch hands the layers the batch grouped by decoder task, then encoder
    task: no layer gathers or scatters rows for a side whose tasks then lie side by side."""
    routing = routing_seen_by_a_layer(family)
    order = sorted(range(4), key=lambda i: (DECODER_IDS[i].item(), ENCODER_IDS[i].item()))
    assert routing.decoder.ids.tolist() == DECODER_IDS[order].tolist() == [0, 1, 2, 2]
    assert routing.encoder.ids.tolist() == ENCODER_IDS[order].tolist()
    assert not routing.decoder.interleaved and routing.decoder.tasks == (0, 1, 2)


def test_a_mixed_batch_is_left_as_it_is_where_every_layer_gathers(family, monkeypatch):
    """Layers that gather each example's heads (`"gathered"`, the CUDA default) gain nothing from grouping."""
    from hf_headsel.attention import HeadSelectionAttentionMixin

    monkeypatch.setattr(HeadSelectionAttentionMixin, "mixed_batch_projection", "gathered")
    assert routing_seen_by_a_layer(family).decoder.ids.tolist() == DECODER_IDS.tolist()


@pytest.mark.parametrize("training", [True, False])
def test_grouping_a_mixed_batch_changes_no_output(family, training):
    """Every output (loss, KL, logits, hidden states, attentions, encoder outputs, cache) and every gradient is the
    batch's own, in its own order, with grouping on or off."""
    results = {}
    for grouping in (True, False):
        model = family.model(head_selection_components=ALL_COMPONENTS, dropout=0.0, attn_implementation="eager")
        model.group_mixed_batches = grouping
        model.train(training)
        labels = family.decoder_input_ids().clone()
        with torch.set_grad_enabled(training):
            outputs = model(**family.inputs(), labels=labels, output_hidden_states=True, output_attentions=True,
                            use_cache=not training, **MIXED)
            if training:
                outputs.loss.backward()
                outputs["grads"] = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            else:  # labels turn the cache off: a forward without them returns one
                outputs["cache"] = model(**family.inputs(), decoder_input_ids=labels, use_cache=True,
                                         **MIXED)[CACHE_KWARG]
        results[grouping] = outputs
    grouped, given = results[True], results[False]
    assert set(grouped.keys()) == set(given.keys())
    for key in given.keys():
        if key in ("cache", CACHE_KWARG):
            for part in ("self_attention_cache", "cross_attention_cache"):
                layers = zip(getattr(grouped[key], part).layers, getattr(given[key], part).layers, strict=True)
                for layer_grouped, layer_given in layers:
                    torch.testing.assert_close(layer_grouped.keys, layer_given.keys)
                    torch.testing.assert_close(layer_grouped.values, layer_given.values)
            continue
        torch.testing.assert_close(grouped[key], given[key], msg=key)
