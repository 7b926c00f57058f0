"""The decoder-only head-selection language model (`HeadSelMarianForCausalLM`, `modeling_head_selection_causal_lm.py`):
the decoder of the translation model alone, loaded by `AutoModelForCausalLM` like the stock `MarianForCausalLM`.

It computes what the translation model's decoder computes for the same weights and tasks; each example equals the
stock causal LM exported for its task, and a stock causal LM upcycled equals it for every task, output by output
(attentions, hidden states, cache, `logits_to_keep`, the tuple; dynamically quantized too); a mixed batch equals its
examples one by one (forward and generation); training adds the KL and reaches the selectors, and the stock
`Trainer` steps it from a `datasets` corpus with a task-ids column as a step by hand does; gradient
checkpointing, compiled forward and generation, assisted and prompt-lookup decoding, `torch.export`, SDPA
attention, LoRA through PEFT, pickling, save / load, remote code, the `EncoderDecoderModel` wrapper work as on the
translation model.
"""

from __future__ import annotations

import copy
import io

import pytest
import torch
from transformers import AutoModelForCausalLM, EncoderDecoderModel, MarianForCausalLM, MarianModel

from hf_headsel import HeadSelCausalLMOutput, HeadSelMarianForCausalLM
from hf_headsel.compat import CACHE_KWARG
from hf_headsel.routing import Routing

from conftest import (
    DECODER_IDS,
    DECODER_TASKS,
    ENCODER_IDS,
    MARIAN,
    STRATEGY_CONFIGS,
    assert_same,
    compile_config,
    perturb_adapters,
    randomize_selector_logits,
    run_without_hf_headsel,
    seed_everything,
)

DECODER_COMPONENTS = ["decoder_self", "decoder_cross"]


def causal_lm(strategy: str = "group", **overrides) -> HeadSelMarianForCausalLM:
    """A seeded causal LM selecting in the decoder's components (the strategy's config), `phi` spread."""
    seed_everything()
    model = HeadSelMarianForCausalLM(MARIAN.config(**{**STRATEGY_CONFIGS[strategy], **overrides})).eval()
    randomize_selector_logits(model)
    return model


def lm_inputs(batch_size: int = 4) -> dict:
    """Decoder tokens with their mask (the last example padded on the right), and encoder states to attend to."""
    input_ids = MARIAN.decoder_input_ids(batch_size=batch_size, length=6)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, -2:] = 0
    generator = torch.Generator().manual_seed(5)
    encoder_hidden_states = torch.randn(batch_size, 7, MARIAN.base_kwargs["d_model"], generator=generator)
    encoder_attention_mask = MARIAN.inputs(batch_size)["attention_mask"]
    return dict(input_ids=input_ids, attention_mask=attention_mask, encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_attention_mask)


def logits(model, inputs: dict, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs, **kwargs).logits


@pytest.mark.parametrize("cross_attention_task_key", ["decoder", "pair"])
@pytest.mark.parametrize("strategy", ["group", "subset"])
def test_the_decoder_alone_computes_what_the_translation_models_decoder_does(strategy, cross_attention_task_key):
    config_keywords = dict(STRATEGY_CONFIGS[strategy], cross_attention_task_key=cross_attention_task_key)
    translation = MARIAN.model(**config_keywords)
    randomize_selector_logits(translation)
    model = HeadSelMarianForCausalLM(MARIAN.config(**config_keywords)).eval()
    missing, unexpected = model.load_state_dict(translation.state_dict(), strict=False)
    assert missing == []
    # what a decoder has no place for: the encoder, its selector, the shared embedding and the logits bias
    assert {key.split(".")[1] if key.startswith("model.") else key.split(".")[0] for key in unexpected} == {
        "encoder", "shared", "head_selection", "final_logits_bias"}
    assert model.config.head_selection_components == DECODER_COMPONENTS
    assert set(model.head_selection) == set(DECODER_COMPONENTS)
    inputs = MARIAN.inputs()
    decoder_input_ids = MARIAN.decoder_input_ids()
    ids = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    with torch.no_grad():
        expected = translation(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits
        encoder_hidden_states = translation.get_encoder()(**inputs, encoder_task_ids=ENCODER_IDS).last_hidden_state
    # the decoder-keyed cross-attention reads no source task: none is given
    source = dict(encoder_task_ids=ENCODER_IDS) if cross_attention_task_key == "pair" else {}
    got = logits(model, dict(input_ids=decoder_input_ids, encoder_hidden_states=encoder_hidden_states,
                             encoder_attention_mask=inputs["attention_mask"]), decoder_task_ids=DECODER_IDS, **source)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_each_example_equals_the_stock_causal_lm_exported_for_its_task(strategy):
    model = causal_lm(strategy)
    inputs = lm_inputs()
    mixed = logits(model, inputs, decoder_task_ids=DECODER_IDS)
    for task_id, task in enumerate(DECODER_TASKS):
        stock = model.export_task_model(decoder_task=task)
        assert type(stock) is MarianForCausalLM and not stock.config.is_encoder_decoder
        rows = (DECODER_IDS == task_id).nonzero().flatten()
        expected = logits(stock, {key: value[rows] for key, value in inputs.items()})
        torch.testing.assert_close(mixed[rows], expected)


@pytest.mark.parametrize("strategy", list(STRATEGY_CONFIGS))
def test_a_stock_causal_lm_upcycled_gives_its_logits_for_every_task(strategy):
    seed_everything()
    stock = MarianForCausalLM(MARIAN.stock_config()).eval()
    keywords = {key: value for key, value in STRATEGY_CONFIGS[strategy].items() if "encoder" not in key}
    model = HeadSelMarianForCausalLM.from_stock(stock, decoder_tasks=DECODER_TASKS, **keywords)
    assert model.config.head_selection_components == DECODER_COMPONENTS
    inputs = lm_inputs()
    expected = logits(stock, inputs)
    for task_id in range(len(DECODER_TASKS)):
        torch.testing.assert_close(logits(model, inputs, decoder_task_ids=torch.full((4,), task_id)), expected)


def test_the_upcycled_twin_returns_every_output_the_stock_causal_lm_returns():
    """`from_stock` (H' = 2H) equals the stock model for every task: logits, loss, attentions and cross-attentions,
    hidden states, the cache and a continuation from it, `logits_to_keep`, and the tuple of `return_dict=False`."""
    seed_everything()
    stock = MarianForCausalLM(MARIAN.stock_config(attn_implementation="eager")).eval()
    model = HeadSelMarianForCausalLM.from_stock(stock, decoder_tasks=DECODER_TASKS,
                                                head_selection_components=DECODER_COMPONENTS)
    randomize_selector_logits(model)  # whatever is selected
    model.set_attn_implementation("eager")  # the attention weights are returned by eager only, as the stock's
    inputs = lm_inputs()
    options = dict(output_attentions=True, output_hidden_states=True, use_cache=True)
    with torch.no_grad():
        expected = stock(**inputs, labels=inputs["input_ids"], **options)
        got = model(**inputs, labels=inputs["input_ids"], decoder_task_ids=DECODER_IDS, **options)
        assert_same(type(expected)(**{key: value for key, value in got.items() if key != "head_selection_kl"}),
                    expected)
        # a continuation from each one's cache
        step = dict(input_ids=MARIAN.decoder_input_ids(length=1, seed=9),
                    encoder_hidden_states=inputs["encoder_hidden_states"],
                    encoder_attention_mask=inputs["encoder_attention_mask"],
                    attention_mask=torch.cat([inputs["attention_mask"], torch.ones(4, 1, dtype=torch.long)], dim=1))
        # the installed transformers' name of the cache, in and out (`cache` from 5.24)
        assert_same(model(**step, **{CACHE_KWARG: got[CACHE_KWARG]}, decoder_task_ids=DECODER_IDS).logits,
                    stock(**step, **{CACHE_KWARG: expected[CACHE_KWARG]}).logits, "continued")
        assert_same(model(**inputs, logits_to_keep=1, decoder_task_ids=DECODER_IDS).logits,
                    stock(**inputs, logits_to_keep=1).logits, "logits_to_keep")
        assert_same(model(**inputs, return_dict=False, use_cache=False, decoder_task_ids=DECODER_IDS),
                    stock(**inputs, return_dict=False, use_cache=False), "return_dict=False")


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")  # deprecated in torch, still the stock CPU recipe
def test_dynamic_quantization_gives_the_quantized_stock_output():
    quantization = getattr(torch.ao, "quantization", None)
    if quantization is None or not hasattr(quantization, "quantize_dynamic"):
        pytest.skip("this torch has no torch.ao.quantization.quantize_dynamic")
    seed_everything()
    stock = MarianForCausalLM(MARIAN.stock_config()).eval()
    model = HeadSelMarianForCausalLM.from_stock(stock, decoder_tasks=DECODER_TASKS)
    stock, model = (quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8) for m in (stock, model))
    inputs = lm_inputs()
    torch.testing.assert_close(logits(model, inputs, decoder_task_ids=DECODER_IDS), logits(stock, inputs), rtol=0,
                               atol=0)


def test_peft_lora_trains_and_merges_into_a_causal_lm_computing_the_same():
    peft = pytest.importorskip("peft")
    model = causal_lm()
    config = peft.LoraConfig(task_type="CAUSAL_LM", r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(model, config)
    inputs = lm_inputs()
    lora.train()
    lora(**inputs, labels=inputs["input_ids"], decoder_task_ids=DECODER_IDS).loss.backward()
    trained = {name for name, p in lora.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert trained and all("lora_" in name for name in trained)
    assert any(".encoder_attn.v_proj." in name for name in trained)  # the cross-attention's selected heads too
    lora.eval()
    expected = logits(lora, inputs, decoder_task_ids=DECODER_IDS)
    merged = lora.merge_and_unload()
    assert type(merged) is HeadSelMarianForCausalLM
    torch.testing.assert_close(logits(merged, inputs, decoder_task_ids=DECODER_IDS), expected, rtol=1e-4, atol=1e-5)


def test_torch_export_of_the_causal_lm_routes_other_task_ids_as_eager(fresh_dynamo):
    model = causal_lm()
    kwargs = dict(input_ids=MARIAN.decoder_input_ids(), use_cache=False, decoder_task_ids=DECODER_IDS)
    other = {**kwargs, "decoder_task_ids": (DECODER_IDS + 1) % len(DECODER_TASKS)}
    with torch.no_grad():
        program = torch.export.export(model, (), kwargs=kwargs, strict=False).module()
        torch.testing.assert_close(program(**other).logits, model(**other).logits)
        torch.testing.assert_close(program(**kwargs).logits, model(**kwargs).logits)


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "gathered"])
@pytest.mark.parametrize("adapters", [0, 4], ids=["no adapters", "adapters by direction"])
def test_a_mixed_batch_equals_each_example_alone(adapters, grouped, monkeypatch):
    model = causal_lm(task_adapter_dim=adapters)
    perturb_adapters(model)
    model.group_mixed_batches = grouped
    groupings = []
    original = Routing.grouped
    monkeypatch.setattr(Routing, "grouped", lambda self: groupings.append(1) or original(self))
    inputs = lm_inputs()
    # adapters by direction read the source task too
    ids = dict(decoder_task_ids=DECODER_IDS, **(dict(encoder_task_ids=ENCODER_IDS) if adapters else {}))
    mixed = logits(model, inputs, **ids)
    assert len(groupings) == grouped  # grouped by task where the stock forward calls the decoder
    for index in range(4):
        alone = logits(model, {key: value[index : index + 1] for key, value in inputs.items()},
                       **{key: value[index : index + 1] for key, value in ids.items()})
        length = int(inputs["attention_mask"][index].sum())  # the padded positions' logits are not compared
        torch.testing.assert_close(mixed[index, :length], alone[0, :length])


@pytest.mark.parametrize("num_beams", [1, 2])
def test_generate_a_mixed_batch_equals_each_example_alone(num_beams):
    model = causal_lm()
    prompts = MARIAN.decoder_input_ids(length=2)
    kwargs = dict(max_new_tokens=5, min_new_tokens=5, num_beams=num_beams, do_sample=False)
    mixed = model.generate(prompts, decoder_task_ids=[DECODER_TASKS[i] for i in DECODER_IDS], **kwargs)
    for index in range(4):
        alone = model.generate(prompts[index : index + 1], decoder_task_ids=DECODER_IDS[index : index + 1], **kwargs)
        assert torch.equal(mixed[index : index + 1], alone)
    # the tasks matter: another task's heads generate otherwise for some example
    other = model.generate(prompts, decoder_task_ids=(DECODER_IDS + 1) % len(DECODER_TASKS), **kwargs)
    assert not torch.equal(other, mixed)
    # without the cache: the same tokens
    assert torch.equal(model.generate(prompts, decoder_task_ids=DECODER_IDS, use_cache=False, **kwargs), mixed)


@pytest.mark.filterwarnings("ignore:A custom logits processor")  # the stock assistant's own processors
def test_assisted_and_prompt_lookup_decoding_generate_what_greedy_does():
    """A stock causal LM drafts without task ids (it would refuse them); the head-selection model verifies each
    example's candidates with its own task's heads, so the tokens are greedy's, task by task."""
    model = causal_lm()
    seed_everything(5)
    draft = MarianForCausalLM(MARIAN.stock_config()).eval()
    prompts = MARIAN.decoder_input_ids(length=2)
    kwargs = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False)
    differs = False
    for index in range(4):  # assisted decoding takes one example at a time
        prompt, task = prompts[index : index + 1], DECODER_IDS[index : index + 1]
        greedy = model.generate(prompt, decoder_task_ids=task, **kwargs)
        assert torch.equal(model.generate(prompt, decoder_task_ids=task, assistant_model=draft, **kwargs), greedy)
        assert torch.equal(model.generate(prompt, decoder_task_ids=task, prompt_lookup_num_tokens=2, **kwargs), greedy)
        other = model.generate(prompt, decoder_task_ids=(task + 1) % len(DECODER_TASKS), **kwargs)
        differs |= not torch.equal(other, greedy)
    assert differs  # the tasks matter: a draft's tokens accepted regardless of the task would not pass


def encoder_decoder(decoder: HeadSelMarianForCausalLM) -> EncoderDecoderModel:
    """An `EncoderDecoderModel` of a stock Marian encoder (seeded) and `decoder`."""
    seed_everything(3)
    encoder = MarianModel(MARIAN.stock_config()).get_encoder()
    return EncoderDecoderModel(encoder=encoder, decoder=decoder).eval()


@pytest.mark.parametrize("cross_attention_task_key", ["decoder", "pair"])
def test_as_the_decoder_of_an_encoder_decoder_model(cross_attention_task_key):
    """`EncoderDecoderModel` hands `decoder_*` keywords on without the prefix: `decoder_task_ids` arrive as
    `task_ids`, and a pair-keyed cross-attention's source tasks are given as `decoder_encoder_task_ids`."""
    decoder = causal_lm(cross_attention_task_key=cross_attention_task_key)
    model = encoder_decoder(decoder)
    inputs, decoder_input_ids = MARIAN.inputs(), MARIAN.decoder_input_ids()
    source = {"encoder_task_ids": ENCODER_IDS} if cross_attention_task_key == "pair" else {}
    with torch.no_grad():
        got = model(**inputs, decoder_input_ids=decoder_input_ids, decoder_task_ids=DECODER_IDS,
                    **{f"decoder_{key}": value for key, value in source.items()}).logits
        encoder_hidden_states = model.encoder(**inputs).last_hidden_state
    expected = logits(decoder, dict(input_ids=decoder_input_ids, encoder_hidden_states=encoder_hidden_states,
                                    encoder_attention_mask=inputs["attention_mask"]), decoder_task_ids=DECODER_IDS,
                      **source)
    assert torch.equal(got, expected)
    # generation routes every example (and beam) by its task, as alone
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, num_beams=2, do_sample=False,
                  decoder_start_token_id=MARIAN.decoder_start_token_id, pad_token_id=MARIAN.pad_token_id)
    decoder_ids = {"decoder_task_ids": DECODER_IDS,
                   **{f"decoder_{key}": value for key, value in source.items()}}
    mixed = model.generate(**inputs, **decoder_ids, **kwargs)
    for index in range(4):
        alone = model.generate(**{key: value[index : index + 1] for key, value in {**inputs, **decoder_ids}.items()},
                               **kwargs)
        assert torch.equal(mixed[index : index + 1], alone)
    with pytest.raises(ValueError, match="pass the decoder task ids once"):
        decoder(MARIAN.decoder_input_ids(), decoder_task_ids=DECODER_IDS, task_ids=DECODER_IDS)


def test_encoder_decoder_model_training_says_that_a_weighted_kl_is_left_out_of_its_loss(monkeypatch):
    # the wrapper computes its loss from the logits and gives the decoder no labels: a weighted KL is not in it
    from hf_headsel import modeling_head_selection

    said = []
    monkeypatch.setattr(modeling_head_selection.logger, "warning_once", said.append)
    model = encoder_decoder(causal_lm(head_selection_kl_weight=0.5)).train()
    output = model(**MARIAN.inputs(), decoder_input_ids=MARIAN.decoder_input_ids(), labels=MARIAN.labels(),
                   decoder_task_ids=DECODER_IDS)
    assert output.loss is not None and len(said) == 1 and "EncoderDecoderModel's loss" in said[0]


def train_step(model, inputs: dict, checkpointing: bool = False):
    if checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    seed_everything(7)
    output = model(**inputs, labels=inputs["input_ids"], decoder_task_ids=DECODER_IDS)
    output.loss.backward()
    return output, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def test_training_adds_the_weighted_kl_and_trains_the_decoder_selectors():
    inputs = lm_inputs()
    without, _ = train_step(causal_lm(head_selection_kl_weight=0.0), inputs)
    weighted, grads = train_step(causal_lm(head_selection_kl_weight=0.5), inputs)  # the same Gumbel draw (seed)
    assert type(weighted) is HeadSelCausalLMOutput and weighted.head_selection_kl > 0
    torch.testing.assert_close(weighted.loss, without.loss + 0.5 * weighted.head_selection_kl)
    for component in DECODER_COMPONENTS:
        assert grads[f"head_selection.{component}.logits"].abs().sum() > 0, component
    # the stock tuple, the KL last
    model = causal_lm(head_selection_kl_weight=0.5)
    seed_everything(7)
    as_tuple = model.train()(**inputs, labels=inputs["input_ids"], decoder_task_ids=DECODER_IDS, return_dict=False)
    torch.testing.assert_close(as_tuple[0], weighted.loss)
    torch.testing.assert_close(as_tuple[-1], weighted.head_selection_kl)


def test_the_stock_trainer_steps_it_from_a_datasets_corpus_as_a_step_by_hand(tmp_path):
    # a `datasets` corpus with the decoder task of each text as a column, the stock LM collator and `Trainer`: the
    # Trainer keeps the column (the forward names it; without it the forward would ask for the ids) and its first SGD
    # step, KL included, leaves the weights that one step by hand on the collated batch leaves (SGD: Adam's first
    # step would turn the rounding noise of gradients that are zero in exact arithmetic, the key biases', into whole
    # steps). Without the sampling noise (an ablation the config allows), so that both steps select the same heads.
    from datasets import Dataset
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from test_pipelines import SOURCES, TEXTS, marian_tokenizer

    tokenizer = marian_tokenizer(tmp_path / "tokenizer")
    model = causal_lm(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, head_selection_kl_weight=0.5,
                      head_selection_noise_scale=0.0)
    by_hand, initial = copy.deepcopy(model), copy.deepcopy(model.state_dict())
    texts = [*SOURCES, *TEXTS[1:3]]
    corpus = Dataset.from_dict({"text": texts, "decoder_task_ids": [0, 1, 2, 1]})
    corpus = corpus.map(lambda row: tokenizer(row["text"]), remove_columns=["text"])
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=len(texts), max_steps=1,
                             learning_rate=0.1, max_grad_norm=0.0, optim="sgd", report_to=[],
                             use_cpu=True, disable_tqdm=True, save_strategy="no")
    Trainer(model=model, args=args, train_dataset=corpus, data_collator=collator).train()

    batch = collator([corpus[i] for i in range(len(texts))])
    assert batch["decoder_task_ids"].tolist() == [0, 1, 2, 1]
    optimizer = torch.optim.SGD(by_hand.parameters(), lr=0.1)
    output = by_hand.train()(**batch)
    assert output.head_selection_kl > 0
    output.loss.backward()
    optimizer.step()
    trained = dict(model.named_parameters())
    for name, parameter in by_hand.named_parameters():
        torch.testing.assert_close(trained[name], parameter, msg=name)
    for component in DECODER_COMPONENTS:  # the step moved the selectors (the KL and the loss reach them)
        name = f"head_selection.{component}.logits"
        assert not torch.equal(trained[name], initial[name]), name


def test_gradient_checkpointing_gives_the_same_loss_and_gradients():
    inputs = lm_inputs()
    plain, plain_grads = train_step(causal_lm(), inputs)
    checked, checked_grads = train_step(causal_lm(), inputs, checkpointing=True)
    torch.testing.assert_close(checked.loss, plain.loss)
    assert checked_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(checked_grads[name], grad, msg=name)


def test_only_decoder_components_select_and_the_source_task_is_asked_for_only_where_read():
    with pytest.raises(ValueError, match="selects heads in decoder_self or decoder_cross"):
        HeadSelMarianForCausalLM(MARIAN.config(head_selection_components=["encoder_self"]))
    model = causal_lm()  # two encoder tasks, no default: not needed by decoder-keyed layers
    inputs = lm_inputs()
    logits(model, inputs, decoder_task_ids=DECODER_IDS)
    with pytest.raises(ValueError, match="unknown keyword arguments \\['decoder_task_id'\\]"):
        logits(model, inputs, decoder_task_id=DECODER_IDS)
    with pytest.raises(ValueError, match="decoder_task_ids is required"):
        logits(model, inputs)
    paired = causal_lm(cross_attention_task_key="pair")
    with pytest.raises(ValueError, match="encoder_task_ids is required"):
        logits(paired, inputs, decoder_task_ids=DECODER_IDS)
    logits(paired, inputs, decoder_task_ids=DECODER_IDS, encoder_task_ids=ENCODER_IDS)


def test_pickles_and_deep_copies_computing_the_same():
    model = causal_lm(task_adapter_dim=4)
    perturb_adapters(model)
    inputs, ids = lm_inputs(), dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    expected = logits(model, inputs, **ids)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    for twin in (torch.load(buffer, weights_only=False), copy.deepcopy(model)):
        assert torch.equal(logits(twin, inputs, **ids), expected)


def test_sdpa_gives_eager_logits():
    # flex_attention runs the same attention class: tested on the translation model (tests/test_attention.py)
    model = causal_lm(attn_implementation="eager")
    expected = logits(model, lm_inputs(), decoder_task_ids=DECODER_IDS)
    model.set_attn_implementation("sdpa")
    torch.testing.assert_close(logits(model, lm_inputs(), decoder_task_ids=DECODER_IDS), expected)


def test_compiled_forward_and_generation_equal_eager(fresh_dynamo):
    model = causal_lm()
    inputs = lm_inputs()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(**inputs, decoder_task_ids=DECODER_IDS, use_cache=False).logits,
                                   logits(model, inputs, decoder_task_ids=DECODER_IDS, use_cache=False))
    prompts = MARIAN.decoder_input_ids(length=2)
    kwargs = dict(max_new_tokens=5, do_sample=False, decoder_task_ids=DECODER_IDS)
    expected = model.generate(prompts, **kwargs)
    generated = model.generate(prompts, **kwargs, cache_implementation="static", compile_config=compile_config())
    assert hasattr(model, "_compiled_call")  # generate did take the compiled forward
    assert torch.equal(generated, expected)


CHILD = """
    import torch
    import transformers

    torch.set_num_threads(1)  # as the tests' process (conftest): the same arithmetic, so the same bits
    model_dir, data_path, out_path = sys.argv[1:4]
    data = torch.load(data_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=True).eval()
    with torch.no_grad():
        logits = model(**data["inputs"], decoder_task_ids=data["ids"]).logits
    generated = model.generate(data["prompts"], decoder_task_ids=data["ids"], max_new_tokens=4, num_beams=2)
    assert "hf_headsel" not in sys.modules
    torch.save({"class": type(model).__name__, "module": type(model).__module__, "logits": logits,
                "generated": generated}, out_path)
"""


def test_saved_model_loads_with_the_auto_class_and_as_remote_code(tmp_path):
    model = causal_lm()
    path = tmp_path / "model"
    model.save_pretrained(path)
    loaded = AutoModelForCausalLM.from_pretrained(path, task="fr").eval()
    assert type(loaded) is HeadSelMarianForCausalLM and loaded.config.default_decoder_task == "fr"
    inputs = lm_inputs()
    expected = logits(model, inputs, decoder_task_ids=DECODER_IDS)
    assert torch.equal(logits(loaded, inputs, decoder_task_ids=DECODER_IDS), expected)
    assert torch.equal(logits(loaded, inputs), logits(model, inputs, decoder_task_ids=torch.full((4,), 1)))
    # in half precision the selectors stay in float32, choosing the same heads
    half = HeadSelMarianForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16 and half.head_selection["decoder_self"].logits.dtype == torch.float32
    assert all(torch.equal(heads, model.selected_heads()[name]) for name, heads in half.selected_heads().items())

    prompts = MARIAN.decoder_input_ids(length=2)
    data_path, out_path = tmp_path / "data.pt", tmp_path / "out.pt"
    torch.save(dict(inputs=inputs, ids=DECODER_IDS, prompts=prompts), data_path)
    result = run_without_hf_headsel(CHILD, [str(path), str(data_path), str(out_path)], tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    out = torch.load(out_path)
    assert out["class"] == "HeadSelMarianForCausalLM" and out["module"].startswith("transformers_modules")
    assert torch.equal(out["logits"], expected)
    assert torch.equal(out["generated"],
                       model.generate(prompts, decoder_task_ids=DECODER_IDS, max_new_tokens=4, num_beams=2))

