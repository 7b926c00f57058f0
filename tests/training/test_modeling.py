"""How the recipes build the model they train (`headsel_recipes/modeling.py`)."""

from __future__ import annotations

import re

import pytest
import torch
from recipe_testkit import TINY_MARIAN, tiny_flags
from transformers import BertConfig, MarianConfig, MarianMTModel

from headsel_recipes import run
from headsel_recipes.arguments import HeadSelectionArguments, ModelArguments
from headsel_recipes.modeling import (
    average_checkpoints,
    build_model,
    freeze_sinusoidal_positions,
    load_averaged_weights,
)
from headsel_recipes.tasks import ASR, MT, ST
from headsel_recipes.tokenizer import has_tokenizer
from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel


def position_tables(model) -> dict[str, torch.nn.Parameter]:
    return {name: parameter for name, parameter in model.named_parameters() if "embed_positions" in name}


def test_freezing_the_position_tables_of_a_loaded_checkpoint(tmp_path):
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    loaded = MarianMTModel.from_pretrained(tmp_path)
    # what makes it needed: a table loaded by `from_pretrained` requires gradients (and gets them from 5.24)
    assert all(parameter.requires_grad for parameter in position_tables(loaded).values())
    assert sorted(freeze_sinusoidal_positions(loaded)) == sorted(position_tables(loaded))
    assert not any(parameter.requires_grad for parameter in position_tables(loaded).values())
    assert freeze_sinusoidal_positions(loaded) == []  # nothing left to freeze


def test_the_shared_baseline_and_the_upcycled_model_train_the_same_kinds_of_parameters(tmp_path):
    """Both systems of a comparison start from one stock checkpoint: neither trains the fixed position tables."""
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    trainable = {}
    for shared in (True, False):
        model = build_model(MT, ModelArguments(model_name_or_path=str(tmp_path), shared_baseline=shared),
                            HeadSelectionArguments(), None, ["en"], ["de", "fr"])
        model.train()
        ids = {} if shared else {"decoder_task_ids": torch.tensor([0, 1])}
        model(input_ids=torch.tensor([[5, 6, 1], [7, 1, 0]]), labels=torch.tensor([[5, 1], [6, 1]]), **ids).loss.backward()
        assert all(parameter.grad is None for parameter in position_tables(model).values())
        trainable[shared] = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    # head selection adds its selection logits and candidate heads; it trains every parameter the baseline trains
    assert trainable[True] <= trainable[False]


TINY_OVERRIDES = ("d_model=16,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,decoder_attention_heads=2,"
                  "encoder_ffn_dim=32,decoder_ffn_dim=32")
TASKS = dict(encoder_tasks=["en"], decoder_tasks=["de", "fr"])


class TinyTokenizer:
    """What `build_model` reads of a tokenizer: its length and special ids (all different, to tell them apart)."""

    pad_token_id, eos_token_id, bos_token_id = 0, 1, 2

    def __len__(self) -> int:
        return 40


def build(path=None, head_args=None, task=MT, **model_flags):
    return build_model(task, ModelArguments(model_name_or_path=path, **model_flags),
                       head_args or HeadSelectionArguments(), TinyTokenizer(), TASKS["encoder_tasks"],
                       TASKS["decoder_tasks"])


def trained_checkpoint(folder, **keywords) -> str:
    HeadSelMarianMTModel(HeadSelMarianConfig(**TINY_MARIAN, **TASKS, **keywords)).save_pretrained(folder)
    return str(folder)


def test_selection_flags_reach_a_model_built_from_scratch():
    # the runtime flags too, and a flag set to 0 is a value, not "unset" (the package's default noise scale is 1.0)
    head_args = HeadSelectionArguments(head_selection_temperature=2.0, head_selection_noise_scale=0.0,
                                       head_selection_strategy="subset", total_decoder_attention_heads=6)
    config = build(head_args=head_args, config_overrides=TINY_OVERRIDES).config
    assert (config.head_selection_temperature, config.head_selection_noise_scale) == (2.0, 0.0)
    assert (config.head_selection_strategy, config.total_decoder_attention_heads) == ("subset", 6)
    assert (config.encoder_tasks, config.decoder_tasks) == (TASKS["encoder_tasks"], TASKS["decoder_tasks"])


def test_the_shared_baseline_from_scratch_is_a_stock_model_with_a_stock_config():
    model = build(shared_baseline=True, config_overrides=TINY_OVERRIDES,
                  head_args=HeadSelectionArguments(head_selection_temperature=2.0))
    assert type(model) is MarianMTModel
    assert not hasattr(model.config, "encoder_tasks") and not hasattr(model.config, "head_selection_temperature")


@pytest.mark.parametrize("task", [ASR, ST, MT], ids=lambda task: task.name)
def test_generation_starts_and_ends_with_each_toolkit_s_tokens(task):
    overrides = TINY_OVERRIDES + (",conv_channels=8" if task.speech else "")
    generation = build(task=task, config_overrides=overrides).generation_config
    assert (generation.pad_token_id, generation.eos_token_id) == (0, 1)
    if task.speech:  # fairseq: from </s>
        assert (generation.decoder_start_token_id, generation.bos_token_id) == (1, 2)
        assert generation.bad_words_ids is None
    else:  # Marian: from <pad>, forced to end with </s>, never generating <pad> again (but free to end)
        assert (generation.decoder_start_token_id, generation.forced_eos_token_id) == (0, 1)
        assert generation.bad_words_ids == [[0]]


def test_a_trained_checkpoint_keeps_its_structure_and_takes_runtime_flags(tmp_path):
    path = trained_checkpoint(tmp_path, head_selection_components=["decoder_self"], head_selection_kl_weight=0.5,
                              task_adapter_dim=4)
    # the checkpoint's own structure, given again, is no change (a flag's list is another object than the config's)
    same = HeadSelectionArguments(head_selection_components=["decoder_self"], head_selection_temperature=2.0,
                                  head_selection_kl_weight=0.0)
    config = build(path, same).config
    assert config.head_selection_temperature == 2.0 and config.head_selection_kl_weight == 0.0  # 0.0 is set, too
    with pytest.raises(ValueError, match="head_selection_strategy cannot be changed"):
        build(path, HeadSelectionArguments(head_selection_strategy="task_specific"))
    # adapters may be added to a checkpoint without them, not resized on one that has them
    with pytest.raises(ValueError, match="task_adapter_dim cannot be changed"):
        build(path, HeadSelectionArguments(task_adapter_dim=8))


def test_the_shared_baseline_needs_a_stock_checkpoint(tmp_path):
    # a head-selection checkpoint loaded as a stock model would silently lose its candidate heads and selection
    with pytest.raises(ValueError, match="as a --shared_baseline"):
        build(trained_checkpoint(tmp_path), shared_baseline=True)


def test_upcycling_a_stock_checkpoint_needs_adapters_to_train_only_them(tmp_path):
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="has no task adapters"):
        build(str(tmp_path), train_only_adapters=True)


def test_config_overrides_reach_the_shared_baseline_and_the_upcycled_model_alike(tmp_path):
    """One comparison spec gives both systems started from a stock checkpoint the same override; the upcycled model
    used to refuse every `--config_overrides`, so a spec could change the baseline's dropout only."""
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    overrides = "dropout=0.3,attention_dropout=0.2"
    baseline = build(str(tmp_path), shared_baseline=True, config_overrides=overrides).eval()
    upcycled = build(str(tmp_path), config_overrides=overrides, head_args=HeadSelectionArguments(
        head_selection_noise_scale=0.0)).eval()
    for model in (baseline, upcycled):
        assert (model.config.dropout, model.config.attention_dropout) == (0.3, 0.2)
    # upcycling keeps its promise: the same outputs as the stock model it starts from, for every task
    inputs = dict(input_ids=torch.tensor([[5, 6, 1], [7, 1, 0]]), attention_mask=torch.tensor([[1, 1, 1], [1, 1, 0]]),
                  decoder_input_ids=torch.tensor([[0, 5], [0, 6]]))
    with torch.no_grad():
        expected = baseline(**inputs).logits
        for task_id in (0, 1):
            got = upcycled(**inputs, decoder_task_ids=torch.tensor([task_id, task_id])).logits
            torch.testing.assert_close(got, expected)


def test_an_override_that_does_not_fit_a_stock_checkpoint_fails_for_both_systems(tmp_path):
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    for shared in (True, False):
        with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
            build(str(tmp_path), shared_baseline=shared, config_overrides="d_model=32")


def test_an_upcycled_model_takes_its_default_tasks_from_config_overrides(tmp_path):
    # the default tasks have no flag of their own: `--config_overrides` is how a run sets them
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
    config = build(str(tmp_path), config_overrides="default_decoder_task=fr").config
    assert config.default_decoder_task == "fr"
    assert not hasattr(MarianConfig.from_pretrained(tmp_path), "default_decoder_task")


@pytest.mark.parametrize("start", ["scratch", "stock", "stock_baseline", "headsel"])
@pytest.mark.parametrize("override", ["head_selection_strategy=subset", "head_selection_temperature=2.0",
                                      "decoder_tasks=[]"])
def test_config_overrides_refuse_head_selection_settings_that_have_flags(tmp_path, start, override):
    """Through `--config_overrides` they bypassed the checkpoint checks, lost silently to their flag from scratch,
    collided with it when loading (a keyword given twice) or reached a stock model that cannot take them."""
    path = None
    if start == "headsel":
        path = trained_checkpoint(tmp_path)
    elif start.startswith("stock"):
        MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(tmp_path)
        path = str(tmp_path)
    flag = override.partition("=")[0]
    with pytest.raises(ValueError, match=f"cannot set head-selection settings \\['{flag}'\\]: give them with their "
                                         f"own flags \\(--{flag}\\)"):
        build(path, shared_baseline=start == "stock_baseline", config_overrides=TINY_OVERRIDES + "," + override)


def test_every_system_reads_a_hub_checkpoint_from_the_cache_dir(hub_cache):
    """The upcycled model loaded its stock checkpoint without --cache_dir (the default cache: another copy or
    revision, or no file offline), while the shared baseline read the one in --cache_dir."""
    cache = hub_cache(MarianMTModel(MarianConfig(**TINY_MARIAN)), "me/tiny-marian")
    built = {}
    for shared in (True, False):
        args = ModelArguments(model_name_or_path="me/tiny-marian", cache_dir=str(cache), shared_baseline=shared)
        built[shared] = build_model(MT, args, HeadSelectionArguments(), None, ["en"], ["de", "fr"])
    assert type(built[True]) is MarianMTModel and built[False].config.decoder_tasks == ["de", "fr"]
    assert torch.equal(built[False].model.shared.weight, built[True].model.shared.weight)


def test_init_encoder_from_a_model_of_another_family_is_refused(text_corpus, tmp_path):
    BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32).save_pretrained(
        tmp_path / "bert")
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=re.escape(
            f"--init_encoder_from {tmp_path / 'bert'}: unsupported model_type 'bert'; the encoder is taken from a "
            "model of type headsel_speech_to_text, speech_to_text, headsel_marian, marian")):
        run(MT, tiny_flags(out, speech=False) + [
            "--train_file", str(text_corpus / "train.jsonl"), "--init_encoder_from", str(tmp_path / "bert"),
            "--do_train"])
    assert not (out / "model.safetensors").exists()
    assert not has_tokenizer(str(out), speech=False)  # trained before the model was built, removed with the run


def test_averaging_no_checkpoint_is_refused():
    """No flag reaches it (the recipe warns and averages nothing without checkpoints, see test_recipes): called
    directly, averaging an empty list fails rather than give no weights, or leave a model as it was."""
    with pytest.raises(ValueError, match="no checkpoint to average"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="no checkpoint to average"):
        load_averaged_weights(build(config_overrides=TINY_OVERRIDES), [])
