"""Export (one task -> a stock model) and upcycling (a stock checkpoint -> a head-selection model).

Equalities are exact in the math (the same rows of the same weights, multiplied the same way), so they are checked
with `torch.testing.assert_close` at its default tolerances. Each family of tests also shows that it can fail: the
tasks of the models used select different heads and produce different logits.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from huggingface_hub import ModelCard
from huggingface_hub import constants as hub_constants
from transformers import (
    AutoFeatureExtractor,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSpeechSeq2Seq,
    MarianConfig,
    MarianForCausalLM,
    MarianModel,
    MarianMTModel,
    MarianTokenizer,
    Speech2TextConfig,
    Speech2TextForConditionalGeneration,
    Speech2TextModel,
)
from transformers.utils import logging as hf_logging

from hf_headsel import (
    HeadSelMarianConfig,
    HeadSelMarianForCausalLM,
    HeadSelMarianModel,
    HeadSelMarianMTModel,
    HeadSelSpeech2TextConfig,
    HeadSelSpeech2TextForConditionalGeneration,
    HeadSelSpeech2TextModel,
)
from hf_headsel.attention import PROJECTIONS
from hf_headsel.conversion import (
    HEAD_SELECTION_CONFIG_KEYS,
    export_task_model,
    from_stock,
    head_rows,
    is_head_selection_model_class,
    resolve_export_tasks,
    stock_model_class,
)
from hf_headsel.configuration_head_selection import HeadSelectionConfigMixin, is_head_selection_config
from hf_headsel.model_card import write_model_card
from hf_headsel.model_folder import prepare_model_folder
from hf_headsel.selection import LOGIT_INIT_RANGE

from test_pipelines import marian_tokenizer, speech_processor  # noqa: E402

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")  # MarianTokenizer's hint

ROOT = Path(__file__).resolve().parents[1]
HEADS, HEAD_DIM, LAYERS, VOCAB = 4, 4, 2, 40
ENCODER_TASKS, DECODER_TASKS = ["en", "de"], ["de", "fr", "it"]
ALL_COMPONENTS = ["encoder_self", "decoder_self", "decoder_cross"]

COMMON = dict(
    vocab_size=VOCAB, d_model=HEADS * HEAD_DIM, encoder_layers=LAYERS, decoder_layers=LAYERS,
    encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=32, decoder_ffn_dim=32,
    dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, init_std=0.5,
)
FAMILIES = {
    "marian": dict(
        config=HeadSelMarianConfig, model=HeadSelMarianMTModel, stock_config=MarianConfig, stock_model=MarianMTModel,
        kwargs=dict(COMMON, max_position_embeddings=64, pad_token_id=VOCAB - 1, eos_token_id=0,
                    decoder_start_token_id=VOCAB - 1, forced_eos_token_id=0),
    ),
    "speech_to_text": dict(
        config=HeadSelSpeech2TextConfig, model=HeadSelSpeech2TextForConditionalGeneration,
        stock_config=Speech2TextConfig, stock_model=Speech2TextForConditionalGeneration,
        kwargs=dict(COMMON, input_feat_per_channel=8, input_channels=1, conv_channels=16, conv_kernel_sizes=(5, 5),
                    num_conv_layers=2, max_source_positions=32, max_target_positions=32, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2, decoder_start_token_id=2),
    ),
}
# Selection settings covering every strategy, every component and every cross-attention key.
SELECTIONS = {
    "group-decoder": dict(head_selection_strategy="group", head_selection_components=ALL_COMPONENTS),
    "group-pair": dict(head_selection_strategy="group", head_selection_components=ALL_COMPONENTS,
                       cross_attention_task_key="pair", total_decoder_attention_heads=3 * HEADS),
    "subset-encoder": dict(head_selection_strategy="subset", head_selection_components=ALL_COMPONENTS,
                           cross_attention_task_key="encoder", total_encoder_attention_heads=6,
                           total_decoder_attention_heads=7),
    "subset-pair": dict(head_selection_strategy="subset", head_selection_components=ALL_COMPONENTS,
                        cross_attention_task_key="pair"),
    "task_specific-decoder": dict(head_selection_strategy="task_specific", head_selection_components=ALL_COMPONENTS),
    "task_specific-pair": dict(head_selection_strategy="task_specific", head_selection_components=["encoder_self",
                               "decoder_cross"], cross_attention_task_key="pair"),
}
TASKS = dict(encoder_tasks=ENCODER_TASKS, decoder_tasks=DECODER_TASKS)


@pytest.fixture(params=list(FAMILIES))
def family(request) -> dict:
    return {"name": request.param, **FAMILIES[request.param]}


def headsel_model(family: dict, seed: int = 0, **overrides):
    """A seeded head-selection model in eval mode whose selector logits are spread (tasks pick different heads)."""
    torch.manual_seed(seed)
    model = family["model"](family["config"](**{**family["kwargs"], **TASKS, **overrides})).eval()
    with torch.no_grad():
        for selector in model.head_selection.values():
            if selector.logits is not None:
                selector.logits.normal_(std=3.0)
    return model


def stock_model(family: dict, seed: int = 0):
    torch.manual_seed(seed)
    return family["stock_model"](family["stock_config"](**family["kwargs"])).eval()


def model_inputs(family: dict, batch_size: int = 3) -> dict:
    """Encoder inputs (the last example padded) and decoder inputs."""
    generator = torch.Generator().manual_seed(7)
    if family["name"] == "marian":
        inputs = {"input_ids": torch.randint(1, VOCAB - 1, (batch_size, 6), generator=generator),
                  "attention_mask": torch.ones(batch_size, 6, dtype=torch.long)}
        inputs["attention_mask"][-1, 4:] = 0
    else:
        inputs = {"input_features": torch.randn(batch_size, 20, 8, generator=generator),
                  "attention_mask": torch.ones(batch_size, 20, dtype=torch.long)}
        inputs["attention_mask"][-1, 12:] = 0
    inputs["decoder_input_ids"] = torch.randint(3, VOCAB - 1, (batch_size, 5), generator=generator)
    return inputs


def logits(model, inputs: dict, encoder_task: int | None = None, decoder_task: int | None = None) -> torch.Tensor:
    """Logits with every example routed to the given tasks (stock models take no task ids)."""
    batch_size = inputs["decoder_input_ids"].shape[0]
    routes = {}
    if encoder_task is not None:
        routes["encoder_task_ids"] = torch.full((batch_size,), encoder_task)
    if decoder_task is not None:
        routes["decoder_task_ids"] = torch.full((batch_size,), decoder_task)
    with torch.no_grad():
        return model(**inputs, **routes).logits


# --------------------------------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("selection", list(SELECTIONS))
def test_export_matches_every_direction(family, selection):
    model = headsel_model(family, **SELECTIONS[selection])
    inputs = model_inputs(family)
    stock_class = family["stock_model"]
    per_direction = {}
    for (e, encoder_task), (d, decoder_task) in itertools.product(enumerate(ENCODER_TASKS), enumerate(DECODER_TASKS)):
        exported = export_task_model(model, encoder_task=encoder_task, decoder_task=decoder_task)
        assert type(exported) is stock_class
        assert not exported.training
        expected = logits(model, inputs, e, d)
        torch.testing.assert_close(logits(exported, inputs), expected)
        per_direction[(e, d)] = expected
    # the equality is not vacuous: directions use different heads and give different logits
    distinct = {tuple(v.flatten()[:8].tolist()) for v in per_direction.values()}
    assert len(distinct) > 1


def test_export_copies_selected_rows_in_slot_order(family):
    model = headsel_model(family, **SELECTIONS["subset-pair"])
    exported = export_task_model(model, encoder_task="de", decoder_task="it")
    pair_row = 1 * len(DECODER_TASKS) + 2
    for component, name, row in (("encoder_self", "model.encoder.layers.1.self_attn", 1),
                                 ("decoder_self", "model.decoder.layers.0.self_attn", 2),
                                 ("decoder_cross", "model.decoder.layers.1.encoder_attn", pair_row)):
        layer = int(name.split(".")[3])
        heads = model.selected_heads()[component][row, layer]
        rows = head_rows(heads, HEAD_DIM)
        source, target = model.get_submodule(name), exported.get_submodule(name)
        for projection in PROJECTIONS:
            torch.testing.assert_close(getattr(target, projection).weight, getattr(source, projection).weight[rows])
            torch.testing.assert_close(getattr(target, projection).bias, getattr(source, projection).bias[rows])
        torch.testing.assert_close(target.out_proj.weight, source.out_proj.weight)
        assert getattr(target, "q_proj").weight.shape == (HEADS * HEAD_DIM, HEADS * HEAD_DIM)


def test_export_refuses_projections_it_cannot_slice_until_merged(family):
    """A q/k/v projection replaced by another module (here PEFT's LoRA) has no weight rows to copy: a clear error
    that says how to merge; merged (`merge_and_unload`), the export equals the model for its task."""
    peft = pytest.importorskip("peft")
    model = headsel_model(family, **SELECTIONS["group-decoder"])
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False))
    with pytest.raises(ValueError, match=r"project through other modules .*merge_and_unload\(\)"):
        export_task_model(lora.base_model.model, encoder_task="de", decoder_task="it")
    merged = lora.merge_and_unload().eval()
    inputs = model_inputs(family)
    torch.testing.assert_close(logits(export_task_model(merged, encoder_task="de", decoder_task="it"), inputs),
                               logits(merged, inputs, 1, 2))


def test_export_task_resolution(family):
    model = headsel_model(family, **SELECTIONS["group-decoder"])
    inputs = model_inputs(family)
    # "de" is a task of both sides: task="de" means encoder "de" and decoder "de"
    torch.testing.assert_close(logits(export_task_model(model, "de"), inputs), logits(model, inputs, 1, 0))
    # explicit sides win over task=
    torch.testing.assert_close(logits(export_task_model(model, "de", decoder_task="it"), inputs),
                               logits(model, inputs, 1, 2))
    with pytest.raises(ValueError, match="needs the encoder task"):
        export_task_model(model, decoder_task="fr")  # two encoder tasks, no default
    with pytest.raises(ValueError, match="unknown task 'xx'"):
        export_task_model(model, "xx")
    with pytest.raises(ValueError, match="unknown decoder task 'en'"):
        export_task_model(model, encoder_task="en", decoder_task="en")
    model.set_default_task(encoder_task="en")
    torch.testing.assert_close(logits(export_task_model(model, decoder_task="fr"), inputs), logits(model, inputs, 0, 1))
    # a default only fills a side left open: a side named explicitly keeps its task
    torch.testing.assert_close(logits(export_task_model(model, encoder_task="de", decoder_task="fr"), inputs),
                               logits(model, inputs, 1, 1))
    assert not torch.allclose(logits(model, inputs, 1, 1), logits(model, inputs, 0, 1))  # the default's differs


def test_export_pair_key_needs_the_direction(family):
    model = headsel_model(family, **SELECTIONS["task_specific-pair"], default_decoder_task="fr")
    # cross-attention keyed by the pair: the decoder default alone does not make a direction
    with pytest.raises(ValueError, match="needs the encoder task"):
        export_task_model(model)
    assert resolve_export_tasks(model.config, "en") == {"encoder": "en", "decoder": "fr"}


def test_export_only_needs_the_sides_that_select(family):
    model = headsel_model(family, head_selection_components=["decoder_self"])
    inputs = model_inputs(family)
    # the encoder does not select: any encoder task computes the same, no encoder task is needed
    exported = export_task_model(model, decoder_task="it")
    torch.testing.assert_close(logits(exported, inputs), logits(model, inputs, 0, 2))
    torch.testing.assert_close(logits(exported, inputs), logits(model, inputs, 1, 2))


def test_exported_model_loads_with_stock_transformers(family, tmp_path):
    model = headsel_model(family, **SELECTIONS["group-pair"])
    inputs = model_inputs(family)
    # exported from a published folder, whose config names its remote code (auto_map) and its pipelines
    # (custom_pipelines): a stock folder names neither (stock Transformers would look for code it does not have)
    model.save_pretrained(tmp_path / "headsel")
    prepare_model_folder(tmp_path / "headsel")
    published = family["model"].from_pretrained(tmp_path / "headsel")
    assert {"auto_map", "custom_pipelines"} <= published.config.to_dict().keys()
    export_task_model(published, encoder_task="en", decoder_task="fr").save_pretrained(tmp_path / "stock")
    config = json.loads((tmp_path / "stock" / "config.json").read_text())
    assert config["model_type"] == family["stock_config"].model_type
    assert "auto_map" not in config and "custom_pipelines" not in config
    assert not [key for key in config if "head_selection" in key or key.endswith("_tasks")]
    assert not list((tmp_path / "stock").glob("*.py"))
    reloaded = family["stock_model"].from_pretrained(tmp_path / "stock")
    assert type(reloaded) is family["stock_model"]
    torch.testing.assert_close(logits(reloaded, inputs), logits(model, inputs, 0, 1))


def test_export_rejects_stock_models(family):
    with pytest.raises(ValueError, match="needs a head-selection generation model, got (Marian|Speech2Text)"):
        export_task_model(stock_model(family), "en")


def test_export_and_upcycling_refuse_base_models_naming_the_generation_model(family):
    # the weight names are the generation model's: from_stock failed with a size-mismatch traceback
    base_class = {"marian": HeadSelMarianModel, "speech_to_text": HeadSelSpeech2TextModel}[family["name"]]
    stock_base = {"marian": MarianModel, "speech_to_text": Speech2TextModel}[family["name"]]
    hint = "a base model without the LM head: use the family's generation model"
    with pytest.raises(ValueError, match=f"from_stock needs a head-selection generation model class, got "
                                         f"{base_class.__name__} \\({hint}"):
        from_stock(base_class, stock_base(family["stock_config"](**family["kwargs"])), **TASKS)
    base = base_class(family["config"](**family["kwargs"], **TASKS))
    with pytest.raises(ValueError, match=f"needs a head-selection generation model, got {base_class.__name__} \\({hint}"):
        export_task_model(base, encoder_task="en", decoder_task="de")


# --------------------------------------------------------------------------------------------------------------------
# Upcycling
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("selection", list(SELECTIONS))
def test_from_stock_equals_stock_for_every_task(family, selection):
    stock = stock_model(family)
    inputs = model_inputs(family, batch_size=4)
    model = from_stock(family["model"], stock, **TASKS, **SELECTIONS[selection])
    assert type(model) is family["model"] and not model.training
    expected = logits(stock, inputs)
    for e, d in itertools.product(range(len(ENCODER_TASKS)), range(len(DECODER_TASKS))):
        torch.testing.assert_close(logits(model, inputs, e, d), expected)
    mixed = {"encoder_task_ids": torch.tensor([0, 1, 1, 0]), "decoder_task_ids": torch.tensor([2, 0, 1, 1])}
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs, **mixed).logits, expected)


def test_from_stock_tiles_heads_and_initialises_fresh_logits(family):
    stock = stock_model(family)
    model = from_stock(family["model"], stock, **TASKS, **SELECTIONS["group-decoder"])
    name = "model.decoder.layers.1.encoder_attn"
    stock_attention, attention = stock.get_submodule(name), model.get_submodule(name)
    assert attention.q_proj.weight.shape[0] == 2 * HEADS * HEAD_DIM
    for projection in PROJECTIONS:
        torch.testing.assert_close(getattr(attention, projection).weight,
                                   getattr(stock_attention, projection).weight.repeat(2, 1))
        torch.testing.assert_close(getattr(attention, projection).bias,
                                   getattr(stock_attention, projection).bias.repeat(2))
    torch.testing.assert_close(attention.out_proj.weight, stock_attention.out_proj.weight)
    for selector in model.head_selection.values():
        low, high = LOGIT_INIT_RANGE
        assert selector.logits.min() >= low and selector.logits.max() <= high
        assert selector.logits.std() > 0.1  # fresh uniform draws, not a constant
    # not reordered as subset's are (the outputs are exact whatever a group selects): the tasks start from different
    # choices, which reordered logits would make the same for every task
    heads = model.selected_heads()["decoder_self"]
    assert len({tuple(heads[task].flatten().tolist()) for task in range(len(DECODER_TASKS))}) > 1


def test_from_stock_subset_makes_the_first_heads_win(family):
    stock = stock_model(family)
    inputs = model_inputs(family)
    model = from_stock(family["model"], stock, **TASKS, **SELECTIONS["subset-encoder"])
    for component, heads in model.selected_heads().items():
        assert torch.equal(heads, torch.arange(HEADS).expand_as(heads)), component
    # Why the reordering is needed: another selected set fills the slots with other stock heads.
    with torch.no_grad():
        logits_ = model.head_selection["encoder_self"].logits
        logits_[..., 0] = -10.0
    assert not torch.allclose(logits(model, inputs, 0, 0), logits(stock, inputs), atol=1e-3)


def test_from_stock_round_trips_through_export(family):
    stock = stock_model(family)
    model = from_stock(family["model"], stock, **TASKS, **SELECTIONS["group-pair"])
    exported = export_task_model(model, encoder_task="de", decoder_task="it")
    expected = stock.state_dict()
    for key, value in exported.state_dict().items():
        torch.testing.assert_close(value, expected[key], msg=key)


def test_from_stock_and_export_carry_the_generation_config(family):
    stock = stock_model(family)
    stock.generation_config.update(num_beams=3, max_length=17, bad_words_ids=[[5]])
    model = from_stock(family["model"], stock, **TASKS)
    assert model.generation_config.to_dict() == stock.generation_config.to_dict()
    model.generation_config.update(num_beams=2, no_repeat_ngram_size=2)
    exported = export_task_model(model, encoder_task="de", decoder_task="it")
    assert exported.generation_config.to_dict() == model.generation_config.to_dict()
    assert exported.generation_config is not model.generation_config  # a copy: editing one leaves the other


def test_from_stock_loads_a_stock_checkpoint(family, tmp_path, hub_cache):
    stock = stock_model(family)
    stock.save_pretrained(tmp_path / "stock")
    model = from_stock(family["model"], tmp_path / "stock", **TASKS)
    inputs = model_inputs(family)
    torch.testing.assert_close(logits(model, inputs, 1, 2), logits(stock, inputs))
    assert model.config.model_type == family["config"].model_type
    assert stock_model_class(model) is family["stock_model"]
    # a Hub id read from a cache folder of one's own (offline: nothing downloaded)
    cache = hub_cache(stock, "me/stock")
    cached = family["model"].from_stock("me/stock", from_pretrained_kwargs={"cache_dir": cache}, **TASKS)
    torch.testing.assert_close(logits(cached, inputs, 1, 2), logits(stock, inputs))


def test_a_head_selection_class_is_recognised_whichever_copy_of_the_config_module_made_it(family, monkeypatch):
    """Remote code imports `configuration_head_selection` once for `AutoConfig` and once for the model classes, as two
    modules: a class whose config comes from the other copy is still a head-selection class (and a stock one is not)."""
    path = ROOT / "src" / "hf_headsel" / "configuration_head_selection.py"  # it imports only the standard library
    spec = importlib.util.spec_from_file_location("configuration_head_selection_other_copy", path)
    other = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, other)  # its dataclasses look their module up there
    spec.loader.exec_module(other)
    assert other.HeadSelectionConfigMixin is not HeadSelectionConfigMixin
    other_config = type("OtherConfig", (other.HeadSelectionConfigMixin, family["stock_config"]), {})
    other_model = type("OtherModel", (family["model"],), {"config_class": other_config})
    assert is_head_selection_config(other_config) and is_head_selection_model_class(other_model)
    assert stock_model_class(other_model) is family["stock_model"]
    assert not is_head_selection_config(family["stock_config"]) and not is_head_selection_model_class(
        family["stock_model"])


def test_from_stock_rules(family, tmp_path):
    stock = stock_model(family)
    with pytest.raises(ValueError, match="only head-selection keywords.*'d_model'"):
        from_stock(family["model"], stock, d_model=32)
    headsel = headsel_model(family)
    with pytest.raises(ValueError, match="needs a stock"):
        from_stock(family["model"], headsel)
    with pytest.raises(ValueError, match=r"from_pretrained_kwargs \['cache_dir'\] load a stock checkpoint from a path"):
        from_stock(family["model"], stock, from_pretrained_kwargs={"cache_dir": tmp_path}, **TASKS)
    headsel.save_pretrained(tmp_path / "headsel")
    with pytest.raises(ValueError, match="is a 'headsel_.*' one"):
        from_stock(family["model"], tmp_path / "headsel")
    with pytest.raises(ValueError, match="the task_specific strategy needs"):
        from_stock(family["model"], stock, **TASKS, head_selection_strategy="task_specific",
                   total_decoder_attention_heads=8, head_selection_components=["decoder_self"])
    # stock weights the head-selection model has no place for: refused, not silently dropped
    stock.model.encoder.extra_projection = torch.nn.Linear(4, 4)
    with pytest.raises(RuntimeError, match=r"stock weights do not match .*unexpected \['model\.encoder\.extra_proj"):
        from_stock(family["model"], stock, **TASKS)


def test_task_adapters_upcycle_exactly_but_do_not_export(family):
    if "task_adapter_dim" not in HEAD_SELECTION_CONFIG_KEYS:
        pytest.skip("this version has no task adapters")
    stock = stock_model(family)
    inputs = model_inputs(family)
    model = from_stock(family["model"], stock, **TASKS, task_adapter_dim=8)
    torch.testing.assert_close(logits(model, inputs, 1, 2), logits(stock, inputs))  # fresh adapters are identities
    with pytest.raises(ValueError, match="cannot export a model with task adapters"):
        export_task_model(model, encoder_task="en", decoder_task="fr")


def test_from_stock_and_export_keep_the_dtype(family):
    stock = stock_model(family).to(torch.float64)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # float64 weights that float32 cannot hold, as float64 training makes them
        for parameter in stock.parameters():
            parameter.add_(1e-3 * torch.randn(parameter.shape, generator=generator, dtype=torch.float64))
    model = from_stock(family["model"], stock, **TASKS)
    assert model.dtype == torch.float64
    copied = "model.decoder.layers.0.fc1.weight"  # copied as it is both ways (a float32 round trip rounded it)
    assert torch.equal(model.get_parameter(copied), stock.get_parameter(copied))
    inputs = model_inputs(family)
    if "input_features" in inputs:
        inputs["input_features"] = inputs["input_features"].double()
    torch.testing.assert_close(logits(model, inputs, 0, 1), logits(stock, inputs))
    # and back: the export is on the model's dtype too (a stock model is built in the default float32)
    exported = export_task_model(model, encoder_task="de", decoder_task="it")
    assert exported.dtype == torch.float64
    assert torch.equal(exported.get_parameter(copied), stock.get_parameter(copied))
    torch.testing.assert_close(logits(exported, inputs), logits(model, inputs, 1, 2))


# --------------------------------------------------------------------------------------------------------------------
# Command line: training/export_task_models.py
# --------------------------------------------------------------------------------------------------------------------


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "training" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_cli_writes_one_stock_folder_per_task(tmp_path):
    family = {"name": "marian", **FAMILIES["marian"]}
    # trained with --target_lang_token: the cards' examples must start with each folder's `>>xx<<`
    tokenizer = marian_tokenizer(tmp_path / "spm", symbols=(">>fr<<", ">>it<<"))
    model = headsel_model(family, encoder_tasks=["en"], decoder_tasks=["fr", "it"],
                          head_selection_components=ALL_COMPONENTS, vocab_size=len(tokenizer), pad_token_id=2,
                          decoder_start_token_id=2, eos_token_id=0, forced_eos_token_id=0)
    source = tmp_path / "source"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    # the recipe keys translation scores by direction: the folders, labelled by decoder task, find theirs
    (source / "all_results.json").write_text(json.dumps({"eval_bleu": 11.0, "eval_bleu_en-fr": 12.5,
                                                         "eval_bleu_en-it": 9.5}))

    script = load_script("export_task_models")
    folders = script.main([str(source), str(tmp_path / "exported"), "--source_name", "me/mt-headsel"])

    assert sorted(folder.name for folder in folders) == ["fr", "it"]
    text = tokenizer(["the cat sat", "hello world"], return_tensors="pt", padding=True)
    for decoder_id, folder in enumerate(sorted(folders)):
        reloaded = AutoModelForSeq2SeqLM.from_pretrained(folder)  # stock Auto class, no remote code
        assert type(reloaded) is MarianMTModel
        decoder_input_ids = torch.tensor([[2, 5, 6], [2, 7, 8]])
        with torch.no_grad():
            expected = model(**text, decoder_input_ids=decoder_input_ids,
                             decoder_task_ids=torch.tensor([decoder_id] * 2)).logits
            torch.testing.assert_close(reloaded(**text, decoder_input_ids=decoder_input_ids).logits, expected)
        assert MarianTokenizer.from_pretrained(folder)("the cat sat").input_ids == tokenizer("the cat sat").input_ids
        card = (folder / "README.md").read_text()
        assert f"decoder task `{folder.name}`" in card and "me/mt-headsel" in card
        assert {"fr": "12.50", "it": "9.50"}[folder.name] in card
        assert f'tokenizer([">>{folder.name}<< The cat sat on the mat."]' in card
    with pytest.raises(ValueError, match="unknown directions"):
        script.export_targets(model.config, directions=["en-de"])
    assert [label for label, _ in script.export_targets(model.config, directions=["all"])] == ["en-fr", "en-it"]
    with pytest.raises(ValueError, match=r"--tasks en: .en. names the encoder task only, .* per decoder task .* by direction, --directions en-fr en-it"):
        script.export_targets(model.config, tasks=["en"])  # names the encoder only: the decoder task is open
    with pytest.raises(ValueError, match=r"--tasks xx: no such task \(the encoder tasks are \['en'\]"):
        script.export_targets(model.config, tasks=["xx"])
    # each folder once; 'all' means every direction wherever it stands (it was an unknown direction beside another)
    assert script.export_targets(model.config, tasks=["fr", "fr"]) == [("fr", {"encoder": "en", "decoder": "fr"})]
    assert [label for label, _ in script.export_targets(model.config, directions=["en-it", "en-it"])] == ["en-it"]
    assert [label for label, _ in script.export_targets(model.config, directions=["en-it", "all"])] == [
        "en-fr", "en-it"]
    with pytest.raises(ValueError, match="holds a 'marian' model, not a head-selection one"):
        script.main([str(folders[0]), str(tmp_path / "again")])
    with pytest.raises(SystemExit):  # argparse's error: the cards' ids need a namespace
        script.main([str(source), str(tmp_path / "x"), "--push_to_hub", "--hub_prefix", "mt-headsel"])
    for upload_flags in (["--hub_prefix", "me/mt-headsel"], ["--private"]):  # without --push_to_hub: ignored before
        with pytest.raises(SystemExit):
            script.main([str(source), str(tmp_path / "x"), *upload_flags])
    assert not (tmp_path / "x").exists()


def test_export_cli_pushes_each_folder_private_to_the_repository_its_card_names(tmp_path, hub, monkeypatch):
    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    family = {"name": "marian", **FAMILIES["marian"]}
    headsel_model(family, encoder_tasks=["en"], decoder_tasks=["fr", "it"]).save_pretrained(tmp_path / "source")
    load_script("export_task_models").main([str(tmp_path / "source"), str(tmp_path / "exported"), "--source_name",
                                            "me/mt-headsel", "--push_to_hub", "--hub_prefix", "me/mt", "--private"])
    assert hub.errors == [] and [payload.get("visibility") for payload in hub.created] == ["private", "private"]
    assert [commit["repo_id"] for commit in hub.commits] == ["me/mt-fr", "me/mt-it"]
    for commit in hub.commits:
        card = commit["files"]["README.md"].decode()
        # its own repository in the examples, and its source by Hub id, not by the folder it was exported from
        assert f'from_pretrained("{commit["repo_id"]}"' in card and "`me/mt-headsel`" in card
        assert str(tmp_path) not in card


def test_export_cli_writes_a_stock_causal_lm_folder_per_decoder_task(tmp_path):
    # the decoder alone exports as stock MarianForCausalLM folders with text-generation cards; the prompts of those
    # cards carry no target-language token, even where the tokenizer holds some (the model continues its prompt)
    tokenizer = marian_tokenizer(tmp_path / "spm", symbols=(">>fr<<", ">>it<<"))
    family = {"name": "marian", **FAMILIES["marian"], "model": HeadSelMarianForCausalLM}
    model = headsel_model(family, encoder_tasks=["en"], decoder_tasks=["fr", "it"], vocab_size=len(tokenizer),
                          pad_token_id=2, decoder_start_token_id=2)
    source = tmp_path / "source"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)

    folders = load_script("export_task_models").main([str(source), str(tmp_path / "exported")])

    assert [folder.name for folder in folders] == ["fr", "it"]
    prompt = tokenizer(["the cat sat"], return_tensors="pt").input_ids
    with torch.no_grad():
        expected = [model(prompt, decoder_task_ids=torch.tensor([task])).logits for task in (0, 1)]
    assert not torch.allclose(*expected)  # otherwise folders of the wrong task would pass
    for task, folder in enumerate(folders):
        reloaded = AutoModelForCausalLM.from_pretrained(folder)  # stock Auto class, no remote code
        assert type(reloaded) is MarianForCausalLM
        with torch.no_grad():
            torch.testing.assert_close(reloaded(prompt).logits, expected[task])
        card = ModelCard.load(folder / "README.md")
        assert card.data.pipeline_tag == "text-generation" and "MarianForCausalLM.from_pretrained" in card.text
        assert f"**decoder task `{folder.name}`**" in card.text and "only the 4 decoder heads" in card.text
        assert ">>" not in card.text


def test_export_cli_refuses_tasks_and_directions_together(tmp_path, capsys):
    family = {"name": "marian", **FAMILIES["marian"]}
    headsel_model(family, encoder_tasks=["en"], decoder_tasks=["fr", "it"]).save_pretrained(tmp_path / "source")
    with pytest.raises(SystemExit) as exit_info:
        load_script("export_task_models").main([str(tmp_path / "source"), str(tmp_path / "exported"), "--tasks", "fr",
                                                "--directions", "en-fr"])
    assert exit_info.value.code == 2
    assert "error: --tasks and --directions are exclusive" in capsys.readouterr().err
    assert not (tmp_path / "exported").exists()


@pytest.mark.parametrize("results, warned", [
    ({"eval_bleu": 11.0}, True),  # the mean only: no folder finds its own scores
    (None, False),  # no results at all: nothing to say
], ids=["mean-only", "no-results"])
def test_export_cli_says_when_the_source_results_hold_no_scores_of_a_folder(tmp_path, caplog, results, warned):
    family = {"name": "marian", **FAMILIES["marian"]}
    source = tmp_path / "source"
    headsel_model(family, encoder_tasks=["en"], decoder_tasks=["fr", "it"]).save_pretrained(source)
    if results is not None:
        (source / "all_results.json").write_text(json.dumps(results))
    with caplog.at_level(logging.WARNING, logger="export_task_models"):
        folders = load_script("export_task_models").main([str(source), str(tmp_path / "exported")])
    said = [message for message in caplog.messages if "results hold no scores" in message]
    assert said == ([f"{task}: the source's results hold no scores of {task} or en-{task}; its card shows none"
                     for task in ("fr", "it")] if warned else [])
    assert [ModelCard((folder / "README.md").read_text()).data.eval_results for folder in folders] == [None, None]


def test_export_cli_writes_speech_folders_with_the_processor(tmp_path):
    processor = speech_processor(tmp_path / "spm")
    family = {"name": "speech_to_text", **FAMILIES["speech_to_text"]}
    source = tmp_path / "source"
    headsel_model(family, encoder_tasks=["es", "fr"], decoder_tasks=["es", "fr"],
                  vocab_size=len(processor.tokenizer)).save_pretrained(source)
    processor.save_pretrained(source)
    folders = load_script("export_task_models").main([str(source), str(tmp_path / "exported")])
    assert [folder.name for folder in folders] == ["es", "fr"]  # speech recognition: one folder per language
    for folder in folders:
        assert type(AutoModelForSpeechSeq2Seq.from_pretrained(folder)) is Speech2TextForConditionalGeneration
        # the processor, not only its tokenizer: the folder turns audio into features
        assert AutoFeatureExtractor.from_pretrained(folder).feature_size == 8


@pytest.mark.parametrize("task_type", ["lang", "domain"])
def test_export_cli_default_targets_of_the_same_tasks_on_both_sides(family, task_type):
    # the same tasks on both sides: one folder per task for domains or speech recognition; a text model in the lang
    # setting translates between its languages (its de-de "task" was never trained), one folder per direction
    tasks = ["en", "de", "fr"]
    config = family["config"](**{**family["kwargs"], "encoder_tasks": tasks, "decoder_tasks": tasks,
                                 "task_type": task_type})
    targets = load_script("export_task_models").export_targets(config)
    if task_type == "lang" and family["name"] == "marian":
        assert [label for label, _ in targets] == [f"{e}-{d}" for e in tasks for d in tasks]
    else:
        assert targets == [(task, {"encoder": task, "decoder": task}) for task in tasks]


def test_export_cli_default_target_of_one_task_per_side_is_named_by_its_decoder_task(family):
    config = family["config"](**family["kwargs"], encoder_tasks=["en"], decoder_tasks=["fr"])
    assert load_script("export_task_models").export_targets(config) == [("fr", {"encoder": "en", "decoder": "fr"})]


def test_model_methods_wrap_export_and_upcycling(family):
    stock = stock_model(family)
    model = family["model"].from_stock(stock, **TASKS, **SELECTIONS["group-pair"])
    assert type(model) is family["model"]
    inputs = model_inputs(family)
    torch.testing.assert_close(logits(model, inputs, 1, 2), logits(stock, inputs))
    exported = model.export_task_model(encoder_task="de", decoder_task="it")
    torch.testing.assert_close(logits(exported, inputs), logits(model, inputs, 1, 2))
