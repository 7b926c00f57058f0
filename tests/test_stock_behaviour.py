"""The head-selection models behave like the stock Transformers models wherever those work (issue 14).

* `return_dict=False` (argument or config) returns the stock tuple, `head_selection_kl` last when labels are given;
* `torch.compile(model, fullgraph=True)` traces the forward (evaluation and training) and compiled generation
  (static caches) gives what eager gives, also after the weights change;
* `torch.export` of the whole model (strict or not, dynamic shapes, task ids as inputs) gives eager's logits, and so
  does its ONNX export in ONNX Runtime; the encoder or decoder alone exports non-strict, and strict export of it
  (ExecuTorch's wrappers) is refused clearly;
* gradient checkpointing, reentrant or not, gives the gradients of an unchecked run;
* the forwards declare `**kwargs: Unpack[TransformersKwargs]` like the stock ones;
* base models (`HeadSelMarianModel`, `HeadSelSpeech2TextModel`) are registered with `AutoModel` and load from and into
  the generation models' checkpoints like the stock families do;
* the whole model pickles and deep-copies (adapters included), the copy generating what the original does;
* dynamic quantization gives the quantized stock model's output, and LoRA through PEFT trains and merges;
* a search over the keywords of the stock forward / generate path: the `H' = H` head-selection twin of a stock
  model (same weights, one candidate per slot) returns what the stock model returns, keyword by keyword.

Every case runs for both families, with `H' = H` and `H' = 2H` and with single-task and mixed-task id tensors where
it applies. Compile tests use the `eager` dynamo backend: what failed was dynamo's tracing, and it keeps them fast.
"""

from __future__ import annotations

import copy
import inspect
import io
import types
import typing

import pytest
import torch
from transformers import AutoModel, GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput, TransformersKwargs

from hf_headsel.compat import CACHE_KWARG, OLD_CACHE_KWARG
from hf_headsel.eval_cache import EvalCacheMixin

from conftest import (
    ALL_COMPONENTS,
    DECODER_IDS,
    DECODER_TASKS,
    ENCODER_IDS,
    HEADS,
    MIXED,
    SINGLE_TASK,
    assert_same,
    compile_config,
    perturb_adapters,
    randomize_selector_logits,
    seed_everything,
)

IDS = {"single": SINGLE_TASK, "mixed": MIXED}
RATIOS = {"H'=H": 1, "H'=2H": 2}


def build(family, ratio: int, model_class=None, **overrides):
    """A seeded model selecting in all three components with `H' = ratio * H` and spread `phi`."""
    config = family.config(
        head_selection_components=ALL_COMPONENTS,
        total_encoder_attention_heads=ratio * HEADS,
        total_decoder_attention_heads=ratio * HEADS,
        **overrides,
    )
    seed_everything()
    model = (model_class or family.model_class)(config).eval()
    randomize_selector_logits(model)
    return model


def twin(family, base: bool = False, **overrides):
    """A stock model and its `H' = H` head-selection twin with the same weights: equal for every task."""
    stock_class = family.stock_base_model_class if base else family.stock_model_class
    seed_everything()
    stock = stock_class(family.stock_config(**overrides)).eval()
    model = build(family, 1, family.base_model_class if base else family.model_class, **overrides)
    missing, unexpected = model.load_state_dict(stock.state_dict(), strict=False)
    assert not unexpected and missing and all(key.startswith("head_selection.") for key in missing)
    return stock, model


def without_kl(output):
    """A head-selection output minus `head_selection_kl`: the stock fields."""
    return type(output)(**{key: value for key, value in output.items() if key != "head_selection_kl"})


# ---------------------------------------------------------------------------------------------------------------
# (1) return_dict=False
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", [False, True], ids=["no_labels", "labels"])
@pytest.mark.parametrize("ids", list(IDS))
@pytest.mark.parametrize("ratio", list(RATIOS))
def test_return_dict_false_returns_the_output_as_a_tuple_kl_last(family, ratio, ids, labels):
    model = build(family, RATIOS[ratio])
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **IDS[ids])
    if labels:
        kwargs["labels"] = family.labels()
    with torch.no_grad():
        expected = model(**kwargs)
        got = model(**kwargs, return_dict=False)
    assert isinstance(got, tuple)
    assert_same(got, expected.to_tuple())
    if labels:
        torch.testing.assert_close(got[0], expected.loss)
        torch.testing.assert_close(got[-1], expected.head_selection_kl)  # the documented place of the KL
    else:
        assert expected.head_selection_kl is None


@pytest.mark.parametrize("base", [False, True], ids=["lm", "base"])
@pytest.mark.parametrize("labels", [False, True], ids=["no_labels", "labels"])
def test_return_dict_false_tuple_is_the_stocks_plus_the_kl(family, labels, base):
    if base and labels:
        pytest.skip("the base models take no labels")
    stock, model = twin(family, base=base)
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids())
    if labels:
        kwargs["labels"] = family.labels()
    with torch.no_grad():
        expected = stock(**kwargs, return_dict=False)
        got = model(**kwargs, **MIXED, return_dict=False)
    assert isinstance(expected, tuple) and isinstance(got, tuple)
    if labels:  # the KL of H' = H learns nothing: zero
        torch.testing.assert_close(got[-1], torch.tensor(0.0))
        got = got[:-1]
    assert_same(got, expected)


def test_trainer_evaluation_predictions_are_the_stocks(family, tmp_path):
    # Trainer.prediction_step keeps every output field not in config.keys_to_ignore_at_inference: the KL is not a
    # prediction, and compute_metrics gets the stock model's arrays
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, default_data_collator

    stock, model = twin(family)
    inputs, labels = family.inputs(), family.labels()
    rows = [{**{name: value[i] for name, value in inputs.items()}, "labels": labels[i]} for i in range(len(labels))]
    predictions = {}
    for name, candidate, examples in (
            ("stock", stock, rows),
            ("ours", model, [{**row, **{key: ids[i] for key, ids in MIXED.items()}} for i, row in enumerate(rows)])):
        args = Seq2SeqTrainingArguments(output_dir=str(tmp_path / name), per_device_eval_batch_size=2, report_to=[],
                                        use_cpu=True, disable_tqdm=True)
        output = Seq2SeqTrainer(model=candidate, args=args, data_collator=default_data_collator).predict(examples)
        predictions[name] = (output.predictions, output.metrics["test_loss"])
    assert len(predictions["ours"][0]) == len(predictions["stock"][0])
    for got, expected in zip(predictions["ours"][0], predictions["stock"][0]):
        torch.testing.assert_close(torch.as_tensor(got), torch.as_tensor(expected))
    assert predictions["ours"][1] == pytest.approx(predictions["stock"][1])


@pytest.mark.parametrize("base", [False, True], ids=["lm", "base"])
def test_config_return_dict_false_behaves_as_on_the_stock_model(family, base):
    """`config.return_dict = False`: the same tuple as the stock model, or, where the installed Transformers' stock
    model cannot run with it (its submodules then return tuples to a forward reading attributes), the same error."""
    stock, model = twin(family, base=base)
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids())
    stock.config.return_dict = model.config.return_dict = False
    with torch.no_grad():
        try:
            expected = stock(**kwargs)
        except Exception as error:  # noqa: BLE001 - the stock model's own failure is the expected behaviour
            with pytest.raises(type(error)):
                model(**kwargs, **MIXED)
            return
        got = model(**kwargs, **MIXED)
    assert_same(got, expected)


def test_return_dict_false_trains(family):
    """The tuple's loss trains like the dict's (what `Trainer` reads with `config.return_dict=False`)."""
    model = build(family, 2, head_selection_kl_weight=0.5).train()
    seed_everything(3)
    loss = model(**family.inputs(), labels=family.labels(), **MIXED).loss
    loss.backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    seed_everything(3)
    output = model(**family.inputs(), labels=family.labels(), **MIXED, return_dict=False)
    output[0].backward()
    torch.testing.assert_close(output[0], loss)
    for name, grad in expected.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad)


# ---------------------------------------------------------------------------------------------------------------
# (2) torch.compile
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # the stock model's trace warns alike
def test_torchscript_trace_equals_eager(family):
    # torch.jit.trace counts as tracing (host caches and the custom autograd function left out): without gradients
    # the trace passes its own check (a second trace, one graph) and routes other task ids as eager does. With
    # gradients on, the model takes its differentiable path, and torch's check re-traces under no_grad, where it
    # takes its evaluation path (the same values, another graph): traced with check_trace=False, it equals eager.
    model = build(family, 2, use_cache=False, task_adapter_dim=4)  # the adapters' rows too
    perturb_adapters(model)
    example = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
    other = {**example, "encoder_task_ids": ENCODER_IDS.flip(0),
             "decoder_task_ids": (DECODER_IDS + 1) % len(DECODER_TASKS)}
    with torch.no_grad():
        traced = torch.jit.trace(model, example_kwarg_inputs=example, strict=False)
        expected = model(**other).logits
        torch.testing.assert_close(traced(**other)["logits"], expected)
    traced = torch.jit.trace(model, example_kwarg_inputs=example, strict=False, check_trace=False)
    torch.testing.assert_close(traced(**other)["logits"], expected)


def test_compile_flags_are_the_stocks(family):
    for ours, stock in ((family.model_class, family.stock_model_class),
                        (family.base_model_class, family.stock_base_model_class)):
        assert ours._can_compile_fullgraph == stock._can_compile_fullgraph
        assert ours.supports_gradient_checkpointing == stock.supports_gradient_checkpointing


@pytest.mark.parametrize("ratio, ids", [("H'=H", "single"), ("H'=2H", "mixed"), ("H'=2H", "default")])
def test_fullgraph_compiled_forward_equals_eager(family, ratio, ids, fresh_dynamo):
    overrides = dict(default_encoder_task="de", default_decoder_task="fr") if ids == "default" else {}
    if ids == "mixed":  # per-direction adapters and a pair-keyed cross-attention: routed per example in the graph
        overrides.update(task_adapter_dim=4, cross_attention_task_key="pair")
    model = build(family, RATIOS[ratio], **overrides)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("up_weight"):  # fresh adapters change nothing: make them count
                parameter.normal_(std=0.3)
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **IDS.get(ids, {}))
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        expected = model(**kwargs, use_cache=False)
        got = compiled(**kwargs, use_cache=False)
        assert_same(got, expected)
        # the compiled graph reads the weights, not a cache of them: it follows an in-place change
        model.model.decoder.layers[0].self_attn.q_proj.weight.mul_(1.5)
        model.head_selection["encoder_self"].logits.neg_()
        expected = model(**kwargs, use_cache=False)
        got = compiled(**kwargs, use_cache=False)
        assert_same(got, expected)
        if ids == "mixed":  # ids cannot be validated on the host in a graph: a device-side assertion fails instead
            bad = {**kwargs, "decoder_task_ids": torch.tensor([0, 3, 1, 2])}
            with pytest.raises(RuntimeError, match="task id out of range"):
                compiled(**bad, use_cache=False)


def test_fullgraph_compiled_base_model_equals_eager(family, fresh_dynamo):
    model = build(family, 2, family.base_model_class)
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED, use_cache=False)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        assert_same(compiled(**kwargs), model(**kwargs))


@pytest.mark.parametrize("ids", ["single task id", "mixed"])
def test_fullgraph_compiled_training_step_equals_eager(family, ids, fresh_dynamo):
    """One Gumbel draw (same seed), loss with the KL, and every gradient: a mixed batch (traced ids: every example
    gathers its heads) and one task given as an id (its rows gathered in the graph, task by task)."""
    model = build(family, 2, head_selection_kl_weight=0.5).train()
    task_ids = dict(encoder_task_ids=1, decoder_task_ids=2) if ids == "single task id" else MIXED
    kwargs = dict(**family.inputs(), labels=family.labels(), **task_ids)

    def step(run):
        seed_everything(11)
        output = run(**kwargs)
        output.loss.backward()
        result = (output.loss.detach(), output.head_selection_kl.detach(),
                  {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
        model.zero_grad(set_to_none=True)
        return result

    results = [step(model)]
    try:
        results.append(step(torch.compile(model, fullgraph=True, backend="eager")))
    except torch._dynamo.exc.Unsupported:
        # Only where the stock training forward has a graph break of its own (Transformers 5.17 draws the layerdrop
        # probability and branches on it even at layerdrop 0): then it must be the stock's, and we compile as it can.
        stock = family.stock_model().train()
        torch._dynamo.reset()
        with pytest.raises(torch._dynamo.exc.Unsupported):
            torch.compile(stock, fullgraph=True, backend="eager")(**family.inputs(), labels=family.labels())
        torch._dynamo.reset()
        results.append(step(torch.compile(model, backend="eager")))
    (loss, kl, grads), (compiled_loss, compiled_kl, compiled_grads) = results
    torch.testing.assert_close(compiled_loss, loss)
    torch.testing.assert_close(compiled_kl, kl)
    assert compiled_grads.keys() == grads.keys() and any(name.startswith("head_selection.") for name in grads)
    for name in grads:
        torch.testing.assert_close(compiled_grads[name], grads[name])


@pytest.mark.parametrize("cache_implementation", ["static", "offloaded_static"])
@pytest.mark.parametrize("ratio, ids", [("H'=H", "single"), ("H'=2H", "mixed")])
def test_compiled_generation_equals_eager(family, ratio, ids, cache_implementation, fresh_dynamo):
    device = "cpu"
    if cache_implementation == "offloaded_static":
        if not torch.cuda.is_available():
            pytest.skip("the offloaded static cache needs CUDA (the stock model's too)")
        device = "cuda"
    # the mixed case with per-direction adapters (the encoder then runs outside generate's compiled decoder steps)
    model = build(family, RATIOS[ratio], **(dict(task_adapter_dim=4) if ids == "mixed" else {}))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("up_weight"):
                parameter.normal_(std=0.3)
    model = model.to(device)
    inputs = {key: value.to(device) for key, value in {**family.inputs(), **IDS[ids]}.items()}
    kwargs = dict(**inputs, max_new_tokens=6, do_sample=False, num_beams=1)
    expected = model.generate(**kwargs)
    static = model.generate(**kwargs, cache_implementation=cache_implementation)
    compiled = model.generate(**kwargs, cache_implementation=cache_implementation, compile_config=compile_config())
    assert hasattr(model, "_compiled_call")  # generate did take the compiled forward
    torch.testing.assert_close(static, expected)
    torch.testing.assert_close(compiled, expected)


@pytest.mark.parametrize("ids", ["single task id", "single", "mixed"])
def test_compiled_decoding_steps_read_the_caches_validated_on_the_host(family, ids, fresh_dynamo, monkeypatch):
    """`generate` hands every decoding step with a static cache the selecting decoder layers' evaluation caches,
    validated on the host: the compiled step reads them instead of gathering the selected weight rows in its graph
    (no weight is gathered or stacked while it is traced), and still follows the weights when they change between
    calls."""
    from hf_headsel.attention import HeadSelectionAttentionMixin

    model = build(family, 2)
    task_ids = dict(encoder_task_ids=1, decoder_task_ids=2) if ids == "single task id" else IDS[ids]
    kwargs = dict(**family.inputs(), **task_ids, max_new_tokens=6, min_new_tokens=6, do_sample=False, num_beams=1,
                  output_logits=True, return_dict_in_generate=True)  # 6 steps: never done after the prefill
    compiled = dict(cache_implementation="static", compile_config=compile_config())

    def logits(**extra):
        return torch.stack(model.generate(**kwargs, **extra).logits)

    expected = logits()
    model.generate(**kwargs, cache_implementation="static")  # eager: fills the caches of the static path
    gathered = []
    for name in ("_task_weight_stack", "_stacked_weights"):
        original = getattr(HeadSelectionAttentionMixin, name)
        monkeypatch.setattr(HeadSelectionAttentionMixin, name,
                            lambda self, *args, _original=original, _name=name: gathered.append((_name, self.component))
                            or _original(self, *args))
    torch.testing.assert_close(logits(**compiled), expected)
    assert hasattr(model, "_compiled_call")
    assert not [call for call in gathered if call[1] != "encoder_self"]  # the encoder pass is not a decoding step
    with torch.no_grad():  # an in-place change of the weights: the next call validates, recomputes and follows it
        for name, parameter in model.named_parameters():
            if "decoder" in name and name.endswith(("q_proj.weight", "v_proj.weight")):
                parameter.mul_(1.5)
    monkeypatch.undo()
    changed = logits()
    assert not torch.allclose(changed, expected)
    torch.testing.assert_close(logits(**compiled), changed)


@pytest.mark.parametrize("overrides", [{}, {"cross_attention_task_key": "pair"}, {"task_adapter_dim": 4}],
                         ids=["decoder key", "pair key", "adapters"])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_steps_with_the_validated_caches_generate_what_steps_validating_their_own_caches_do(family, overrides,
                                                                                            num_beams):
    """Every step of `generate` (prefill and decoding, static or dynamic cache) reads the caches
    `prepare_inputs_for_generation` validated once per call; greedy and beam search generate what steps prepared
    the stock way, each layer reading its own cache, generate: with cross-attention keyed by the pair of tasks, and
    with per-direction adapters too."""
    from hf_headsel.routing import EVAL_WEIGHTS_KWARG

    model = build(family, 2, **overrides)
    kwargs = dict(**family.inputs(), **MIXED, max_new_tokens=6, min_new_tokens=6, do_sample=False, num_beams=num_beams)
    stock_steps = copy.deepcopy(model)
    stock_steps.prepare_inputs_for_generation = types.MethodType(GenerationMixin.prepare_inputs_for_generation,
                                                                 stock_steps)
    expected = stock_steps.generate(**kwargs)
    handed, validations = [], []
    model.register_forward_pre_hook(lambda module, args, kw: handed.append(EVAL_WEIGHTS_KWARG in kw), with_kwargs=True)
    validate = model._decoder_eval_weights
    model._decoder_eval_weights = lambda *args: validations.append(args) or validate(*args)
    for cache in ({}, {"cache_implementation": "static"}):
        handed.clear(), validations.clear()
        torch.testing.assert_close(model.generate(**kwargs, **cache), expected)
        assert len(handed) == 6 and all(handed)  # the prefill and every decoding step
        assert len(validations) == 1  # once per call


def test_generate_follows_weights_changed_between_calls(family):
    """The caches a `generate` call validated once are not reused by the next call: weights changed in place in
    between are followed."""
    model = build(family, 2)
    kwargs = dict(**family.inputs(), **MIXED, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                  output_scores=True, return_dict_in_generate=True)
    before = model.generate(**kwargs).scores
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "decoder" in name and name.endswith(("q_proj.weight", "v_proj.weight")):
                parameter.mul_(1.5)
    after = model.generate(**kwargs).scores
    model.clear_head_selection_cache()  # reference: nothing cached
    torch.testing.assert_close(after, model.generate(**kwargs).scores)
    assert not torch.allclose(before[0], after[0])


# ---------------------------------------------------------------------------------------------------------------
# (2b) torch.export
# ---------------------------------------------------------------------------------------------------------------


# transformers' output capturing sets a module global while the model runs: dynamo notes it, the stock model's too
SIDE_EFFECTS_NOTE = "ignore:While compiling, we found certain side effects:UserWarning"


class _LogitsOf(torch.nn.Module):
    """The model's logits as a function of positional tensors, the form `torch.export` takes; the task ids are
    inputs of the exported program, not constants baked into it."""

    def __init__(self, model, main_input_name: str, with_ids: bool):
        super().__init__()
        self.model, self.main_input_name, self.with_ids = model, main_input_name, with_ids

    def forward(self, inputs, attention_mask, decoder_input_ids, encoder_task_ids=None, decoder_task_ids=None):
        ids = dict(encoder_task_ids=encoder_task_ids, decoder_task_ids=decoder_task_ids) if self.with_ids else {}
        return self.model(**{self.main_input_name: inputs}, attention_mask=attention_mask,
                          decoder_input_ids=decoder_input_ids, use_cache=False, **ids).logits


def export_arguments(family, batch_size: int, length: int, seed: int, ids: dict | None) -> tuple:
    inputs = family.inputs(batch_size=batch_size, seed=seed)
    decoder_input_ids = family.decoder_input_ids(batch_size=batch_size, length=length, seed=seed + 1)
    arguments = (inputs[family.main_input_name], inputs["attention_mask"], decoder_input_ids)
    return arguments + (ids["encoder_task_ids"], ids["decoder_task_ids"]) if ids else arguments


#: The task ids of the second batch (3 examples) an exported program is run on, other than the example's.
OTHER_EXPORT_IDS = dict(encoder_task_ids=torch.tensor([1, 1, 0]), decoder_task_ids=torch.tensor([0, 2, 2]))


def export_dynamic_shapes(family, with_ids: bool) -> list[dict]:
    """The batch and lengths of [`export_arguments`]' tensors dynamic (and the ids' batch, `with_ids`)."""
    batch = torch.export.Dim("batch", min=1, max=16)
    # Speech2Text's two stride-2 convolutions: whole frames in steps of 4 keep the subsampled length exact
    source = torch.export.Dim("source", min=2, max=30) if family.main_input_name == "input_ids" else \
        4 * torch.export.Dim("source_quarters", min=2, max=7)
    dynamic = [{0: batch, 1: source}, {0: batch, 1: source}, {0: batch, 1: torch.export.Dim("target", max=30)}]
    return dynamic + ([{0: batch}, {0: batch}] if with_ids else [])


def pair_routed_model(family, **overrides):
    """A model whose layers read both sides' tasks: per-direction adapters (perturbed) and a pair-keyed
    cross-attention. One layer a side: tracing time grows with the layers, and every routed component is there."""
    model = build(family, 2, task_adapter_dim=4, cross_attention_task_key="pair", encoder_layers=1,
                  decoder_layers=1, **overrides)
    perturb_adapters(model)
    return model


@pytest.mark.filterwarnings(SIDE_EFFECTS_NOTE)
@pytest.mark.parametrize("ids, strict", [("mixed", True), ("default", False)], ids=["mixed-strict", "default"])
def test_torch_export_of_the_whole_model_equals_eager(family, ids, strict, fresh_dynamo):
    """`torch.export.export` of the whole model, batch and lengths dynamic, saved and loaded as a `.pt2` program,
    gives eager's logits on another batch size, other lengths and other task ids: the routing is traced, not baked
    in. Per-direction adapters and a pair-keyed cross-attention route per example in the graph too; with the
    default tasks, their one pair of tasks keeps the batch dynamic. Strict export (dynamo, as transformers' ExecuTorch
    wrappers use) with mixed ids; non-strict with the default tasks."""
    defaults = dict(default_encoder_task="de", default_decoder_task="fr") if ids == "default" else {}
    model = pair_routed_model(family, **defaults)
    wrapped = _LogitsOf(model, family.main_input_name, with_ids=ids == "mixed").eval()
    example = export_arguments(family, 4, 5, seed=3, ids=MIXED if ids == "mixed" else None)
    dynamic = export_dynamic_shapes(family, with_ids=ids == "mixed")
    with torch.no_grad():
        program = torch.export.export(wrapped, example, dynamic_shapes=dynamic, strict=strict)
        saved = io.BytesIO()
        torch.export.save(program, saved)
        saved.seek(0)
        loaded = torch.export.load(saved).module()
        other = export_arguments(family, 3, 3, seed=8, ids=OTHER_EXPORT_IDS if ids == "mixed" else None)
        torch.testing.assert_close(loaded(*other), wrapped(*other))
        torch.testing.assert_close(loaded(*example), wrapped(*example))


def test_torch_export_takes_the_model_itself_with_keyword_inputs(family, fresh_dynamo):
    """No wrapper needed: `torch.export.export(model, (), kwargs=...)` returns the model's own output class, whose
    logits follow other task ids given to the program."""
    model = build(family, 2)
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), use_cache=False, **MIXED)
    other = {**kwargs, "encoder_task_ids": ENCODER_IDS.flip(0), "decoder_task_ids": (DECODER_IDS + 1) % 3}
    with torch.no_grad():
        program = torch.export.export(model, (), kwargs=kwargs, strict=False).module()
        expected = model(**other)
        assert not torch.allclose(expected.logits, model(**kwargs).logits)  # the other ids route differently
        output = program(**other)
        assert type(output) is type(expected)
        torch.testing.assert_close(output.logits, expected.logits)


@pytest.mark.filterwarnings("ignore:# The axis name:UserWarning")  # torch.onnx: one Dim on several inputs, named once
def test_onnx_export_runs_in_onnx_runtime_with_the_eager_logits(family, tmp_path, fresh_dynamo):
    """`torch.onnx.export(..., dynamo=True)` of the whole model, batch and lengths dynamic and the task ids inputs of
    the graph: ONNX Runtime gives eager's logits (to float32 rounding) on the example and on another batch size,
    other lengths and other task ids, with per-direction adapters and a pair-keyed cross-attention."""
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    wrapped = _LogitsOf(pair_routed_model(family), family.main_input_name, with_ids=True).eval()
    example = export_arguments(family, 4, 5, seed=3, ids=MIXED)
    dynamic = export_dynamic_shapes(family, with_ids=True)
    names = ["inputs", "attention_mask", "decoder_input_ids", "encoder_task_ids", "decoder_task_ids"]
    path = tmp_path / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(wrapped, example, path, dynamo=True, dynamic_shapes=dynamic, input_names=names,
                          verbose=False)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for arguments in (example, export_arguments(family, 3, 3, seed=8, ids=OTHER_EXPORT_IDS)):
        (logits,) = session.run(None, {name: tensor.numpy() for name, tensor in zip(names, arguments)})
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(logits), wrapped(*arguments))


def test_torch_export_of_the_encoder_alone(family, fresh_dynamo):
    """Non-strict export of the encoder alone gives eager's output; strict export of it (transformers' ExecuTorch
    wrappers export so) cannot map `phi`, registered on the whole model, back to the exported module: it raises a
    `ValueError` naming what to export instead, not torch's bare `KeyError`."""
    from hf_headsel.attention import PART_EXPORT_REFUSAL

    model = build(family, 2, default_encoder_task="de", default_decoder_task="fr")
    encoder = model.get_encoder()
    inputs = family.inputs()
    example = (inputs[family.main_input_name], inputs["attention_mask"])

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, main_input, attention_mask):
            return self.encoder(**{family.main_input_name: main_input},
                                attention_mask=attention_mask).last_hidden_state

    with torch.no_grad():
        program = torch.export.export(Encoder(), example, strict=False)
        torch.testing.assert_close(program.module()(*example), Encoder()(*example))
        with pytest.raises(Exception) as raised:
            torch.export.export(Encoder(), example, strict=True)
    assert PART_EXPORT_REFUSAL in str(raised.value)


@pytest.mark.filterwarnings(SIDE_EFFECTS_NOTE)
def test_executorch_wrapper_exports_a_task_exported_as_a_stock_model(marian, fresh_dynamo):
    """The README's route to transformers' ExecuTorch wrapper: refused on the head-selection model, it exports the
    stock model of one task, whose exported encoder gives the head-selection encoder's output for that task."""
    from transformers.integrations.executorch import Seq2SeqLMExportableModule

    from hf_headsel.attention import PART_EXPORT_REFUSAL

    model = build(marian, 2)
    input_ids = marian.inputs(batch_size=1)["input_ids"]
    with pytest.raises(Exception) as raised:
        Seq2SeqLMExportableModule(model, max_hidden_seq_length=16, max_cache_length=8).export(input_ids)
    assert PART_EXPORT_REFUSAL in str(raised.value)
    stock = model.export_task_model(encoder_task="de", decoder_task="fr")
    exported = Seq2SeqLMExportableModule(stock, max_hidden_seq_length=16, max_cache_length=8).export(input_ids)
    with torch.no_grad():
        expected = model.get_encoder()(input_ids=input_ids, encoder_task_ids=1).last_hidden_state
        torch.testing.assert_close(exported.exported_encoder.module()(input_ids), expected)


# ---------------------------------------------------------------------------------------------------------------
# (3) gradient checkpointing
# ---------------------------------------------------------------------------------------------------------------


def train_grads(model, family, ids: dict, checkpointing: dict | None, base: bool = False):
    """Loss and gradients of one training step, the Gumbel draw seeded (the same draw in every run)."""
    if checkpointing is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpointing)
    model.train()
    seed_everything(7)
    if base:
        inputs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **ids)
        loss = model(**inputs).last_hidden_state.pow(2).mean()
    else:
        loss = model(**family.inputs(), labels=family.labels(), **ids).loss
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non_reentrant"])
@pytest.mark.parametrize("ids", list(IDS))
@pytest.mark.parametrize("ratio", list(RATIOS))
def test_gradient_checkpointing_gives_the_gradients_of_an_unchecked_run(family, ratio, ids, reentrant):
    results = [
        train_grads(build(family, RATIOS[ratio], head_selection_kl_weight=0.5), family, IDS[ids], checkpointing)
        for checkpointing in (None, {"use_reentrant": reentrant})
    ]
    (loss, grads), (checked_loss, checked_grads) = results
    torch.testing.assert_close(checked_loss, loss)
    assert checked_grads.keys() == grads.keys()
    assert any(name.startswith("head_selection.") and grad.abs().sum() > 0 for name, grad in grads.items())
    for name in grads:
        torch.testing.assert_close(checked_grads[name], grads[name], msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("ids", list(IDS))
def test_torch_func_grad_gives_the_autograd_gradients(family, ids):
    """`torch.func.grad` over `functional_call`, as with the stock model: every gradient equals `backward()`'s (the
    grouped projection's own backward pass, `TaskRowsLinear`, sets up its context apart, as `torch.func` needs)."""
    model = build(family, 2, head_selection_kl_weight=0.5).train()
    parameters = {name: p for name, p in model.named_parameters() if p.requires_grad}
    inputs = dict(**family.inputs(), labels=family.labels(), **IDS[ids])

    def loss(params):
        seed_everything(11)
        return torch.func.functional_call(model, params, (), inputs).loss

    grads = torch.func.grad(loss)(parameters)
    loss(parameters).backward()
    assert any(name.startswith("head_selection.") for name in grads)
    for name, parameter in parameters.items():
        expected = torch.zeros_like(parameter) if parameter.grad is None else parameter.grad
        torch.testing.assert_close(grads[name], expected, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("variant", ["base_model", "adapters", "every_second_layer"])
def test_reentrant_checkpointing_variants_give_unchecked_gradients(family, variant):
    base = variant == "base_model"
    overrides = dict(task_adapter_dim=4) if variant == "adapters" else {}
    model_class = family.base_model_class if base else None
    checkpointing = {"use_reentrant": True}
    results = []
    for setting in (None, checkpointing):
        model = build(family, 2, model_class, **overrides)
        if variant == "adapters":  # non-zero up-projections, so that the adapters change the outputs
            with torch.no_grad():
                for name, parameter in model.named_parameters():
                    if name.endswith("up_weight"):
                        parameter.normal_(std=0.3)
        if variant == "every_second_layer" and setting is not None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=setting)
            for layer in (*model.model.encoder.layers[1::2], *model.model.decoder.layers[1::2]):
                layer.gradient_checkpointing = False
            setting = None
        results.append(train_grads(model, family, MIXED, setting, base=base))
    (loss, grads), (checked_loss, checked_grads) = results
    torch.testing.assert_close(checked_loss, loss)
    assert checked_grads.keys() == grads.keys() and any(name.startswith("head_selection.") for name in grads)
    for name in grads:
        torch.testing.assert_close(checked_grads[name], grads[name], msg=lambda m: f"{name}: {m}")


# Transformers 5.24 renamed gradient checkpointing to activation checkpointing and gave it options of its own
HAS_ACTIVATION_CHECKPOINTING = hasattr(PreTrainedModel, "activation_checkpointing_enable")


def checkpointed_layers(model) -> list[bool]:
    return [layer.gradient_checkpointing for layer in (*model.model.encoder.layers, *model.model.decoder.layers)]


@pytest.mark.skipif(not HAS_ACTIVATION_CHECKPOINTING, reason="activation_checkpointing_enable is Transformers 5.24's")
@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non_reentrant"])
def test_activation_checkpointing_of_every_second_layer_checks_the_stock_layers_and_keeps_the_gradients(
        family, reentrant):
    """`activation_checkpointing_enable(every_n_layers=2)` (Trainer's `activation_checkpointing_kwargs`) checkpoints
    the layers it checkpoints in the stock model, and the gradients are an unchecked run's."""
    stock = family.stock_model()
    stock.activation_checkpointing_enable(every_n_layers=2)
    model = build(family, 2, head_selection_kl_weight=0.5)
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": reentrant},
                                          every_n_layers=2)
    assert checkpointed_layers(model) == checkpointed_layers(stock) and len(set(checkpointed_layers(model))) == 2
    checked_loss, checked_grads = train_grads(model, family, MIXED, None)
    loss, grads = train_grads(build(family, 2, head_selection_kl_weight=0.5), family, MIXED, None)
    torch.testing.assert_close(checked_loss, loss)
    assert checked_grads.keys() == grads.keys() and any(name.startswith("head_selection.") for name in grads)
    for name in grads:
        torch.testing.assert_close(checked_grads[name], grads[name], msg=lambda m: f"{name}: {m}")
    model.activation_checkpointing_disable()
    assert not any(checkpointed_layers(model))


# ---------------------------------------------------------------------------------------------------------------
# (4) signatures
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["lm", "base", "attention"])
def test_forward_signature_is_the_stocks_plus_the_task_ids(family, kind):
    if kind == "attention":
        ours = family.model(head_selection_components=ALL_COMPONENTS).model.decoder.layers[0].self_attn
        ours = type(ours)  # HeadSel...Attention(mixin, stock attention): the first nn.Module of its bases' MRO
        stock = next(base for base in ours.__mro__[1:] if issubclass(base, torch.nn.Module))
        extra = []
    else:
        ours, stock = ((family.model_class, family.stock_model_class) if kind == "lm"
                       else (family.base_model_class, family.stock_base_model_class))
        extra = ["encoder_task_ids", "decoder_task_ids"]
    # ours name the cache `cache` (transformers 5.24's name) on every supported version
    stock_params = {"cache" if name == OLD_CACHE_KWARG else name: parameter
                    for name, parameter in inspect.signature(stock.forward).parameters.items()}
    our_params = inspect.signature(ours.forward).parameters
    if kind == "attention":  # one shared attention forward: every stock keyword is taken, by name or **kwargs
        assert set(stock_params) - set(our_params) <= {"output_attentions"}, set(stock_params) - set(our_params)
        stock_params = {name: p for name, p in stock_params.items() if name in our_params}
    else:
        assert list(our_params) == [name for name in stock_params if name != "kwargs"] + extra + ["kwargs"]
    for name, parameter in stock_params.items():
        assert our_params[name].kind == parameter.kind, name
        assert our_params[name].default == parameter.default, name
    # tooling reads the `**kwargs` annotation to know which model-agnostic keywords (output_attentions, ...) work
    our_hints, stock_hints = typing.get_type_hints(ours.forward), typing.get_type_hints(stock.forward)
    assert our_hints["kwargs"] == stock_hints["kwargs"]
    if kind != "attention":
        assert our_hints["kwargs"] == Unpack[TransformersKwargs]
        assert {"output_attentions", "output_hidden_states"} <= TransformersKwargs.__optional_keys__


def test_generation_step_inputs_take_the_stocks_keywords(family):
    """`generate` refuses a keyword that neither the step-input method nor the forward lists: ours lists the stock
    method's, so it takes the cache by the stock's name (before 5.24 assisted decoding hands a head-selection draft
    its cache as `past_key_values`, which our forward calls `cache`)."""
    stock, model = family.stock_model(), build(family, 2)
    assert (inspect.signature(model.prepare_inputs_for_generation)
            == inspect.signature(stock.prepare_inputs_for_generation))
    stock._validate_model_kwargs({CACHE_KWARG: DynamicCache()})
    model._validate_model_kwargs({CACHE_KWARG: DynamicCache(), **MIXED})


# ---------------------------------------------------------------------------------------------------------------
# (5) base models
# ---------------------------------------------------------------------------------------------------------------


def test_auto_model_builds_the_base_model_and_prefixes_are_the_stocks(family):
    config = family.config()
    base = AutoModel.from_config(config)
    assert type(base) is family.base_model_class
    assert base.base_model_prefix == family.stock_base_model_class.base_model_prefix
    assert base.base_model is base
    lm = family.model_class(config)
    assert lm.base_model is lm.model
    assert not family.base_model_class.can_generate() and family.model_class.can_generate()


def loading_report(model_class, path) -> tuple[object, dict]:
    model, info = model_class.from_pretrained(path, output_loading_info=True)
    return model.eval(), {key: sorted(value) for key, value in info.items() if key != "error_msgs"}


@pytest.mark.parametrize("direction", ["lm_to_base", "base_to_lm"])
def test_checkpoints_load_across_base_and_generation_models_like_the_stocks(family, direction, tmp_path):
    """Loaded through the Auto classes with `base_model_prefix`: the same missing / unexpected keys as the stock
    family, the selectors carried over, and the same hidden states."""
    source_class, target_auto = (
        (family.model_class, AutoModel) if direction == "lm_to_base" else (family.base_model_class, family.auto_model_class)
    )
    stock_source, stock_target = (
        (family.stock_model_class, family.stock_base_model_class) if direction == "lm_to_base"
        else (family.stock_base_model_class, family.stock_model_class)
    )
    model = build(family, 2, source_class)
    model.save_pretrained(tmp_path / "headsel")
    seed_everything()
    stock_source(family.stock_config()).save_pretrained(tmp_path / "stock")
    loaded, report = loading_report(target_auto, tmp_path / "headsel")
    _, stock_report = loading_report(stock_target, tmp_path / "stock")
    assert type(loaded).__name__ == (family.base_model_class if direction == "lm_to_base" else family.model_class).__name__
    assert report == stock_report
    for component, heads in model.selected_heads().items():
        torch.testing.assert_close(loaded.selected_heads()[component], heads)
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)

    def last_hidden(m):
        out = m(**kwargs, output_hidden_states=True)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out.decoder_hidden_states[-1]

    with torch.no_grad():
        torch.testing.assert_close(last_hidden(loaded), last_hidden(model))


def test_base_model_takes_a_default_task(family, tmp_path):
    model = build(family, 2, family.base_model_class)
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path, task="fr").eval()
    assert loaded.config.default_decoder_task == "fr"
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), encoder_task_ids=MIXED["encoder_task_ids"])
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(**kwargs).last_hidden_state,
            model(**kwargs, decoder_task_ids=torch.tensor([1, 1, 1, 1])).last_hidden_state,
        )


# ---------------------------------------------------------------------------------------------------------------
# The stock forward / generate keywords, one by one, against the H' = H twin
# ---------------------------------------------------------------------------------------------------------------


def forward_cases(family) -> dict:
    """Keyword sets of the stock forward: name -> function(stock model) -> kwargs (built from the stock model where
    they are model outputs)."""
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    main = family.main_input_name
    decoder_mask = torch.ones_like(decoder_input_ids)
    decoder_mask[-1, -2:] = 0
    cases = {
        "default": lambda stock: dict(**inputs, decoder_input_ids=decoder_input_ids),
        "outputs": lambda stock: dict(**inputs, decoder_input_ids=decoder_input_ids, output_attentions=True,
                                      output_hidden_states=True),
        "no_cache": lambda stock: dict(**inputs, decoder_input_ids=decoder_input_ids, use_cache=False),
        "decoder_attention_mask": lambda stock: dict(**inputs, decoder_input_ids=decoder_input_ids,
                                                     decoder_attention_mask=decoder_mask, use_cache=False),
        "encoder_outputs_tuple": lambda stock: dict(
            attention_mask=inputs["attention_mask"], decoder_input_ids=decoder_input_ids,
            encoder_outputs=(stock.get_encoder()(**inputs).last_hidden_state,),
        ),
    }
    if main == "input_ids":  # the stock Speech2Text decoder needs decoder_input_ids (its positions come from them)
        cases["decoder_inputs_embeds"] = lambda stock: dict(
            **inputs, decoder_inputs_embeds=stock.get_decoder().embed_tokens(decoder_input_ids), use_cache=False
        )
        cases["inputs_embeds"] = lambda stock: dict(
            inputs_embeds=stock.get_encoder().embed_tokens(inputs["input_ids"]) * stock.get_encoder().embed_scale,
            attention_mask=inputs["attention_mask"], decoder_input_ids=decoder_input_ids,
        )
    return cases


@pytest.mark.parametrize("attention", ["default", "eager"])
@pytest.mark.parametrize("base", [False, True], ids=["lm", "base"])
def test_every_forward_keyword_gives_the_stock_output(family, base, attention):
    stock, model = twin(family, base=base, **({} if attention == "default" else {"attn_implementation": attention}))
    for name, make in forward_cases(family).items():
        if base and name == "encoder_outputs_tuple":
            continue  # checked on the generation model; the base model takes them the same way
        with torch.no_grad():
            kwargs = make(stock)
            expected = stock(**kwargs)
            got = model(**kwargs, **MIXED)
        if not base:
            assert got.head_selection_kl is None  # no labels, no KL
        assert_same(without_kl(got) if not base else got, expected, name)


def test_labels_and_a_cached_continuation_give_the_stock_output(family):
    stock, model = twin(family)
    inputs, labels = family.inputs(), family.labels()
    with torch.no_grad():
        expected, got = stock(**inputs, labels=labels), model(**inputs, labels=labels, **MIXED)
        assert_same(without_kl(got), expected, "labels")
        # what Trainer passes with gradient accumulation (a TransformersKwargs keyword)
        items = torch.tensor(10)
        expected = stock(**inputs, labels=labels, num_items_in_batch=items)
        got = model(**inputs, labels=labels, num_items_in_batch=items, **MIXED)
        assert_same(without_kl(got), expected, "num_items_in_batch")
        # a prefix with a cache, then one more token from the cache
        decoder_input_ids = family.decoder_input_ids()
        first = [m(**inputs, decoder_input_ids=decoder_input_ids[:, :3], use_cache=True, **extra)
                 for m, extra in ((stock, {}), (model, MIXED))]
        expected_next = stock(**inputs, decoder_input_ids=decoder_input_ids[:, 3:4],
                              **{CACHE_KWARG: first[0][CACHE_KWARG]})
        got_next = model(**inputs, decoder_input_ids=decoder_input_ids[:, 3:4],
                         cache=first[1][CACHE_KWARG], **MIXED)
        assert_same(without_kl(got_next), expected_next, "continuation")
        # the cache's name before transformers 5.24, still taken as the stock takes it (deprecated until 5.40)
        prefix = model(**inputs, decoder_input_ids=decoder_input_ids[:, :3], use_cache=True, **MIXED)
        got_next = model(**inputs, decoder_input_ids=decoder_input_ids[:, 3:4],
                         past_key_values=prefix[CACHE_KWARG], **MIXED)
    assert_same(without_kl(got_next), expected_next, "continuation through `past_key_values`")


GENERATE_CASES = {
    "greedy": dict(do_sample=False),
    "beam": dict(num_beams=3, num_return_sequences=2, do_sample=False),
    "sample": dict(do_sample=True, top_k=5, num_return_sequences=2),
    "outputs": dict(do_sample=False, num_beams=2, return_dict_in_generate=True, output_scores=True,
                    output_logits=True, output_attentions=True, output_hidden_states=True),
    "static_cache": dict(do_sample=False, cache_implementation="static"),
    "dynamic_cache": dict(do_sample=False, num_beams=2, cache_implementation="dynamic"),
    "no_cache": dict(do_sample=False, use_cache=False),
    "generation_config": dict(generation_config=GenerationConfig(max_new_tokens=4, do_sample=False,
                                                                 repetition_penalty=1.5)),
    # logits processors and stopping rules, in beam search (they score the batch expanded by the beams; the prefix
    # function gets each example's index in the batch, and allows other tokens to odd and even examples)
    "constraints": dict(do_sample=False, num_beams=2, min_new_tokens=3, no_repeat_ngram_size=2, bad_words_ids=[[5]],
                        sequence_bias={(7,): -2.0}, length_penalty=0.5, early_stopping=True),
    "prefix_allowed_tokens": dict(do_sample=False, num_beams=2,
                                  prefix_allowed_tokens_fn=lambda batch, tokens: [3, 4, 6, 8, 9] if batch % 2 else
                                  [2, 3, 10, 11, 12]),
}


@pytest.mark.parametrize("case", list(GENERATE_CASES))
def test_every_generate_option_gives_the_stock_output(family, case):
    stock, model = twin(family)
    kwargs = dict(**family.inputs(), **GENERATE_CASES[case])
    if "generation_config" not in kwargs:
        kwargs["max_new_tokens"] = 5
    seed_everything(5)
    expected = stock.generate(**kwargs)
    seed_everything(5)
    got = model.generate(**kwargs, **MIXED)
    if isinstance(expected, ModelOutput):
        # beam search keeps a cache; compare the tokens, scores and captured tensors
        expected = {key: value for key, value in expected.items() if key != CACHE_KWARG}
        got = {key: value for key, value in got.items() if key != CACHE_KWARG}
    assert_same(got, expected, case)


#: Head-selection verifier and draft with task adapters keyed by direction: their encoders read the decoder tasks too.
DIRECTION_ADAPTERS = dict(task_adapter_dim=4, task_adapter_key="direction")


def draft_model(family, kind: str):
    """A draft for assisted decoding: a head-selection model (with adapters keyed by direction if the kind says so)
    or a stock one, its weights not the verifier's, so that some of its candidates are rejected."""
    if kind == "stock_draft":
        draft = family.stock_model_class(family.stock_config())
    else:
        draft = build(family, 2, **(DIRECTION_ADAPTERS if kind == "adapters_draft" else {}))
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    return draft.eval()


#: Candidate decoding against plain greedy decoding: a fixed length, so that both generate as many tokens.
CANDIDATE_DECODING = dict(do_sample=False, max_new_tokens=8, min_new_tokens=8)


@pytest.mark.parametrize("candidates", ["prompt_lookup", "head_selection_draft", "adapters_draft", "stock_draft"])
def test_candidate_decoding_generates_what_greedy_decoding_does(family, candidates):
    """Prompt-lookup and assisted decoding, greedy, one example at a time (as transformers requires): the model
    verifies several candidate tokens in one step and crops its caches back to those it accepts, so it generates what
    plain greedy decoding does, for each example's tasks. A stock draft drafts without the task keywords; a draft
    whose encoder reads the decoder tasks (adapters keyed by direction) gets them in its own encoder pass."""
    model = build(family, 2, **(DIRECTION_ADAPTERS if candidates == "adapters_draft" else {}))
    extra = (dict(prompt_lookup_num_tokens=2) if candidates == "prompt_lookup"
             else dict(assistant_model=draft_model(family, candidates)))
    inputs = family.inputs()
    if candidates == "prompt_lookup" and not stock_prompt_lookup_is_greedy(family):
        pytest.skip("the stock model's prompt-lookup decoding differs from its greedy decoding on this transformers "
                    "(Speech2Text on 5.17)")
    for example in range(len(MIXED["decoder_task_ids"])):
        kwargs = {key: value[example:example + 1] for key, value in (*inputs.items(), *MIXED.items())}
        kwargs.update(CANDIDATE_DECODING)
        assert torch.equal(model.generate(**kwargs, **extra), model.generate(**kwargs)), example


def stock_prompt_lookup_is_greedy(family) -> bool:
    """Whether the stock model's prompt-lookup decoding generates what its greedy decoding does."""
    stock = family.stock_model()
    kwargs = {**{key: value[:1] for key, value in family.inputs().items()}, **CANDIDATE_DECODING}
    return torch.equal(stock.generate(**kwargs, prompt_lookup_num_tokens=2), stock.generate(**kwargs))


def test_resized_token_embeddings_give_the_resized_stock_model_and_reload(family, tmp_path):
    """`resize_token_embeddings` (new tokens, a new `>>xx<<` language tag say) resizes as on the stock model: the
    `H' = H` twin then gives the resized stock model's logits and tokens, and saves and reloads at the new size."""
    stock, model = twin(family)
    size = stock.config.vocab_size + 5
    for resized in (stock, model):
        seed_everything(7)  # the new rows are drawn: the same draw for both
        resized.resize_token_embeddings(size)
    assert model.config.vocab_size == size and model.get_output_embeddings().weight.shape[0] == size
    forward = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids())
    assert_same(model(**forward, **MIXED).logits, stock(**forward).logits, "logits")
    kwargs = dict(**family.inputs(), do_sample=False, max_new_tokens=5)
    assert torch.equal(model.generate(**kwargs, **MIXED), stock.generate(**kwargs))
    model.save_pretrained(tmp_path)
    loaded = family.model_class.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded(**forward, **MIXED).logits, model(**forward, **MIXED).logits)


# ---------------------------------------------------------------------------------------------------------------
# (6) the whole model pickled and copied
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("adapters", [0, 8], ids=["no_adapters", "adapters"])
def test_the_whole_model_pickles_and_copies_like_the_stock_model(family, adapters):
    """`torch.save(model)` / `torch.load` (pickle: what spawned workers receive) and `copy.deepcopy`, as on the stock
    model, give a model that generates what the original does; a copy starts with empty evaluation caches."""
    stock = family.stock_model()
    torch.save(stock, io.BytesIO())
    model = build(family, 2, task_adapter_dim=adapters)
    perturb_adapters(model)
    kwargs = dict(**family.inputs(), **MIXED, max_new_tokens=4, min_new_tokens=4)
    with torch.no_grad():
        expected = model.generate(**kwargs)  # fills the evaluation caches
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    for clone in (torch.load(buffer, weights_only=False), copy.deepcopy(model)):
        assert not any(m._eval_cache.keys() for m in clone.modules() if isinstance(m, EvalCacheMixin))
        with torch.no_grad():
            assert torch.equal(clone.generate(**kwargs), expected)


# ---------------------------------------------------------------------------------------------------------------
# (7) projections replaced by other modules: dynamic quantization, PEFT's LoRA
# ---------------------------------------------------------------------------------------------------------------


def quantize_dynamic(model):
    quantization = getattr(torch.ao, "quantization", None)
    if quantization is None or not hasattr(quantization, "quantize_dynamic"):
        pytest.skip("this torch has no torch.ao.quantization.quantize_dynamic")
    return quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")  # deprecated in torch, still the stock CPU recipe
def test_dynamic_quantization_gives_the_quantized_stock_output(family):
    """`quantize_dynamic` (CPU serving of the stock models) replaces every `nn.Linear`: the quantized twin projects
    through the quantized modules and returns exactly what the quantized stock model returns."""
    stock, model = twin(family)
    stock, model = quantize_dynamic(stock), quantize_dynamic(model)
    kwargs = dict(**family.inputs(), max_new_tokens=5, min_new_tokens=5)
    with torch.no_grad():
        assert torch.equal(model.generate(**kwargs, **MIXED), stock.generate(**kwargs))
        expected = stock(**family.inputs(), decoder_input_ids=family.decoder_input_ids()).logits
        got = model(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_a_lora_merged_into_a_model_that_evaluated_computes_with_the_merged_weights(family):
    """PEFT's `merge_and_unload` adds the LoRA product to the base weight through `.data` (no version counter moves)
    and puts the same `nn.Linear` back: the weight rows cached by an earlier evaluation were used again."""
    peft = pytest.importorskip("peft")
    model = build(family, 2).eval()
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
    with torch.no_grad():
        before = model(**kwargs).logits  # fills the evaluation caches
        config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        merged = peft.get_peft_model(model, config).merge_and_unload()
        got = merged(**kwargs).logits
        fresh = family.model_class(merged.config).eval()
        fresh.load_state_dict(merged.state_dict())
        torch.testing.assert_close(got, fresh(**kwargs).logits, rtol=0, atol=0)
    assert not torch.allclose(got, before)  # the merge changed what the model computes


def test_peft_modules_to_save_trains_the_head_selection_logits(family, tmp_path):
    """LoRA with the selectors in `modules_to_save` (named by their path, `head_selection.<component>`: PEFT refuses
    the `head_selection` container): the copies of `phi` learn and choose the heads, the originals stay; with the
    adapter disabled the model generates what it did before; the merged model and a reloaded adapter generate what
    the PEFT model does."""
    peft = pytest.importorskip("peft")
    model = build(family, 2)
    original = copy.deepcopy(model)
    to_save = [f"head_selection.{component}" for component in model.config.head_selection_components]
    config = peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"], modules_to_save=to_save)
    lora = peft.get_peft_model(model, config)
    optimizer = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1.0)
    lora.train()
    for _ in range(3):
        lora(**family.inputs(), labels=family.labels(), **MIXED).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    lora.eval()
    assert lora.base_model.model.selected_heads().keys() == original.selected_heads().keys()
    changed = [name for name, heads in lora.base_model.model.selected_heads().items()
               if not torch.equal(heads, original.selected_heads()[name])]
    assert changed  # the trained copies choose the heads
    kwargs = dict(**family.inputs(), **MIXED, max_new_tokens=5, min_new_tokens=5)
    with torch.no_grad():
        adapted = lora.generate(**kwargs)
        with lora.disable_adapter():
            assert torch.equal(lora.generate(**kwargs), original.generate(**kwargs))
        lora.save_pretrained(tmp_path)
        reloaded = peft.PeftModel.from_pretrained(copy.deepcopy(original), tmp_path).eval()
        assert torch.equal(reloaded.generate(**kwargs), adapted)
        merged = lora.merge_and_unload()
        assert type(merged) is family.model_class
        assert torch.equal(merged.generate(**kwargs), adapted)
        assert merged.selected_heads().keys() == original.selected_heads().keys()


def test_peft_lora_on_the_attention_projections_trains_and_merges(family):
    """LoRA through PEFT on `q_proj` / `v_proj` of a model selecting everywhere: the LoRA weights learn (the frozen
    model's do not), and the merged model (`merge_and_unload`, plain `nn.Linear` again) computes what the PEFT model
    computes, for a mixed batch."""
    peft = pytest.importorskip("peft")
    model = build(family, 2)
    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(model, config)
    lora.train()
    loss = lora(**family.inputs(), labels=family.labels(), **MIXED).loss
    loss.backward()
    trained = {name for name, p in lora.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert trained and all("lora_" in name for name in trained)
    assert any(".self_attn.q_proj." in name for name in trained)
    assert any(".encoder_attn.v_proj." in name for name in trained)
    lora.eval()
    kwargs = dict(**family.inputs(), decoder_input_ids=family.decoder_input_ids(), **MIXED)
    with torch.no_grad():
        expected = lora(**kwargs).logits
        merged = lora.merge_and_unload()
        assert type(merged) is family.model_class
        torch.testing.assert_close(merged(**kwargs).logits, expected, rtol=1e-4, atol=1e-5)
