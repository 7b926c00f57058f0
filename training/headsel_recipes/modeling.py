# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Building the model of a recipe: from scratch, from a head-selection checkpoint, upcycled from a stock
checkpoint, or the stock model itself (`--shared_baseline`); plus encoder initialisation from another checkpoint and
checkpoint averaging."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    MarianConfig,
    MarianMTModel,
    Speech2TextConfig,
    Speech2TextForConditionalGeneration,
)
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
from transformers.models.speech_to_text.modeling_speech_to_text import Speech2TextSinusoidalPositionalEmbedding

from hf_headsel import (
    HeadSelMarianConfig,
    HeadSelMarianMTModel,
    HeadSelSpeech2TextConfig,
    HeadSelSpeech2TextForConditionalGeneration,
)
from hf_headsel.configuration_head_selection import head_selection_keywords as config_keywords
from hf_headsel.families import HEADSEL_MODEL_TYPES, STOCK_MODEL_TYPES

from .arguments import HeadSelectionArguments, ModelArguments, RecipeTask

logger = logging.getLogger(__name__)


def keyword_names(*roles: str) -> tuple[str, ...]:
    return tuple(keyword.name for keyword in config_keywords(*roles))


# Keywords that decide the shape of a head-selection model (a trained checkpoint keeps its own): the task lists,
# then the rest of the structure.
TASK_KEYWORDS = keyword_names("tasks")
SHAPE_KEYWORDS = keyword_names("structure")
STRUCTURAL_KEYWORDS = TASK_KEYWORDS + SHAPE_KEYWORDS
RUNTIME_KEYWORDS = keyword_names("runtime")
FLAGGED_KEYWORDS = STRUCTURAL_KEYWORDS + RUNTIME_KEYWORDS  # each a recipe flag (`HeadSelectionArguments`)
DEFAULT_TASK_KEYWORDS = keyword_names("default")  # no flag: `--config_overrides` may set them
ADAPTER_KEYWORDS = tuple(name for name in SHAPE_KEYWORDS if name.startswith("task_adapter_"))

# The paper's sizes (Gong et al., 2021, section 4): S2T Transformer for speech, Transformer for text.
SPEECH_DEFAULTS = dict(
    d_model=256, encoder_layers=12, decoder_layers=6, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=2048, decoder_ffn_dim=2048, conv_channels=1024, input_feat_per_channel=80, input_channels=1,
    max_source_positions=6000, max_target_positions=1024, dropout=0.1, scale_embedding=True,
)
TEXT_DEFAULTS = dict(
    d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=1024, decoder_ffn_dim=1024, max_position_embeddings=1024, dropout=0.1, scale_embedding=True,
    share_encoder_decoder_embeddings=True,
)


def model_classes(task: RecipeTask, baseline: bool = False) -> tuple[type, type]:
    """`(config class, model class)` of a recipe."""
    if task.speech:
        return (Speech2TextConfig, Speech2TextForConditionalGeneration) if baseline else (
            HeadSelSpeech2TextConfig, HeadSelSpeech2TextForConditionalGeneration)
    return (MarianConfig, MarianMTModel) if baseline else (HeadSelMarianConfig, HeadSelMarianMTModel)


def parse_config_overrides(text: str | None) -> dict:
    """`"d_model=64,encoder_layers=2,dropout=0.0"` -> `{"d_model": 64, ...}`; values parse as JSON when they can
    (numbers, `true`, `null`, `[...]` without commas), else stay strings."""
    overrides = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config_overrides items must look like key=value, got {item!r}")
        try:
            overrides[key.strip()] = json.loads(value.strip())
        except json.JSONDecodeError:
            overrides[key.strip()] = value.strip()
    return overrides


def refuse_head_selection_overrides(overrides: dict) -> None:
    """Head-selection settings that have flags of their own (checked against a checkpoint's, and kept out of the
    shared baseline) cannot come through `--config_overrides`: there they would bypass those checks, lose silently to
    the flag, or reach a stock config that ignores them."""
    named = sorted(set(overrides) & set(FLAGGED_KEYWORDS))
    if named:
        raise ValueError(f"--config_overrides cannot set head-selection settings {named}: give them with their own "
                         f"flags ({', '.join('--' + name for name in named)})")


def scratch_config_keywords(keywords: dict) -> dict:
    """The config keywords of a model trained from scratch: `init_std` defaults to `d_model ** -0.5` (fairseq's
    embedding initialisation, the paper's toolkit) unless set. Transformers' default of 0.02 is meant for large
    models; with `scale_embedding` a token embedding then has an RMS of 0.02 * sqrt(d_model) (0.16 at d_model 64)
    against the sinusoidal positions' 0.7, so small models barely see which token is where and stall at the unigram
    loss (offline MT benchmark, d_model 64, 600 updates: training loss 5.63 with 0.02, 4.38 with 0.125; at the demo's
    d_model 128 both learn, 4.74 with 0.02 vs 4.82 with 0.088 after 450 updates)."""
    return {"init_std": keywords["d_model"] ** -0.5, **keywords}


def head_selection_keywords(head_args: HeadSelectionArguments, encoder_tasks: list[str],
                            decoder_tasks: list[str]) -> dict:
    """The head-selection config keywords the user set (`None` flags are left to the defaults)."""
    keywords = {"encoder_tasks": encoder_tasks, "decoder_tasks": decoder_tasks}
    for name in SHAPE_KEYWORDS + RUNTIME_KEYWORDS:
        value = getattr(head_args, name)
        if value is not None:
            keywords[name] = value
    return keywords


def special_token_keywords(task: RecipeTask, tokenizer) -> dict:
    """Vocabulary size and special ids of the config, from the tokenizer."""
    keywords = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
                "eos_token_id": tokenizer.eos_token_id}
    if task.speech:  # fairseq: decoding starts from </s>
        keywords.update(bos_token_id=tokenizer.bos_token_id, decoder_start_token_id=tokenizer.eos_token_id)
    else:  # Marian: decoding starts from <pad>
        keywords.update(decoder_start_token_id=tokenizer.pad_token_id, decoder_vocab_size=len(tokenizer),
                        forced_eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    return keywords


def checkpoint_model_type(path: str | None, cache_dir: str | None = None) -> str | None:
    """The `model_type` of a checkpoint's config (`None` without a checkpoint)."""
    if path is None:
        return None
    return AutoConfig.from_pretrained(path, cache_dir=cache_dir).model_type


def checkpoint_tasks(path: str, cache_dir: str | None = None) -> tuple[list[str], list[str], str] | None:
    """`(encoder tasks, decoder tasks, task type)` of a head-selection checkpoint, `None` for another model."""
    config = AutoConfig.from_pretrained(path, cache_dir=cache_dir)
    if config.model_type not in HEADSEL_MODEL_TYPES:
        return None
    return list(config.encoder_tasks), list(config.decoder_tasks), config.task_type


def build_model(
    task: RecipeTask, model_args: ModelArguments, head_args: HeadSelectionArguments, tokenizer,
    encoder_tasks: list[str], decoder_tasks: list[str],
):
    """The model a recipe trains (see the module docstring)."""
    config_cls, model_cls = model_classes(task, model_args.shared_baseline)
    overrides = parse_config_overrides(model_args.config_overrides)
    refuse_head_selection_overrides(overrides)
    selection = {} if model_args.shared_baseline else head_selection_keywords(head_args, encoder_tasks, decoder_tasks)
    path = model_args.model_name_or_path
    model_type = checkpoint_model_type(path, model_args.cache_dir)
    if path is None:
        defaults = SPEECH_DEFAULTS if task.speech else TEXT_DEFAULTS
        config = config_cls(**scratch_config_keywords(
            {**defaults, **special_token_keywords(task, tokenizer), **overrides, **selection}))
        model = model_cls(config)
        logger.info("built a new %s from scratch", model_cls.__name__)
    elif model_type in HEADSEL_MODEL_TYPES and not model_args.shared_baseline:
        model = load_headsel_checkpoint(model_cls, path, overrides, selection, model_args.cache_dir)
    elif model_type in STOCK_MODEL_TYPES and not model_args.shared_baseline:
        model = upcycle_stock_checkpoint(task, path, overrides, selection, model_args.cache_dir)
    elif model_type in STOCK_MODEL_TYPES and model_args.shared_baseline:
        model = model_cls.from_pretrained(path, cache_dir=model_args.cache_dir, **overrides)
    else:
        raise ValueError(f"cannot train from {path!r} (model_type {model_type!r}) with this recipe"
                         + (" as a --shared_baseline" if model_args.shared_baseline else ""))
    frozen = freeze_sinusoidal_positions(model)
    if frozen:
        logger.info("kept the sinusoidal position tables fixed: %s", ", ".join(frozen))
    if model_args.init_encoder_from:
        init_encoder_from(model, model_args.init_encoder_from, model_args.cache_dir)
    if model_args.train_only_adapters:
        freeze_all_but_adapters(model)
    if not task.speech:
        model.generation_config.bad_words_ids = [[model.config.pad_token_id]]
    return model


#: Fixed sinusoidal position tables: not trained, and not saved (rebuilt when a checkpoint loads).
SINUSOIDAL_POSITIONS = (MarianSinusoidalPositionalEmbedding, Speech2TextSinusoidalPositionalEmbedding)


def freeze_sinusoidal_positions(model) -> list[str]:
    """Keep the sinusoidal position tables fixed, as the papers and Transformers before 5.24 do. From 5.24
    gradients reach Marian's table (its forward lost `torch.no_grad`): a checkpoint loaded with `from_pretrained`
    would train it (and lose the change on saving) while a model built or upcycled in memory, whose table does not
    require gradients, would not; compared systems would then train different parameters. Returns the parameters
    frozen here."""
    frozen = []
    for module_name, module in model.named_modules():
        if isinstance(module, SINUSOIDAL_POSITIONS):
            for name, parameter in module.named_parameters():
                if parameter.requires_grad:
                    parameter.requires_grad_(False)
                    frozen.append(f"{module_name}.{name}")
    return frozen


def freeze_all_but_adapters(model) -> int:
    """Train only the per-task adapters (the paper's adapter baseline: a trained model, frozen, plus adapters).
    Returns the number of trainable parameters."""
    trainable = 0
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(".task_adapter." in name)
        trainable += parameter.numel() if parameter.requires_grad else 0
    if not trainable:
        raise ValueError("--train_only_adapters: the model has no task adapters (set --task_adapter_dim)")
    logger.info("training only the task adapters: %d parameters", trainable)
    return trainable


def load_headsel_checkpoint(model_cls: type, path: str, overrides: dict, selection: dict, cache_dir: str | None):
    """A head-selection checkpoint; its structure (tasks, strategy, pools) is kept, so flags that would change it
    are an error. Temperature and KL weight may be changed, and a checkpoint without adapters may gain fresh ones
    (`--task_adapter_dim`: the adapter baseline on top of a trained model; their up-projections start at zero)."""
    config = AutoConfig.from_pretrained(path, cache_dir=cache_dir)
    addable = ADAPTER_KEYWORDS if not config.task_adapter_dim else ()
    for name in SHAPE_KEYWORDS:  # the tasks themselves come from the checkpoint
        if name in selection and selection[name] != getattr(config, name) and name not in addable:
            raise ValueError(f"{path} has {name}={getattr(config, name)!r}; a trained model's {name} cannot be "
                             f"changed (got {selection[name]!r})")
    runtime = {name: selection[name] for name in RUNTIME_KEYWORDS + addable if name in selection}
    model = model_cls.from_pretrained(path, cache_dir=cache_dir, **overrides, **runtime)
    logger.info("loaded head-selection checkpoint %s (tasks %s / %s)", path, config.encoder_tasks, config.decoder_tasks)
    return model


def upcycle_stock_checkpoint(task: RecipeTask, path: str, overrides: dict, selection: dict, cache_dir: str | None):
    """A head-selection model initialised from a stock checkpoint with the package's `from_stock`: every stock weight
    copied, each stock head tiled into the candidates of its group, outputs equal to the stock model's for every task
    at initialisation. `--config_overrides` apply to the stock checkpoint as it loads, exactly as the shared baseline
    loads it (`from_pretrained(path, cache_dir=..., **overrides)`): one flag gives both systems of a comparison the
    same change (e.g. `dropout`), and one that does not fit the weights (`d_model`) fails for both alike."""
    default_tasks = {name: value for name, value in overrides.items() if name in DEFAULT_TASK_KEYWORDS}
    stock_overrides = {name: value for name, value in overrides.items() if name not in DEFAULT_TASK_KEYWORDS}
    # the same files and values as the shared baseline reads from this checkpoint
    model = model_classes(task)[1].from_stock(
        path, from_pretrained_kwargs={"cache_dir": cache_dir, **stock_overrides}, **selection, **default_tasks)
    logger.info("upcycled stock checkpoint %s into %s", path, type(model).__name__)
    return model.train()


def init_encoder_from(model, path: str, cache_dir: str | None = None) -> int:
    """Initialise the encoder of `model` from the checkpoint at `path` (e.g. the ASR model an ST model starts from,
    as in the paper). Encoder weights must have the same shapes; encoder selector rows are copied for the encoder
    tasks both models know (by name). Returns the number of tensors copied."""
    source_type = AutoConfig.from_pretrained(path, cache_dir=cache_dir).model_type
    source_classes = {"headsel_speech_to_text": HeadSelSpeech2TextForConditionalGeneration,
                      "speech_to_text": Speech2TextForConditionalGeneration, "headsel_marian": HeadSelMarianMTModel,
                      "marian": MarianMTModel}
    source_cls = source_classes.get(source_type)
    if source_cls is None:
        raise ValueError(f"--init_encoder_from {path}: unsupported model_type {source_type!r}; the encoder is "
                         f"taken from a model of type {', '.join(source_classes)}")
    source = source_cls.from_pretrained(path, cache_dir=cache_dir)
    _refuse_reordered_task_weights(model.config, source.config, path)
    source_state, state = source.state_dict(), model.state_dict()
    copied = 0
    with torch.no_grad():
        for key, value in state.items():
            if not key.startswith("model.encoder.") or key not in source_state:
                continue
            if source_state[key].shape != value.shape:
                raise ValueError(f"--init_encoder_from {path}: {key} has shape {tuple(source_state[key].shape)} "
                                 f"there and {tuple(value.shape)} here")
            value.copy_(source_state[key])
            copied += 1
        copied += _copy_encoder_selector_rows(model, source)
    if hasattr(model, "clear_head_selection_cache"):
        model.clear_head_selection_cache()
    logger.info("initialised %d encoder tensors from %s", copied, path)
    return copied


def _task_keyed_encoder_lists(config) -> tuple | None:
    """The task lists that order the encoder's per-task weights (task-specific heads in its self-attention, task
    adapters after its layers: blocks laid out task by task), or `None` where it has none."""
    if getattr(config, "encoder_tasks", None) is None:
        return None
    lists = ()
    if config.head_selection_strategy == "task_specific" and "encoder_self" in config.head_selection_components:
        lists = (config.encoder_tasks,)
    if config.task_adapter_dim:
        lists = tuple(getattr(config, f"{side}_tasks") for side in config.adapter_sides("encoder"))
    return lists or None


def _refuse_reordered_task_weights(config, source_config, path: str) -> None:
    """`ValueError` where the encoder's per-task weights would be copied block by block between other task lists
    (same shapes, other tasks: each task would start from another task's heads or adapter)."""
    here, there = _task_keyed_encoder_lists(config), _task_keyed_encoder_lists(source_config)
    if (here or there) and here != there:
        raise ValueError(f"--init_encoder_from {path}: the encoder holds weights per task, laid out by the task lists "
                         f"{there} there and {here} here; copying them block by block would give tasks each other's "
                         "weights: give this model the same task lists (--encoder_tasks / --decoder_tasks)")


def _copy_encoder_selector_rows(model, source) -> int:
    """Copy the encoder self-attention selector rows of the tasks both models name; returns 1 if any were copied."""
    target_selection = getattr(model, "head_selection", {})
    source_selection = getattr(source, "head_selection", {})
    if "encoder_self" not in target_selection or "encoder_self" not in source_selection:
        return 0
    target, origin = target_selection["encoder_self"], source_selection["encoder_self"]
    if target.logits is None or origin.logits is None or target.logits.shape[1:] != origin.logits.shape[1:]:
        return 0
    source_tasks = list(source.config.encoder_tasks)
    shared = [name for name in model.config.encoder_tasks if name in source_tasks]
    for name in shared:
        target.logits[model.config.encoder_tasks.index(name)] = origin.logits[source_tasks.index(name)]
    logger.info("encoder selector rows copied for tasks %s", shared)
    return int(bool(shared))


# --------------------------------------------------------------------------------------------------------------------
# Checkpoint averaging
# --------------------------------------------------------------------------------------------------------------------


def find_checkpoints(output_dir: str) -> list[Path]:
    """The `checkpoint-<step>` folders of `output_dir`, oldest first."""
    folders = [path for path in Path(output_dir).glob("checkpoint-*") if path.name.split("-")[-1].isdigit()]
    return sorted(folders, key=lambda path: int(path.name.split("-")[-1]))


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the `model.safetensors` weights of `paths` (non-float tensors: the last one's)."""
    if not paths:
        raise ValueError("no checkpoint to average")
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        state = load_file(str(Path(path) / "model.safetensors"))
        for key, value in state.items():
            if value.is_floating_point():
                total[key] = total[key] + value.double() if key in total else value.double()
            else:
                total[key] = value
    return {key: value / len(paths) if value.is_floating_point() else value for key, value in total.items()}


def load_averaged_weights(model, paths: list[Path]) -> None:
    """Load the average of `paths` into `model` (tied weights are re-tied)."""
    averaged = average_checkpoints(paths)
    state = model.state_dict()
    with torch.no_grad():
        for key, value in averaged.items():
            if key in state:
                state[key].copy_(value.to(state[key].dtype))
    model.tie_weights()
    if hasattr(model, "clear_head_selection_cache"):
        model.clear_head_selection_cache()
