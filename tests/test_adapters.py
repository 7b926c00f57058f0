"""Per-task bottleneck adapters (`task_adapter_dim`): the adapter baseline of Gong et al. (2021)."""

import copy

import pytest
import torch

from hf_headsel import adapters as adapters_module
from hf_headsel.adapters import TaskAdapters
from hf_headsel.routing import TaskRoute

from conftest import perturb_adapters

NO_SELECTION = dict(head_selection_components=[], total_encoder_attention_heads=4, total_decoder_attention_heads=4)
ENCODER_IDS = torch.tensor([0, 1, 1, 0])
DECODER_IDS = torch.tensor([2, 0, 2, 1])


def _logits(model, family, inputs, rows=slice(None), **ids):
    """Logits of `inputs[rows]` with the matching rows of the family's labels as decoder inputs."""
    inputs = {name: value[rows] for name, value in inputs.items()}
    with torch.no_grad():
        return model(**inputs, labels=family.labels()[rows], **ids).logits


@pytest.mark.parametrize("key", ["direction", "task"])
def test_fresh_adapters_leave_a_loaded_stock_model_unchanged(family, tmp_path, key):
    stock = family.stock_model()
    stock.save_pretrained(tmp_path)
    config = family.config(**NO_SELECTION, task_adapter_dim=8, task_adapter_key=key)
    model, info = family.model_class.from_pretrained(tmp_path, config=config, output_loading_info=True)
    model.eval()
    assert info["missing_keys"] and all(".task_adapter." in k for k in info["missing_keys"])
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    inputs = family.inputs()
    torch.testing.assert_close(
        _logits(model, family, inputs, encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS),
        _logits(stock, family, inputs),
    )


def test_adapter_parameter_shapes_follow_the_key(family):
    by_direction = family.model(**NO_SELECTION, task_adapter_dim=8, task_adapter_key="direction")
    by_task = family.model(**NO_SELECTION, task_adapter_dim=8, task_adapter_key="task")
    directions = len(by_direction.config.encoder_tasks) * len(by_direction.config.decoder_tasks)
    assert by_direction.model.encoder.layers[0].task_adapter.down_weight.shape == (directions, 8, 16)
    assert by_direction.model.decoder.layers[1].task_adapter.up_weight.shape == (directions, 16, 8)
    assert by_task.model.encoder.layers[0].task_adapter.down_weight.shape[0] == 2
    assert by_task.model.decoder.layers[0].task_adapter.down_weight.shape[0] == 3
    assert all(torch.count_nonzero(m.up_weight) == 0 for m in by_task.modules() if isinstance(m, TaskAdapters))
    # and print(model) names them
    assert "tasks=6, hidden_size=16, bottleneck=8" in repr(by_direction.model.encoder.layers[0].task_adapter)


@pytest.mark.parametrize("key", ["direction", "task"])
def test_mixed_batch_equals_each_example_alone(family, key):
    model = family.model(task_adapter_dim=8, task_adapter_key=key)
    perturb_adapters(model)
    inputs = family.inputs()
    mixed = _logits(model, family, inputs, encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    for row in range(len(ENCODER_IDS)):
        rows = slice(row, row + 1)
        one = _logits(model, family, inputs, rows, encoder_task_ids=ENCODER_IDS[rows], decoder_task_ids=DECODER_IDS[rows])
        torch.testing.assert_close(mixed[rows], one)


def test_direction_adapters_differ_per_direction(family):
    model = family.model(**NO_SELECTION, task_adapter_dim=8, task_adapter_key="direction")
    perturb_adapters(model)
    inputs, first = family.inputs(), slice(0, 1)
    a = _logits(model, family, inputs, first, encoder_task_ids=torch.tensor([0]), decoder_task_ids=torch.tensor([1]))
    b = _logits(model, family, inputs, first, encoder_task_ids=torch.tensor([1]), decoder_task_ids=torch.tensor([1]))
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("key", ["direction", "task"])
def test_encoder_adapters_by_direction_read_the_decoder_task(family, key):
    # by direction the encoder's adapter is the pair's: the encoder output changes with the decoder task alone; by
    # task it is the encoder task's, and does not
    model = family.model(**NO_SELECTION, task_adapter_dim=8, task_adapter_key=key)
    perturb_adapters(model)
    encoder_ids = torch.zeros(len(ENCODER_IDS), dtype=torch.long)

    def encoder_output(decoder_task: int) -> torch.Tensor:
        with torch.no_grad():
            return model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), encoder_task_ids=encoder_ids,
                         decoder_task_ids=torch.full_like(encoder_ids, decoder_task)).encoder_last_hidden_state

    assert torch.equal(encoder_output(0), encoder_output(2)) == (key == "task")


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generate_with_direction_adapters_routes_the_encoder_by_both_tasks(family, num_beams):
    model = family.model(task_adapter_dim=8, task_adapter_key="direction")
    perturb_adapters(model)
    inputs = family.inputs()
    kwargs = dict(num_beams=num_beams, max_new_tokens=4, min_new_tokens=4)
    mixed = model.generate(**inputs, encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS, **kwargs)
    for row in range(len(ENCODER_IDS)):
        one = model.generate(
            **{k: v[row : row + 1] for k, v in inputs.items()},
            encoder_task_ids=ENCODER_IDS[row : row + 1], decoder_task_ids=DECODER_IDS[row : row + 1], **kwargs,
        )
        assert mixed[row].tolist() == one[0].tolist()


def test_generate_with_direction_adapters_masks_the_padding_in_its_encoder_pass(family):
    # generate's encoder pass routes by both tasks for direction adapters: its first step must score what a forward
    # pass with the same attention mask does (the last example is padded; unmasked, its padding would be attended)
    model = family.model(task_adapter_dim=8, task_adapter_key="direction")
    perturb_adapters(model)
    inputs, ids = family.inputs(), dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    generated = model.generate(**inputs, **ids, max_new_tokens=1, output_logits=True, return_dict_in_generate=True)
    start = torch.full((len(ENCODER_IDS), 1), model.generation_config.decoder_start_token_id)
    with torch.no_grad():
        forward = model(**inputs, **ids, decoder_input_ids=start).logits[:, -1]
    torch.testing.assert_close(generated.logits[0], forward)


@pytest.mark.parametrize("how", ["generation_config", "positional"])
def test_generate_with_direction_adapters_captures_the_encoder_outputs_its_generation_config_asks_for(family, how):
    # generate once ran the encoder itself for direction adapters: it read output_* from keywords and the model's own
    # generation config, so a generation_config argument asking for them got encoder_attentions None
    model = family.model(task_adapter_dim=8, task_adapter_key="direction", attn_implementation="eager")
    perturb_adapters(model)
    inputs, ids = family.inputs(), dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    wanted = dict(output_attentions=True, output_hidden_states=True, return_dict_in_generate=True, max_new_tokens=3)
    config = copy.deepcopy(model.generation_config)
    config.update(**wanted)
    if how == "positional":
        main = inputs.pop(model.main_input_name)
        by_config = model.generate(main, config, **inputs, **ids)
        inputs[model.main_input_name] = main
    else:
        by_config = model.generate(**inputs, **ids, generation_config=config)
    by_keywords = model.generate(**inputs, **ids, **wanted)
    for name in ("encoder_attentions", "encoder_hidden_states"):
        got, expected = getattr(by_config, name), getattr(by_keywords, name)
        assert got is not None and len(got) == len(expected) > 0
        for one, other in zip(got, expected):
            torch.testing.assert_close(one, other)
    assert by_config.sequences.tolist() == by_keywords.sequences.tolist()


def _random_adapters(**kwargs) -> TaskAdapters:
    adapters = TaskAdapters(num_tasks=3, hidden_size=16, bottleneck=4, **kwargs)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in adapters.parameters():
            parameter.normal_()
    return adapters


def _count_blocks(monkeypatch) -> list:
    """The shapes of the states every [`TaskAdapters.adapt_blocks`] call gets, from now on."""
    calls, original = [], TaskAdapters.adapt_blocks

    def counted(self, states, route):
        calls.append(states.shape)
        return original(self, states, route)

    monkeypatch.setattr(TaskAdapters, "adapt_blocks", counted)
    return calls


@pytest.mark.parametrize("length", [1, 3], ids=["one-token step", "full pass"])
@pytest.mark.parametrize("ids", [[2, 0, 2, 1, 0, 2], [0, 0, 1, 1, 2, 2], [1, 1, 1, 0, 2, 2], [2, 0, 2, 0, 0, 2]],
                         ids=["interleaved", "grouped, equal sizes", "grouped out of task order", "two of three tasks"])
def test_a_mixed_batch_runs_the_adapters_in_blocks_equal_to_task_by_task(ids, length, monkeypatch):
    adapters, calls = _random_adapters(), _count_blocks(monkeypatch)
    route = TaskRoute.build(torch.tensor(ids))
    states = torch.randn(len(ids), length, 16, requires_grad=True)
    blocked = adapters(states, route)
    assert len(calls) == 1
    one_by_one = torch.cat([adapters.adapt(states[i : i + 1], task) for i, task in enumerate(ids)])
    torch.testing.assert_close(blocked, one_by_one)
    # the padded slots of a smaller task's block give nothing back: the gradients are those of task by task, up to
    # the summation order's rounding (relative to each gradient's scale: these random adapters' reach thousands)
    leaves = [states, *adapters.parameters()]
    for blocked_grad, grad in zip(torch.autograd.grad(blocked.pow(2).sum(), leaves),
                                  torch.autograd.grad(one_by_one.pow(2).sum(), leaves)):
        torch.testing.assert_close(blocked_grad, grad, rtol=1e-5, atol=1e-6 * grad.abs().max().item())


def test_a_full_pass_dominated_by_one_task_runs_its_adapters_task_by_task(monkeypatch):
    adapters, calls = _random_adapters(), _count_blocks(monkeypatch)
    route = TaskRoute.build(torch.tensor([0, 0, 0, 2, 0, 0, 1, 0]))  # blocks of 6: 18 slots for 8 rows
    longer = torch.randn(8, 3, 16)
    torch.testing.assert_close(adapters(longer, route), route.per_task(longer, lambda t, x: adapters.adapt(x, t)),
                               rtol=0, atol=0)
    assert not calls
    adapters(longer[:, :1], route)  # a one-token step: blocks whatever the padding
    assert len(calls) == 1
    # padded to exactly the bound (MAX_BLOCK_ROWS times its rows), a full pass still runs in blocks
    route = TaskRoute.build(torch.tensor([0, 0, 1, 0, 2, 0]))  # blocks of 4: 12 slots for 6 rows
    assert route.block_rows == adapters_module.MAX_BLOCK_ROWS * 6
    states = torch.randn(6, 3, 16)
    torch.testing.assert_close(adapters(states, route), route.per_task(states, lambda t, x: adapters.adapt(x, t)))
    assert len(calls) == 2


def test_blocks_normalise_with_the_adapters_own_eps(monkeypatch):
    # built with another eps than the layer norm's default, the blocks compute what the adapters do task by task
    adapters, calls = _random_adapters(eps=0.5), _count_blocks(monkeypatch)
    route = TaskRoute.build(torch.tensor([2, 0, 1, 0]))
    states = torch.randn(4, 3, 16) * 0.3  # a variance small enough for eps to matter
    torch.testing.assert_close(adapters(states, route), route.per_task(states, lambda t, x: adapters.adapt(x, t)))
    assert len(calls) == 1


def test_the_rows_of_the_tasks_present_are_cached_in_evaluation_until_a_parameter_changes():
    adapters = TaskAdapters(num_tasks=4, hidden_size=16, bottleneck=4).eval()
    with torch.no_grad():
        for parameter in adapters.parameters():
            parameter.normal_()
    route, states = TaskRoute.build(torch.tensor([3, 0, 3, 0])), torch.randn(4, 1, 16)

    def task_by_task():
        return route.per_task(states, lambda task, examples: adapters.adapt(examples, task))

    with torch.no_grad():
        first = adapters.task_parameters(route)
        assert adapters.task_parameters(route) is first  # a second step gathers nothing
        # only the last set of tasks is kept: the steps of ever new task sets must not pile up copies of the rows
        adapters.task_parameters(TaskRoute.build(torch.tensor([1, 2, 1])))
        assert adapters.task_parameters(route) is not first
        adapters.down_weight.add_(1.0)  # an optimizer step, load_state_dict: the version counter moves
        torch.testing.assert_close(adapters(states, route), task_by_task())
        adapters.up_weight.data = adapters.up_weight.data * 2  # bypasses the counter: cleared by hand
        adapters.clear_eval_cache()
        torch.testing.assert_close(adapters(states, route), task_by_task())
        adapters.double()  # a cast replaces every parameter's data
        states = states.double()
        torch.testing.assert_close(adapters(states, route), task_by_task())
    assert adapters.task_parameters(route) is not adapters.task_parameters(route)  # with autograd: never cached
    with torch.no_grad():
        assert adapters.train().task_parameters(route) is not adapters.task_parameters(route)  # nor in training


def test_clearing_the_models_cache_clears_the_adapters(family):
    model = family.model(**NO_SELECTION, task_adapter_dim=8, task_adapter_key="direction")
    perturb_adapters(model)
    with torch.no_grad():
        model.generate(**family.inputs(), encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS,
                       max_new_tokens=2, min_new_tokens=2)
    adapters = [m for m in model.modules() if isinstance(m, TaskAdapters)]
    assert any(m._eval_cache.keys() for m in adapters)  # the decoder's steps cached their rows
    model.clear_head_selection_cache()
    assert not any(m._eval_cache.keys() for m in adapters)


def test_a_mixed_batch_takes_the_blocks_in_the_encoder_and_in_every_decoding_step(family, monkeypatch):
    model = family.model(task_adapter_dim=8, task_adapter_key="task")
    perturb_adapters(model)
    calls = _count_blocks(monkeypatch)
    model.generate(**family.inputs(), encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS, max_new_tokens=3,
                   min_new_tokens=3)
    # the encoder's full pass, then every decoder layer of every step (the first from the start token alone)
    encoder, decoder = model.config.encoder_layers, 3 * model.config.decoder_layers
    assert [shape[0] for shape in calls] == [len(ENCODER_IDS)] * (encoder + decoder)
    assert [shape[1] == 1 for shape in calls] == [False] * encoder + [True] * decoder


def test_a_mixed_training_step_in_blocks_equals_task_by_task(family, monkeypatch):
    model = family.model(task_adapter_dim=8, task_adapter_key="direction").train()
    perturb_adapters(model)
    inputs = family.inputs()

    def loss_and_gradients():
        model.zero_grad()
        torch.manual_seed(0)  # the same dropout masks
        loss = model(**inputs, labels=family.labels(), encoder_task_ids=ENCODER_IDS,
                     decoder_task_ids=DECODER_IDS).loss
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    calls = _count_blocks(monkeypatch)
    blocked_loss, blocked = loss_and_gradients()
    assert len(calls) == model.config.encoder_layers + model.config.decoder_layers
    monkeypatch.setattr(adapters_module, "MAX_BLOCK_ROWS", 0)  # every full pass task by task
    loss, task_by_task = loss_and_gradients()
    assert len(calls) == model.config.encoder_layers + model.config.decoder_layers
    torch.testing.assert_close(blocked_loss, loss)
    assert blocked.keys() == task_by_task.keys() and any(".task_adapter." in name for name in blocked)
    for name, grad in blocked.items():
        torch.testing.assert_close(grad, task_by_task[name], msg=name)


def test_training_step_reaches_only_the_adapters_of_tasks_in_the_batch(family):
    model = family.model(**NO_SELECTION, task_adapter_dim=8, task_adapter_key="task").train()
    perturb_adapters(model)
    inputs = family.inputs()
    out = model(**inputs, labels=family.labels(), encoder_task_ids=torch.zeros(4, dtype=torch.long),
                decoder_task_ids=torch.tensor([1, 1, 2, 2]))
    out.loss.backward()
    encoder_grad = model.model.encoder.layers[0].task_adapter.down_weight.grad
    decoder_grad = model.model.decoder.layers[0].task_adapter.down_weight.grad
    assert encoder_grad[0].abs().sum() > 0 and encoder_grad[1].abs().sum() == 0
    assert decoder_grad[0].abs().sum() == 0 and decoder_grad[1:].abs().sum(dim=(1, 2)).min() > 0


def test_adapter_model_save_and_reload_keeps_the_adapters(family, tmp_path):
    model = family.model(task_adapter_dim=8)
    perturb_adapters(model)
    model.save_pretrained(tmp_path)
    reloaded = family.model_class.from_pretrained(tmp_path).eval()
    inputs = family.inputs()
    ids = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    torch.testing.assert_close(_logits(reloaded, family, inputs, **ids), _logits(model, family, inputs, **ids))


@pytest.mark.parametrize(
    "overrides, rule",
    [({"task_adapter_dim": -1}, "task_adapter_dim must be >= 0"), ({"task_adapter_key": "lang"}, "task_adapter_key")],
)
def test_invalid_adapter_keywords_raise(family, overrides, rule):
    with pytest.raises(ValueError, match=rule):
        family.config(**overrides)
