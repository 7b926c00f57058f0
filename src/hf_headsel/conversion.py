# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Conversion between head-selection models and the stock Transformers models they extend.

* [`export_task_model`]: one task's (or one direction's) selected heads copied into a stock `MarianMTModel` /
  `Speech2TextForConditionalGeneration` with `H` heads per layer. Its logits equal the head-selection model's for
  that task; it saves and loads with stock Transformers, without remote code.
* [`from_stock`]: a head-selection model built from a stock checkpoint ("upcycling"): each stock head is tiled into
  the candidates of its group (candidate `c` holds stock head `c mod H`), so the outputs equal the stock model's for
  every task at initialisation. The selector logits are freshly initialised.

Copied next to saved models as remote code; imports only torch, transformers and its siblings `attention.py`,
`configuration_head_selection.py` and `routing.py`. It does not import the modeling module (which imports it for
`export_task_model` / `from_stock`): head-selection models are recognised by their config class.
"""

from __future__ import annotations

import copy
import os

import torch
from transformers import PreTrainedModel

from .attention import PROJECTIONS, HeadSelectionAttentionMixin
from .configuration_head_selection import HEAD_SELECTION_CONFIG_KEYS, SIDES, attention_path, is_head_selection_config
from .routing import task_names

# Keys of a head-selection `config.to_dict()` that must not reach a stock config.
NON_STOCK_CONFIG_KEYS = HEAD_SELECTION_CONFIG_KEYS + (
    "model_type",
    "auto_map",
    "architectures",
    "custom_pipelines",
    "transformers_version",
    "_name_or_path",
)


# --------------------------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------------------------


def is_head_selection_model_class(cls: type) -> bool:
    """Whether `cls` is a head-selection model class (base or generation model): its config class is a
    head-selection config."""
    config_class = getattr(cls, "config_class", None)
    return isinstance(config_class, type) and is_head_selection_config(config_class)


# Why a head-selection base model (`HeadSelMarianModel`, no LM head) is refused: the weight names are those of the
# generation model, whose base model it is.
_BASE_MODEL_HINT = (" (a base model without the LM head: use the family's generation model, e.g. HeadSelMarianMTModel or "
                    "HeadSelSpeech2TextForConditionalGeneration, whose `.model` is the base model)")


def is_head_selection_generation_model(model_or_class) -> bool:
    """Whether `model_or_class` is a head-selection generation model or class (the class that exports and
    upcycles)."""
    cls = model_or_class if isinstance(model_or_class, type) else type(model_or_class)
    return is_head_selection_model_class(cls) and cls.can_generate()


def stock_model_class(model_or_class) -> type[PreTrainedModel]:
    """The stock Transformers class a head-selection model class extends (e.g. `MarianMTModel`).

    It is the first class of the MRO that is a `PreTrainedModel` but not a head-selection model.
    """
    cls = model_or_class if isinstance(model_or_class, type) else type(model_or_class)
    if not is_head_selection_model_class(cls):
        raise ValueError(f"{cls.__name__} is not a head-selection model class (its config is no head-selection config)")
    for base in cls.__mro__:
        if issubclass(base, PreTrainedModel) and not is_head_selection_model_class(base):
            return base
    raise ValueError(f"{cls.__name__} extends no stock PreTrainedModel class")


def attention_module_name(component: str, layer: int) -> str:
    """The module name of the attention of `component` in `layer`, e.g. `model.decoder.layers.1.encoder_attn`."""
    return f"model.{attention_path(component, layer)}"  # `model`: the base model prefix of both generation models


def head_rows(heads: torch.LongTensor, head_dim: int) -> torch.LongTensor:
    """Projection rows of the heads `heads` (`[n]`) in the given order: head `h` owns `h*head_dim .. +head_dim-1`."""
    heads = heads.long()
    return (heads[:, None] * head_dim + torch.arange(head_dim, device=heads.device)).flatten()


def _select_projection_rows(state: dict, prefix: str, rows: torch.LongTensor) -> None:
    """Replace the q/k/v weights and biases under `prefix` in `state` by their rows `rows` (in that order)."""
    for projection in PROJECTIONS:
        for kind in ("weight", "bias"):
            key = f"{prefix}.{projection}.{kind}"
            if key in state:
                state[key] = state[key].index_select(0, rows.to(state[key].device))


def _stock_config_kwargs(config) -> dict:
    """The keywords of a config, minus the head-selection ones and the keys that name a model class or its code."""
    return {key: value for key, value in config.to_dict().items() if key not in NON_STOCK_CONFIG_KEYS}


# --------------------------------------------------------------------------------------------------------------------
# Export: head-selection model -> stock model of one task
# --------------------------------------------------------------------------------------------------------------------


def needed_sides(config) -> tuple[str, ...]:
    """The sides whose task decides which heads are used: the union of the sides keying every selecting component."""
    sides = set()
    for component in config.head_selection_components:
        sides.update(config.component_sides(component))
    return tuple(side for side in SIDES if side in sides)


def resolve_export_tasks(
    config, task: str | None = None, *, encoder_task: str | None = None, decoder_task: str | None = None
) -> dict[str, str]:
    """The task name of every side an export needs: `{side: name}`.

    Like `set_default_task`: `task` names the task of every side that knows it (a name known on neither side is an
    error), `encoder_task` / `decoder_task` set one side and take precedence. A side left open falls back to the
    config default, then to its only task. A side that keys a selecting component and is still open is a
    `ValueError` naming the tasks to choose from.
    """
    names = task_names(config, task, encoder_task, decoder_task)
    for side in SIDES:
        if side in names:
            continue
        default = getattr(config, f"default_{side}_task")
        if default is not None:
            names[side] = default
        elif len(config.tasks(side)) == 1:
            names[side] = config.tasks(side)[0]
    for side in needed_sides(config):
        if side not in names:
            components = [c for c in config.head_selection_components if side in config.component_sides(c)]
            raise ValueError(
                f"exporting needs the {side} task: the heads of {components} are chosen per {side} task; pass "
                f"{side}_task= (or task=) one of {config.tasks(side)}"
            )
    return names


def component_task_row(config, component: str, names: dict[str, str]) -> int:
    """The row of `phi` (task index of the component) for the side task names `names`."""
    sides = config.component_sides(component)
    return config.routing_key(sides, {side: config.task_id(side, names[side]) for side in sides})


def export_task_model(
    model, task: str | None = None, *, encoder_task: str | None = None, decoder_task: str | None = None
) -> PreTrainedModel:
    """A stock model (e.g. `MarianMTModel`) that computes what `model` computes for one task.

    Every selecting attention layer keeps only the `H` heads the task selects (the deterministic, evaluation-mode
    choice of `model.selected_heads()`): the query/key/value rows of each selected candidate, in slot order; the
    output projection is unchanged. Everything else is copied as is; the selector logits are dropped. The result
    has the stock config (stock `model_type`, no `auto_map`), so it saves and loads with stock Transformers without
    remote code, and its logits equal `model`'s for that task in evaluation mode.

    Args:
        model: a head-selection model.
        task: a task name, used on every side that has it.
        encoder_task / decoder_task: the task of one side (take precedence over `task`). A side is only needed when
            it keys a selecting component; a cross-attention keyed by `"pair"` needs both (the direction).

    Returns:
        The stock model in evaluation mode, on `model`'s device and dtype, with a copy of its generation config.
    """
    if not is_head_selection_generation_model(model):
        raise ValueError(f"export_task_model needs a head-selection generation model, got {type(model).__name__}"
                         f"{_BASE_MODEL_HINT if is_head_selection_model_class(type(model)) else ''}")
    config = model.config
    if getattr(config, "task_adapter_dim", 0):
        raise ValueError(
            f"export_task_model cannot export a model with task adapters (task_adapter_dim={config.task_adapter_dim}):"
            " a stock model has no place for them"
        )
    wrapped = [name for name, module in model.named_modules()
               if isinstance(module, HeadSelectionAttentionMixin) and module._projects_through_modules()]
    if wrapped:
        raise ValueError(
            f"export_task_model slices the q/k/v weight rows of plain nn.Linear projections; {len(wrapped)} attention "
            f"layer(s) project through other modules (PEFT adapters, quantized layers), the first {wrapped[0]}: merge "
            "or remove them first (a PEFT model: `peft_model.merge_and_unload()`)"
        )
    names = resolve_export_tasks(config, task, encoder_task=encoder_task, decoder_task=decoder_task)
    stock_class = stock_model_class(model)
    stock_config = stock_class.config_class(**_stock_config_kwargs(config))
    state = {key: value for key, value in model.state_dict().items() if not key.startswith("head_selection.")}
    for component, heads in model.selected_heads().items():
        row = component_task_row(config, component, names)
        for layer, layer_heads in enumerate(heads[row]):
            name = attention_module_name(component, layer)
            rows = head_rows(layer_heads, model.get_submodule(name).head_dim)
            _select_projection_rows(state, name, rows)
    # built in the model's dtype before the weights are copied in: a float64 model's would be rounded to float32
    stock = stock_class(stock_config).to(dtype=model.dtype)
    stock.load_state_dict(state, strict=True)
    stock.generation_config = copy.deepcopy(model.generation_config)
    return stock.to(device=model.device).eval()


# --------------------------------------------------------------------------------------------------------------------
# Upcycling: stock model -> head-selection model
# --------------------------------------------------------------------------------------------------------------------


def _load_stock(cls, stock_model_or_path, from_pretrained_kwargs: dict) -> PreTrainedModel:
    """The stock model, loaded with the stock class if a path or Hub id is given; `ValueError` if it is not one."""
    stock_class = stock_model_class(cls)
    if isinstance(stock_model_or_path, (str, os.PathLike)):
        config_dict, _ = stock_class.config_class.get_config_dict(stock_model_or_path, **from_pretrained_kwargs)
        model_type = config_dict.get("model_type")
        if model_type != stock_class.config_class.model_type:
            raise ValueError(
                f"from_stock needs a stock {stock_class.config_class.model_type!r} checkpoint, but "
                f"{os.fspath(stock_model_or_path)!r} is a {model_type!r} one (a head-selection checkpoint loads with "
                f"{cls.__name__}.from_pretrained)"
            )
        return stock_class.from_pretrained(stock_model_or_path, **from_pretrained_kwargs)
    if from_pretrained_kwargs:
        raise ValueError(f"from_pretrained_kwargs {sorted(from_pretrained_kwargs)} load a stock checkpoint from a path "
                         "or Hub id: a model instance is already loaded")
    if is_head_selection_model_class(type(stock_model_or_path)) or not isinstance(stock_model_or_path, stock_class):
        raise ValueError(
            f"from_stock needs a stock {stock_class.__name__} (or its path), got {type(stock_model_or_path).__name__}"
        )
    return stock_model_or_path


def _check_head_selection_keywords(keywords: dict) -> None:
    unknown = sorted(set(keywords) - set(HEAD_SELECTION_CONFIG_KEYS))
    if unknown:
        raise ValueError(
            f"from_stock takes only head-selection keywords {list(HEAD_SELECTION_CONFIG_KEYS)}; got {unknown}. The "
            "architecture comes from the stock checkpoint: change other config values after loading"
        )


def tile_stock_heads(weight: torch.Tensor, heads: int, total_heads: int) -> torch.Tensor:
    """q/k/v rows (weight `[H*head_dim, d]` or bias `[H*head_dim]`) of `H'` candidates, candidate `c` holding stock
    head `c mod H`. With `H' = r*H` this is the stock rows repeated `r` times."""
    head_dim = weight.shape[0] // heads
    candidates = torch.arange(total_heads, device=weight.device) % heads
    return weight.index_select(0, head_rows(candidates, head_dim))


def _favour_first_candidates(model) -> None:
    """Subset strategy: reorder the fresh logits of every task and layer so that the `H` largest sit on candidates
    `0 .. H-1`. Those win, fill slots `0 .. H-1` in ascending order and hold stock heads `0 .. H-1`: exact."""
    for selector in model.head_selection.values():
        if selector.strategy == "subset" and selector.logits is not None:
            with torch.no_grad():
                selector.logits.copy_(selector.logits.sort(dim=-1, descending=True).values)


def from_stock(cls, stock_model_or_path, *, from_pretrained_kwargs: dict | None = None, **head_selection_keywords):
    """A head-selection model of class `cls` built from a stock checkpoint ("upcycling").

    The config is the stock config plus `head_selection_keywords` (only head-selection keywords are accepted: the
    architecture is the checkpoint's). Every stock weight is copied; in each selecting attention layer the
    query/key/value rows of candidate `c` are those of stock head `c mod H` (with `H' = r*H`: the stock rows
    repeated `r` times); the output projection is the stock one. The selector logits (and task adapters, if the
    keywords ask for them) are freshly initialised.

    At initialisation the outputs equal the stock model's for every task:

    * group: slot `g` takes a candidate of group `{g + j*H}`, which holds stock head `g`, whatever is selected;
    * task_specific: task `t` uses candidates `t*H + g` in slot `g`, which hold stock head `g`;
    * subset: the `H` selected candidates fill the slots in ascending order, which matches the stock heads only if
      they are candidates `0 .. H-1`. So the fresh logits of each task and layer are reordered (sorted, largest
      first) to make candidates `0 .. H-1` the deterministic choice: exact at initialisation, the logit values
      keep their fresh distribution, and the Gumbel noise of training still explores the other candidates.

    Args:
        cls: the head-selection model class (e.g. `HeadSelMarianMTModel`).
        stock_model_or_path: a stock model instance, or a folder / Hub id of a stock checkpoint.
        from_pretrained_kwargs: passed to the stock class's `from_pretrained` (and its config's) for a folder or Hub
            id, e.g. `{"cache_dir": ..., "revision": ..., "token": ...}`, or config values it takes (`{"dropout":
            0.3}`: the stock model loaded with them is the one upcycled).
        **head_selection_keywords: e.g. `encoder_tasks`, `decoder_tasks`, `head_selection_strategy`.

    Returns:
        The head-selection model in evaluation mode (as `from_pretrained` returns it), on the stock model's device
        and dtype.
    """
    if not is_head_selection_generation_model(cls):
        raise ValueError(f"from_stock needs a head-selection generation model class, got {cls.__name__}"
                         f"{_BASE_MODEL_HINT if is_head_selection_model_class(cls) else ''}")
    _check_head_selection_keywords(head_selection_keywords)
    stock = _load_stock(cls, stock_model_or_path, from_pretrained_kwargs or {})
    config = cls.config_class(**_stock_config_kwargs(stock.config), **head_selection_keywords)
    model = cls(config).to(dtype=stock.dtype)  # before the copy: float64 weights would be rounded to float32
    state = dict(stock.state_dict())
    for component, selector in model.head_selection.items():
        for layer in range(selector.num_layers):
            prefix = attention_module_name(component, layer)
            for projection in PROJECTIONS:
                for kind in ("weight", "bias"):
                    key = f"{prefix}.{projection}.{kind}"
                    if key in state:
                        state[key] = tile_stock_heads(state[key], selector.heads, selector.total_heads)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # new parameters keep their fresh init: the selector logits, and task adapters (zero up-projections: exact)
    selector_keys = {f"head_selection.{component}.logits" for component in model.head_selection}
    if unexpected or {key for key in missing if key not in selector_keys and ".task_adapter." not in key}:
        raise RuntimeError(f"stock weights do not match {cls.__name__}: missing {missing}, unexpected {unexpected}")
    _favour_first_candidates(model)
    model.generation_config = copy.deepcopy(stock.generation_config)
    return model.to(device=stock.device, dtype=stock.dtype).eval()


__all__ = [
    "HEAD_SELECTION_CONFIG_KEYS",
    "attention_module_name",
    "export_task_model",
    "from_stock",
    "head_rows",
    "needed_sides",
    "resolve_export_tasks",
    "stock_model_class",
    "tile_stock_heads",
]
