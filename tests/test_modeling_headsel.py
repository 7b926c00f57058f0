"""Behaviour of the head-selection models, run for both families (Marian and Speech2Text): equality with the stock
model, per-example routing in forward, generation and training, gradients, `selected_heads()` and the Auto
classes (attention: `test_attention.py`; routing and task defaults: `test_routing.py`) (DESIGN.md sections 2-5)."""

from __future__ import annotations

import itertools
import math
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers import AutoConfig

from hf_headsel.attention import PROJECTIONS, cheaper_step_projection
from hf_headsel.routing import TaskRoute

from conftest import (
    ALL_COMPONENTS,
    DECODER_IDS,
    DECODER_TASKS,
    ENCODER_IDS,
    ENCODER_TASKS,
    HEADS,
    HEAD_DIM,
    LAYERS,
    MARIAN,
    MIXED,
    SINGLE_TASK,
    SPEECH2TEXT,
    STRATEGY_CONFIGS,
    alone,
    component_task,
    eval_logits,
    extract_stock_model,
    forward_logits,
    mixed_model,
    pad_to,
    perturb_adapters,
    projections_used,
    randomize_selector_logits,
    seed_everything,
    selecting_attentions,
    step_scores,
    take,
)

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
        for proj, kind in itertools.product(PROJECTIONS, ("weight", "bias")):
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


def test_threads_sharing_a_model_generate_what_each_would_alone(family):
    """A server's threads calling `generate` on one model at once, each with its own mixed ids: the memos and caches
    the calls share are validated by the ids' identity, so each thread gets the scores of its calls made alone."""
    model = mixed_model(family, "group", task_adapter_dim=4)
    perturb_adapters(model)
    cases = [MIXED, dict(encoder_task_ids=torch.tensor([1, 1, 0, 0]), decoder_task_ids=torch.tensor([2, 2, 0, 0])),
             dict(encoder_task_ids=torch.tensor([0, 0, 0, 0]), decoder_task_ids=torch.tensor([1, 1, 1, 1]))]

    def scores(ids):  # every call with id tensors of its own, as a server's requests bring them
        with torch.no_grad():
            return step_scores(model, family, ids["encoder_task_ids"].clone(), ids["decoder_task_ids"].clone())

    alone_scores = [scores(ids) for ids in cases]
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between nearly any two Python bytecodes: races show up
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(lambda call: (call % 3, scores(cases[call % 3])), range(12)))
    finally:
        sys.setswitchinterval(switch_interval)
    for case, got in results:
        torch.testing.assert_close(got, alone_scores[case])


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
        for proj in PROJECTIONS:
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


def train_step(model, family, seed: int = 7, ids: dict = MIXED):
    model.train()
    seed_everything(seed)
    loss = model(**family.inputs(), labels=family.labels(), **ids).loss
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    model.eval()
    return loss.detach(), grads


#: Mixed batches for the projection comparison: interleaved with one decoder task twice as large as the others (padded
#: blocks), and each task's examples side by side in equal numbers (blocks without any gather).
PROJECTION_BATCHES = {
    "interleaved_unequal": MIXED,
    "grouped_equal": dict(encoder_task_ids=torch.tensor([0, 0, 1, 1]), decoder_task_ids=torch.tensor([2, 2, 0, 0])),
}


@pytest.mark.parametrize("batch", list(PROJECTION_BATCHES))
@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_mixed_batch_projections_compute_the_same(family, strategy, batch, projection_mode):
    """The ways of projecting a mixed batch (grouped, gathered, batched): eval logits, greedy and beam search,
    training loss and every gradient."""
    model = mixed_model(family, strategy)
    inputs, decoder_input_ids, ids = family.inputs(), family.decoder_input_ids(), PROJECTION_BATCHES[batch]
    results = {}
    for mode in ("grouped", "gathered", "batched"):
        projection_mode(mode)
        model.clear_head_selection_cache()
        results[mode] = (
            forward_logits(model, inputs, decoder_input_ids, **ids),
            model.generate(**inputs, **ids, do_sample=False, max_new_tokens=6),
            model.generate(**inputs, **ids, num_beams=3, do_sample=False, max_new_tokens=6),
            *train_step(model, family, ids=ids),
        )
    logits0, greedy0, beam0, loss0, grads0 = results["grouped"]
    for mode in ("gathered", "batched"):
        logits1, greedy1, beam1, loss1, grads1 = results[mode]
        torch.testing.assert_close(logits1, logits0)
        assert greedy1.tolist() == greedy0.tolist() and beam1.tolist() == beam0.tolist()
        torch.testing.assert_close(loss1, loss0)
        assert grads1.keys() == grads0.keys()
        for name in grads0:  # unselected candidates get exactly zero in all
            torch.testing.assert_close(grads1[name], grads0[name], msg=lambda m: f"{mode} {name}: {m}")


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_single_task_training_projected_gathered_computes_the_same(family, strategy, monkeypatch):
    """CUDA's single-task training path (all candidates in one matmul, then the task's heads), forced on the CPU:
    the loss and every gradient of the selected rows' path, and it does gather (the rows' path shows as grouped)."""
    from hf_headsel.attention import HeadSelectionAttentionMixin

    model = mixed_model(family, strategy)
    results = {}
    for path in ("grouped", "gathered"):
        if path == "gathered":
            monkeypatch.setattr(HeadSelectionAttentionMixin, "_gathers_single_task", lambda self, device: True)
        used = projections_used(lambda: results.__setitem__(path, train_step(model, family, ids=SINGLE_TASK)))
        assert {name for name, _ in used} == {path}
    (rows_loss, rows_grads), (loss, grads) = results["grouped"], results["gathered"]
    torch.testing.assert_close(loss, rows_loss)
    assert grads.keys() == rows_grads.keys()
    for name in grads:
        torch.testing.assert_close(grads[name], rows_grads[name], msg=lambda m: f"{name}: {m}")


def test_single_task_batches_gather_in_training_only_on_cuda_under_auto(marian, projection_mode):
    layer = marian.model().model.encoder.layers[0].self_attn
    assert layer._gathers_single_task(torch.device("cuda"))
    assert not layer._gathers_single_task(torch.device("cpu"))
    for mode in ("grouped", "gathered", "batched"):  # an explicit mode names how mixed batches project, only
        projection_mode(mode)
        assert not layer._gathers_single_task(torch.device("cuda"))


def test_auto_projection_of_full_passes_and_decoding_steps_on_cpu(family):
    """On the CPU a full pass projects a mixed batch grouped in training and where tasks hold unequal numbers of
    examples, batched in evaluation otherwise; a decoding step batched where each task's rows read and multiplied by
    its block cost less than all candidates' rows for every example (`EXAMPLES_PER_WEIGHT_READ`), else gathered:
    tasks of one or two examples, or one task with far more examples than the others."""
    model = mixed_model(family)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    equal = dict(encoder_task_ids=torch.tensor([0, 1, 1, 0]), decoder_task_ids=torch.tensor([2, 0, 0, 2]))
    full_pass = projections_used(lambda: forward_logits(model, inputs, decoder_input_ids, **equal))
    assert {name for name, _ in full_pass} == {"batched"}
    # MIXED: the encoder's tasks 2 and 2 examples (batched), the decoder's 1, 1 and 2 (grouped)
    full_pass = projections_used(lambda: forward_logits(model, inputs, decoder_input_ids, **MIXED))
    assert {name for name, _ in full_pass} == {"batched", "grouped"}
    unequal = dict(encoder_task_ids=torch.tensor([0, 1, 1, 1]), decoder_task_ids=MIXED["decoder_task_ids"])
    full_pass = projections_used(lambda: forward_logits(model, inputs, decoder_input_ids, **unequal))
    assert {name for name, _ in full_pass} == {"grouped"}
    assert {name for name, _ in projections_used(lambda: train_step(model, family, ids=equal))} == {"grouped"}

    def repeated(batch: dict, times: int) -> dict:
        return {name: value.repeat(times, *[1] * (value.dim() - 1)) for name, value in batch.items()}

    # 12 examples, 3 decoder tasks of 3, 3 and 6: blocks 3 x H x (4 + 6) = 30 H against 2 H x (4 + 12) = 32 H
    steps = projections_used(lambda: model.generate(**repeated(inputs, 3), **repeated(MIXED, 3), max_new_tokens=3))
    # the encoder pass (2 tasks of 6, a full pass) batched; the first step's cross-attention projects the encoder
    # output's keys and values as the step projects (batched): not one token
    assert {name for name, _ in steps} == {"batched"} and ("batched", 1) in steps and len(steps) == 2
    # 4 examples, 3 tasks: 3 x H x (4 + 2) = 18 H against 2 H x (4 + 4) = 16 H
    steps = projections_used(lambda: model.generate(**inputs, **MIXED, max_new_tokens=3))
    assert ("gathered", 1) in steps and ("batched", 1) not in steps
    unequal = dict(encoder_task_ids=torch.tensor([0] * 12), decoder_task_ids=torch.tensor([0] * 10 + [1, 2]))
    steps = projections_used(lambda: model.generate(**repeated(inputs, 3), **unequal, max_new_tokens=3))
    assert ("gathered", 1) in steps and ("batched", 1) not in steps  # 3 blocks of 10


@pytest.mark.parametrize(
    "total_heads, decoder_ids, beams, expected",
    [
        (8, [0, 1, 2, 3] * 2, 1, "batched"),  # the benchmark's greedy batch: a tie (96 each), measured 0.988
        (8, [0, 1, 2, 3] * 2, 5, "batched"),  # its beam search, 10 rows per task: measured 0.960 of gathered
        (8, [0, 1] * 4, 1, "batched"),  # 2 tasks of 4: 1.06x the stock model where gathered reads as the wide 1.12
        (6, [0, 1, 2, 3] * 2, 1, "gathered"),  # H' = 6: batched measured 1.086x gathered
        (8, list(range(8)), 1, "gathered"),  # 8 tasks of 1: batched measured 1.117x gathered
    ],
)
def test_auto_decoding_step_cost_model_agrees_with_the_measured_cases(total_heads, decoder_ids, beams, expected):
    """The cost model `"auto"` uses for a CPU decoding step picks the projection measured faster on this host
    (`benchmarks/results/issue15/session31`, Marian, d_model 256, H = 4, one thread)."""
    route = TaskRoute.build(torch.tensor(decoder_ids).repeat_interleave(beams))
    assert cheaper_step_projection(route, heads=4, total_heads=total_heads) == expected


def test_layers_with_nothing_to_choose_project_a_mixed_batch_as_one_task(family):
    """With `H' = H` (the adapter baseline's layers) every task uses every head: evaluation projects a mixed batch in
    one matmul, as for one task, with the outputs of each example alone; training keeps the per-task path (its gates
    still reach each task's logits)."""
    model = family.model(total_encoder_attention_heads=4, total_decoder_attention_heads=4)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    used = projections_used(lambda: (
        forward_logits(model, inputs, decoder_input_ids, **MIXED), model.generate(**inputs, **MIXED, max_new_tokens=3)))
    assert used == set()  # neither grouped, gathered nor batched: the one task's rows
    route = TaskRoute.build(MIXED["decoder_task_ids"])
    with torch.no_grad():  # what `generate` validates for its steps: the one task's rows, nothing stacked per task
        assert set(model.model.decoder.layers[0].self_attn.eval_weights(route)) == {"heads", route.tasks[0]}
    mixed = model.generate(**inputs, **MIXED, max_new_tokens=4, min_new_tokens=4)
    for row in range(len(MIXED["decoder_task_ids"])):
        one = model.generate(**{k: v[row : row + 1] for k, v in inputs.items()}, max_new_tokens=4, min_new_tokens=4,
                             **{k: v[row : row + 1] for k, v in MIXED.items()})
        assert mixed[row].tolist() == one[0].tolist()
    assert projections_used(lambda: train_step(model, family, ids=MIXED))  # per task in training


def test_batched_projection_keeps_the_weights_of_the_last_tasks_only(family, projection_mode):
    """The evaluation cache holds the stacked rows of one set of tasks per layer: a server's batches may mix any."""
    projection_mode("batched")
    model = mixed_model(family)
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    for ids in (MIXED, dict(encoder_task_ids=torch.tensor([0, 1, 0, 1]), decoder_task_ids=torch.tensor([1, 2, 1, 2]))):
        forward_logits(model, inputs, decoder_input_ids, **ids)
        for layer in model.__dict__["_selecting_attentions"]:
            batched = [key for key in layer._eval_cache.keys() if isinstance(key, tuple)]
            assert len(batched) == 1


def saved_for_backward(model, family, ids: dict) -> int:
    """Bytes a training forward pass keeps for its backward pass, the parameters left out (alive anyway)."""
    import op_count  # benchmarks/ is on the test path

    model.train()
    seed_everything(7)
    return op_count.saved_bytes(model, lambda: model(**family.inputs(), labels=family.labels(), **ids))


def test_training_keeps_no_gathered_weights_for_the_backward_pass(family):
    """A grouped training pass of a batch mixing tasks keeps for the backward pass what one of a single task keeps,
    but for a few task-sized index and gate tensors: not each task's gathered q/k/v rows (`TaskRowsLinear` gathers
    them again in the backward pass), which would add one `[3 * H * head_dim, d_model]` copy per task per layer."""
    model = mixed_model(family)
    single = saved_for_backward(model, family, dict(encoder_task_ids=0, decoder_task_ids=0))
    mixed = saved_for_backward(model, family, PROJECTION_BATCHES["grouped_equal"])  # 2 tasks a side, no reordering
    one_task_rows = sum(3 * HEADS * HEAD_DIM * layer.embed_dim * 4 for _, _, layer in selecting_attentions(model))
    assert 0 <= mixed - single < one_task_rows / 4


@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_grouped_training_gradients_equal_the_gathered_ones_under_autocast_and_twice_differentiated(family, strategy,
                                                                                                      projection_mode):
    """The grouped projection's own backward pass (`TaskRowsLinear`) under CPU autocast (bfloat16), and
    differentiated again (a gradient penalty), gives what autograd gives for the all-candidates projection."""
    model = mixed_model(family, strategy, attn_implementation="eager")  # sdpa's CPU backward is not differentiable
    model.train()
    names, parameters = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad])
    results = {}
    for mode in ("grouped", "gathered"):
        projection_mode(mode)
        seed_everything(7)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(**family.inputs(), labels=family.labels(), **MIXED).loss
        autocast = torch.autograd.grad(loss, parameters, allow_unused=True)
        seed_everything(7)
        loss = model(**family.inputs(), labels=family.labels(), **MIXED).loss
        grads = torch.autograd.grad(loss, parameters, create_graph=True, allow_unused=True)
        penalty = sum(g.pow(2).sum() for g in grads if g is not None)
        second = torch.autograd.grad(penalty, parameters, allow_unused=True)
        results[mode] = autocast, second
    for name, (autocast0, second0), (autocast1, second1) in zip(names, *(zip(*results[mode]) for mode in results)):
        assert (autocast0 is None) == (autocast1 is None) and (second0 is None) == (second1 is None), name
        if autocast0 is not None:
            torch.testing.assert_close(autocast0, autocast1, rtol=2e-2, atol=2e-3, msg=lambda m: f"{name}: {m}")
        if second0 is not None:  # float32, but summed in another order (per-task row blocks against all candidates)
            # and through two backward passes: a fresh CI run saw one element of 448 differ by 4e-6 relative
            torch.testing.assert_close(second0, second1, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_mixed_batch_projection_is_checked(family, projection_mode):
    projection_mode("sometimes")
    with pytest.raises(ValueError, match="mixed_batch_projection must be one of"):
        forward_logits(mixed_model(family), family.inputs(), family.decoder_input_ids(), **MIXED)


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
