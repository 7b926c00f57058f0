# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Modeling: what a head-selection model adds to a stock encoder-decoder model, shared by every family.

* [`HeadSelectionBaseModelMixin`]: installs the selectors and the head-selection attention layers (and the task
  adapters), routes a forward pass, sets default tasks, computes the KL and `selected_heads()`. Mixed into the base
  models (`MarianModel`, `Speech2TextModel`).
* [`HeadSelectionModelMixin`]: adds generation, the KL in the loss, task export and upcycling for the
  `...ForConditionalGeneration` classes.
* [`HeadSelSeq2SeqLMOutput`]: the stock output plus `head_selection_kl`.

The decoder-only `...ForCausalLM` classes build on [`HeadSelectionModelMixin`] in
`modeling_head_selection_causal_lm.py`.

Each family's modeling module only names the stock classes it extends. Copied next to saved models as remote code;
imports only torch, transformers and its sibling modules (`adapters`, `configuration_head_selection`, `conversion`,
`eval_cache`, `routing`, `selection`).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.dynamic_module_utils import get_relative_import_files
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import logging

from .adapters import TaskAdapters
from .configuration_head_selection import (
    ADAPTER_KEYWORDS,
    KL_WITHOUT_LABELS,
    SIDES,
    TRAINED_STRUCTURE_KEYWORDS,
    HeadSelectionConfigMixin,
    attention_path,
    component_side,
    is_head_selection_config,
    refuse_saved_structure_change,
    refuse_structure_change,
)
from .compat import CACHE_KWARG, GENERATION_ENCODER_PASS
from .conversion import export_task_model, from_stock
from .eval_cache import EvalCacheMixin, version_of
from .routing import (
    EVAL_WEIGHTS_KWARG,
    LAYER_KWARGS,
    ROUTING_KWARG,
    Routing,
    TaskRoute,
    check_integer_ids,
    first_tensor,
    is_compiling,
    route_from_kwargs,
    take_examples,
    task_names,
    task_names_to_ids,
    task_route,
)
from .selection import LOGIT_INIT_RANGE, ComponentSelectors, HeadSelector

logger = logging.get_logger(__name__)

#: The inputs of a stock forward whose first dimension is the batch: reordered with it when a mixed batch is grouped
#: by task ([`HeadSelectionBaseModelMixin.routed_forward`]; the last two as a causal LM's decoder takes them).
BATCH_FIRST_INPUTS = frozenset({
    "input_ids", "input_features", "inputs_embeds", "attention_mask", "decoder_input_ids", "decoder_inputs_embeds",
    "decoder_attention_mask", "labels", "encoder_outputs", "encoder_hidden_states", "encoder_attention_mask",
})


def _save_pipeline_modules(folder: Path, config) -> None:
    """Keep the pipelines a saved config names (`custom_pipelines`, as `prepare_model_folder` sets them) loadable
    from `folder`: copy each pipeline class's module (and what it imports) from beside this module (the package,
    or the remote-code cache `pipeline()` loaded it into) when the folder lacks it. Where it is not found there
    either, the entry is dropped from the saved `config.json`: it would name a file the folder does not hold."""
    dropped = []
    for tag, entry in (getattr(config, "custom_pipelines", None) or {}).items():
        # A relative import, so that Transformers' remote-code loader copies the pipeline module into this module's
        # cache folder (it copies a module's relative imports; `pipeline()` caches the pipeline's code apart).
        from .pipeline_headsel import TRANSLATION  # noqa: F401
        name = f"{entry['impl'].split('.')[0]}.py"
        source = Path(__file__).with_name(name)
        if (folder / name).is_file():
            continue
        if not source.is_file():
            dropped.append(tag)
            continue
        for path in (source, *map(Path, get_relative_import_files(source))):
            if not (folder / path.name).is_file():
                shutil.copyfile(path, folder / path.name)
    if dropped:
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        saved["custom_pipelines"] = {tag: entry for tag, entry in saved["custom_pipelines"].items()
                                     if tag not in dropped}
        (folder / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        logger.warning("%s: the pipeline modules of %s are not beside the model's code; their custom_pipelines entries "
                       "were left out of config.json", folder, dropped)


@dataclass
class HeadSelSeq2SeqLMOutput(Seq2SeqLMOutput):
    """[`Seq2SeqLMOutput`] plus `head_selection_kl`: the token-weighted KL of the batch (computed when `labels` are
    given), already added to `loss` with weight `config.head_selection_kl_weight`.

    With `return_dict=False` the model returns `to_tuple()` of this output: the stock model's tuple (the fields that
    are not `None`, in order), then `head_selection_kl` as the last element when `labels` were given."""

    head_selection_kl: torch.FloatTensor | None = None


class HeadSelectionBaseModelMixin:
    """Routing, default tasks, the KL term and `selected_heads()` for a stock encoder-decoder model, with or without
    its language-model head.

    Mixed in before the stock base model class (`MarianModel`, `Speech2TextModel`); [`HeadSelectionModelMixin`]
    adds generation for the `...ForConditionalGeneration` classes. The family module calls
    [`~HeadSelectionBaseModelMixin.install_head_selection`] at the end of `__init__` and routes its `forward`
    through [`~HeadSelectionBaseModelMixin.task_routes`].

    The selectors live at the top of either model (`head_selection.<component>.logits`), not under the base model
    prefix: Transformers loads keys that match as they are, so a checkpoint of either class loads into the other
    with its selectors.
    """

    attention_class: type  # the family's head-selection attention class
    #: Whether a full forward pass (no cache passed in) of a batch whose tasks are interleaved reorders its examples
    #: so that each task's lie side by side, and returns every output in the batch's own order: the layers then
    #: slice the batch by task instead of gathering and scattering its rows in every layer. The results are the
    #: same up to floating-point rounding. Set it on the class or on a model.
    group_mixed_batches: bool = True
    #: `{Auto class name: model class name}` of the family, written to `config.auto_map` by `save_pretrained` so
    #: that every Auto class the stock family supports loads the saved model with `trust_remote_code=True`.
    head_selection_auto_classes: dict[str, str] = {}
    #: The submodule of the base model that a generation class's stock forward calls, where a mixed batch is grouped
    #: (`""`: the base model itself; a causal LM's stock forward calls `model.decoder`, past its wrapper).
    grouped_call_path: str = ""
    #: Loaded in half precision (`dtype=torch.bfloat16`), `phi` stays in float32 (see `HeadSelector._apply`).
    _keep_in_fp32_modules_strict = ["head_selection"]

    def install_head_selection(self) -> None:
        """Add the selectors and swap the attention of every selecting component for a head-selection one."""
        config = self.config
        config.check_head_selection()  # again: a config edited after it was made (say, H') is checked before it builds
        self.head_selection = ComponentSelectors(config)
        base = self.base_model  # the model itself for the base model classes
        for component, selector in self.head_selection.items():
            for index in range(selector.num_layers):
                layer_path, name = attention_path(component, index).rsplit(".", 1)
                layer = base.get_submodule(layer_path)
                stock = getattr(layer, name)
                attention = self.attention_class(
                    embed_dim=stock.embed_dim,
                    num_heads=stock.num_heads,
                    dropout=stock.dropout,
                    is_decoder=stock.is_decoder,
                    bias=stock.q_proj.bias is not None,
                    is_causal=stock.is_causal,
                    config=config,
                    layer_idx=index if stock.layer_idx is None else stock.layer_idx,
                )
                attention.enable_head_selection(component, index, selector.total_heads, selector)
                setattr(layer, name, attention)
                self.__dict__.setdefault("_selecting_attentions", []).append(attention)  # not a second registration
        if config.task_adapter_dim:
            self._install_task_adapters()
        if base is not self:  # a generation class: mixed batches are grouped where its forward calls the base model
            called = base.get_submodule(self.grouped_call_path)
            # made here: torch 2.11 cannot compile a `setdefault` in the hook
            called.__dict__["_grouping_inverses"] = []
            called.register_forward_pre_hook(self._group_base_model_call, with_kwargs=True)
            called.register_forward_hook(self._restore_base_model_outputs, with_kwargs=True)
        self.post_init()  # initialises only the new modules: the stock ones are marked initialised already

    def _install_task_adapters(self) -> None:
        """A [`TaskAdapters`] after every encoder and decoder layer (`layer.task_adapter`), applied by a forward
        hook that reads the task ids from the layer's keyword arguments."""
        config = self.config
        for side, layers in self._layers_by_side():
            sides = config.adapter_sides(side)
            for layer in layers:
                layer.task_adapter = TaskAdapters(config.num_keys(sides), config.d_model, config.task_adapter_dim)
                layer.register_forward_hook(_AdapterHook(config, sides), with_kwargs=True)

    def initialize_weights(self):
        super().initialize_weights()
        # The stock encoder and decoder are sub-models that initialise their own children with their own
        # `_init_weights`, which knows nothing of adapters: initialise those here (loaded tensors are skipped).
        for module in self.modules():
            if isinstance(module, TaskAdapters):
                self._init_weights(module)
                for parameter in module.parameters():
                    parameter._is_hf_initialized = True

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, HeadSelector) and module.logits is not None:
            init.uniform_(module.logits, *LOGIT_INIT_RANGE)
        if isinstance(module, TaskAdapters):  # up-projections at zero: fresh adapters change nothing
            init.ones_(module.layer_norm_weight)
            init.zeros_(module.layer_norm_bias)
            init.normal_(module.down_weight, std=self.config.init_std)
            init.zeros_(module.down_bias)
            init.zeros_(module.up_weight)
            init.zeros_(module.up_bias)

    # ---- tasks ------------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, *args, task: str | None = None, encoder_task: str | None = None,
                        decoder_task: str | None = None, **kwargs):
        """`PreTrainedModel.from_pretrained`, plus default tasks: see [`~HeadSelectionModelMixin.set_default_task`].

        Config keywords passed here may change what runs (temperature, noise, KL weight, default tasks) and add
        fresh task adapters to a checkpoint without them, not change or drop trained adapters, nor the tasks or the
        structure the weights were trained for (task lists, task type, strategy, components, `H'`, cross-attention
        key): a value other than the saved
        one is a `ValueError` (the same value is accepted), passed here or in a `config=` (which is how
        `AutoModelForSeq2SeqLM.from_pretrained(path, **keywords)` passes them).
        """
        fixed = {name: kwargs.pop(name) for name in TRAINED_STRUCTURE_KEYWORDS if name in kwargs}
        checkpoint = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        given = kwargs.get("config")
        if is_head_selection_config(given) and checkpoint is not None:
            kept = TRAINED_STRUCTURE_KEYWORDS + ADAPTER_KEYWORDS
            refuse_saved_structure_change(cls.config_class, checkpoint, {name: getattr(given, name) for name in kept},
                                          kwargs, given_as="from_pretrained(..., config=<a config with {name}={value!r}>)")
        adapters = {name: kwargs[name] for name in ADAPTER_KEYWORDS if name in kwargs}
        if adapters and checkpoint is not None:
            refuse_saved_structure_change(cls.config_class, checkpoint, adapters, kwargs)
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # (model, loading info) on request
        refuse_structure_change(model.config, fixed)
        if task is not None or encoder_task is not None or decoder_task is not None:
            model.set_default_task(task, encoder_task=encoder_task, decoder_task=decoder_task)
        return loaded

    def set_default_task(self, task: str | None = None, *, encoder_task: str | None = None,
                         decoder_task: str | None = None) -> None:
        """Set the tasks used when no `encoder_task_ids` / `decoder_task_ids` are given.

        `task` becomes the default of every side that knows it (a name known on neither side is an error);
        `encoder_task` / `decoder_task` set one side explicitly and take precedence.
        """
        for side, name in task_names(self.config, task, encoder_task, decoder_task).items():
            setattr(self.config, f"default_{side}_task", name)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`; with remote code (the classes registered for an Auto class, as
        importing `hf_headsel` does), `config.auto_map` names every model class of the family, so that `AutoModel`
        and the family's generation Auto class both load the folder, as they load a stock checkpoint."""
        if self._auto_class is not None and self.head_selection_auto_classes:
            module = type(self).__module__.split(".")[-1]  # the flat module name the saved file will have
            auto_map = dict(getattr(self.config, "auto_map", None) or {})
            auto_map.update({auto: f"{module}.{name}" for auto, name in self.head_selection_auto_classes.items()})
            self.config.auto_map = auto_map
        saved = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", args[0] if args else True):
            _save_pipeline_modules(Path(save_directory), self.config)
        return saved

    def clear_head_selection_cache(self) -> None:
        """Drop what the attention layers and adapters cached for evaluation (per-task weight rows; see
        [`ParameterDerivedCache`]): needed only after writes through `param.data`, which the cache cannot see."""
        for module in self.modules():
            if isinstance(module, EvalCacheMixin):
                module.clear_eval_cache()

    def selected_heads(self) -> dict[str, torch.LongTensor]:
        """The deterministic choice: `{component: LongTensor[tasks, layers, H]}`, candidates listed slot by slot."""
        return {component: selector.selected_heads() for component, selector in self.head_selection.items()}

    # ---- forward helpers --------------------------------------------------------------------------------------

    def task_routes(self, encoder_task_ids, decoder_task_ids, batch_size: int, device: torch.device,
                    other_keywords: Sequence[str] = ()) -> Routing:
        """The [`Routing`] of a forward pass, handed to the layers as `head_selection_routing`: the ids of both
        sides, validated once, and (unless evaluating without autograd, where the layers cache their choice) the
        [`HeadDraw`] of every component: one Gumbel-sigmoid sample of all layers per forward pass in training.

        `other_keywords`, the names of the forward's other keyword arguments, may not name a task: the stock forward
        passes unknown keywords on unread, so a misspelled `decoder_task_id=` would run every example on the default
        task."""
        misspelled = [name for name in other_keywords if "task" in name]
        if misspelled:
            raise ValueError(f"unknown keyword arguments {misspelled}: the task ids are encoder_task_ids and "
                             "decoder_task_ids")
        draws = None
        if self.training or torch.is_grad_enabled():
            temperature = float(self.config.head_selection_temperature)
            noise_scale = float(self.config.head_selection_noise_scale)
            if not (temperature > 0 and noise_scale >= 0):  # set at run time (a schedule, by hand): not checked yet
                raise ValueError(f"head_selection_temperature must be > 0 and head_selection_noise_scale >= 0, got "
                                 f"{temperature} and {noise_scale}")
            # under gradient checkpointing every layer makes its own gates (see `HeadSelector.draw`)
            per_layer = self.training and self._checkpoints_layers()
            draws = {
                component: selector.draw(self.training, temperature, device, gates_per_layer=per_layer,
                                         noise_scale=noise_scale)
                for component, selector in self.head_selection.items()
            }
        return Routing(
            encoder=self._remembered_route("encoder", encoder_task_ids, batch_size, device),
            decoder=self._remembered_route("decoder", decoder_task_ids, batch_size, device),
            draws=draws,
        )

    def routed_forward(self, forward: Callable, routing: Routing, **inputs):
        """`forward(**inputs)` (the stock base model's forward) with the layers routed by `routing`: a mixed batch is
        grouped by task first where that pays ([`group_mixed_batches`]), and its outputs are put back in the batch's
        order."""
        if not self._groups_by_task(routing, inputs):
            return forward(**inputs, head_selection_routing=routing)
        inputs, grouped, inverse = self._grouped_by_task(routing, inputs)
        return take_examples(forward(**inputs, head_selection_routing=grouped), inverse)

    def _groups_by_task(self, routing: Routing | None, inputs: dict) -> bool:
        """Whether a call with `inputs` is grouped by task: grouping on, an interleaved mixed batch, not a decoding
        step (its cache is laid out in the batch's order), no input this model does not know to be batch-first (left
        as it is rather than guessed), and some layer that gains from it. The cheap checks come first: this runs on
        every forward pass."""
        if routing is None or not routing.interleaved or not self.group_mixed_batches or is_compiling():
            return False
        if inputs.get(CACHE_KWARG) is not None:
            return False
        if any(isinstance(value, torch.Tensor) and value.dim() and key not in BATCH_FIRST_INPUTS
               for key, value in inputs.items()):
            return False
        return self._projects_task_by_task(routing.encoder.ids.device)

    def _grouped_by_task(self, routing: Routing, inputs: dict) -> tuple[dict, Routing, torch.LongTensor]:
        """The inputs and routing of an interleaved mixed batch grouped by task ([`Routing.grouped`]), and the indices
        that put the outputs back."""
        order, inverse, routing = routing.grouped()
        inputs = {key: take_examples(value, order) if key in BATCH_FIRST_INPUTS else value
                  for key, value in inputs.items()}
        return inputs, routing, inverse

    def _projects_task_by_task(self, device: torch.device) -> bool:
        """Whether some layer of a full forward pass on `device` takes a mixed batch task by task (adapters, or an
        attention layer projecting `"grouped"` or `"batched"`): only those gain from grouping; layers that gather
        each example's heads (`"gathered"`, the CUDA default) do not."""
        if self.config.task_adapter_dim:
            return True
        return any(layer.mixed_batch_projection in ("grouped", "batched")
                   or (layer.mixed_batch_projection == "auto" and device.type != "cuda")
                   for layer in self.__dict__.get("_selecting_attentions", ()))

    def _group_base_model_call(self, module, args: tuple, kwargs: dict):
        """Forward pre-hook of the base model inside a generation class: groups a mixed batch where the stock
        forward calls the base model, so that the language-model head and the loss see the batch in its own order
        (the logits are never reordered). Pushes the indices that put the outputs back, or `None`."""
        routing, inverse, grouped_call = kwargs.get(ROUTING_KWARG), None, None
        # the stock forward passes at most the main input by position, the rest by keyword
        if len(args) <= 1 and self._groups_by_task(routing, kwargs):
            inputs = {**dict(zip((self.main_input_name,), args)), **kwargs}
            inputs, routing, inverse = self._grouped_by_task(routing, inputs)
            grouped_call = (), {**inputs, ROUTING_KWARG: routing}
        module.__dict__["_grouping_inverses"].append(inverse)
        return grouped_call

    def _restore_base_model_outputs(self, module, args: tuple, kwargs: dict, outputs):
        """Forward hook pairing [`_group_base_model_call`]: the base model's outputs in the batch's order."""
        inverse = module.__dict__["_grouping_inverses"].pop()  # last in, first out: stays paired after an error
        return outputs if inverse is None else take_examples(outputs, inverse)

    def _layers_by_side(self) -> list[tuple[str, torch.nn.ModuleList]]:
        """`[(side, its layers)]` of the sides this model has (a causal LM has no encoder)."""
        base = self.base_model
        return [(side, getattr(base, side).layers) for side in SIDES if hasattr(base, side)]

    def _checkpoints_layers(self) -> bool:
        """Whether gradient checkpointing is on for any encoder or decoder layer."""
        return any(getattr(layer, "gradient_checkpointing", False)
                   for _, layers in self._layers_by_side() for layer in layers)

    def _remembered_route(self, side: str, ids, batch_size: int, device: torch.device) -> TaskRoute:
        """[`task_route`], remembered within a `generate` call for its id tensor: `generate` passes the same tensor
        at every decoding step, which then costs no validation and no host synchronisation. Outside `generate` every
        call routes afresh: a caller's tensor may change between calls without a version bump (written through
        `.data`, or through a numpy array sharing its memory)."""
        if ids is None and side in self.unread_sides():
            ids = 0  # no layer reads this side's task: any valid id routes it, and none needs to be given
        memo = self.__dict__.get("_generation_memo")
        if is_compiling() or memo is None:  # the memo is host-side state: traced code routes afresh
            return task_route(self.config, side, ids, batch_size, device)
        version = None
        if isinstance(ids, torch.Tensor):
            version = version_of(ids)
            remembered = memo.get(side)
            # the tensor itself is kept in the memo, so its id cannot be reused; `_version` catches in-place writes
            if remembered is not None and remembered[0] is ids and remembered[1] == version:
                route = remembered[2]
                if route.ids.shape[0] == batch_size and route.ids.device == device:
                    return route
        route = task_route(self.config, side, ids, batch_size, device)
        memo[side] = (ids, version, route) if isinstance(ids, torch.Tensor) else None
        return route

    def unread_sides(self) -> tuple[str, ...]:
        """The sides whose task no layer of this model reads, routed to their first task when no ids are given: none
        in an encoder-decoder model, whose examples each have both tasks."""
        return ()

    def head_selection_kl(self, routing: Routing, labels: torch.LongTensor) -> torch.Tensor:
        """The batch KL: per component, the mean of the task KLs weighted by each task's target tokens."""
        tokens = (labels != -100).sum(dim=-1).float()
        # no target token at all: weigh the examples equally (`where`, not `if`: no host synchronisation, and
        # traceable by torch.compile)
        tokens = torch.where(tokens.sum() == 0, torch.ones_like(tokens), tokens)
        total = tokens.new_zeros(())
        for component, selector in self.head_selection.items():
            task_kl = selector.task_kl()
            if task_kl is None:
                continue
            route = routing.keyed(self.config, self.config.component_sides(component))
            total = total + (task_kl.to(tokens.device)[route.ids] * tokens).sum() / tokens.sum()
        return total

class HeadSelectionModelMixin(HeadSelectionBaseModelMixin):
    """[`HeadSelectionBaseModelMixin`] plus generation, the KL in the loss, task export and upcycling, for the
    stock `...ForConditionalGeneration` classes (mixed in before them). The family's `forward` wraps the stock
    output with [`~HeadSelectionModelMixin.add_head_selection_kl`].
    """

    #: What [`add_head_selection_kl`] makes of the stock output.
    head_selection_output_class: type = HeadSelSeq2SeqLMOutput

    def generate(self, inputs: torch.Tensor | None = None, *args, encoder_task_ids=None, decoder_task_ids=None,
                 **kwargs):
        """`GenerationMixin.generate`, every example routed by its `encoder_task_ids` / `decoder_task_ids`."""
        encoder_task_ids, decoder_task_ids = (
            self._generation_task_ids(side, ids) for side, ids in zip(SIDES, (encoder_task_ids, decoder_task_ids))
        )
        outer = self.__dict__.get("_generation_memo")  # a generate call inside a generate call keeps its own
        self.__dict__["_generation_memo"] = {}
        try:
            return super().generate(
                inputs, *args, encoder_task_ids=encoder_task_ids, decoder_task_ids=decoder_task_ids, **kwargs
            )
        finally:
            self.__dict__["_generation_memo"] = outer

    def _generation_task_ids(self, side: str, task_ids):
        """Task ids as `generate` can expand them to batch x beams: a list (of ids or of task names) as a tensor, a
        0-dimensional tensor (one id for the whole batch) as an int; anything else as it is."""
        if isinstance(task_ids, (list, tuple)):
            return torch.as_tensor(task_names_to_ids(self.config, side, task_ids))
        if isinstance(task_ids, torch.Tensor) and task_ids.dim() == 0:
            check_integer_ids(side, task_ids)
            return int(task_ids)
        return task_ids

    def prepare_inputs_for_generation(self, *args, **kwargs) -> dict:
        """The stock inputs of a generation step, plus, without autograd, the evaluation caches of the selecting
        decoder layers, validated on the host once per `generate` call ([`_generation_eval_weights`]).

        A step would otherwise validate them in every layer (a few microseconds of Python per layer and step, which
        adds up against a small model's step), and a compiled step (static cache) cannot validate them at all: it
        would gather every selected head's weight rows in its graph at every step."""
        inputs = super().prepare_inputs_for_generation(*args, **kwargs)
        if self.training or torch.is_grad_enabled() or is_compiling():
            return inputs
        # only a compileable (static) cache lets `generate` compile its decoding step, which reads the ids traced
        compileable = getattr(inputs.get(CACHE_KWARG), "is_compileable", False)
        # a decoder-only model's step inputs are the decoder's, under the plain names
        reference = first_tensor(*(inputs.get(name) for name in ("decoder_input_ids", "decoder_inputs_embeds",
                                                                 "input_ids", "inputs_embeds")))
        inputs[EVAL_WEIGHTS_KWARG] = self._generation_eval_weights(
            inputs.get("encoder_task_ids"), inputs.get("decoder_task_ids"), reference.shape[0], reference.device,
            compileable)
        return inputs

    # `generate` checks its keywords against this signature: the stock method's, which this one hands them to (before
    # 5.24 assisted decoding hands a head-selection draft its cache as `past_key_values`, a name only that one lists)
    prepare_inputs_for_generation.__signature__ = inspect.signature(GenerationMixin.prepare_inputs_for_generation)

    def _generation_eval_weights(self, encoder_task_ids, decoder_task_ids, batch_size: int, device: torch.device,
                                 compileable: bool) -> dict[str, dict]:
        """[`_decoder_eval_weights`], remembered for the rest of the `generate` call while the step inputs that
        route it are the same (the id tensors themselves, unchanged): without autograd nothing changes the weights
        between the steps of one call. Weights changed in place during a call (from a streamer or a logits
        processor) are followed from the next call on."""
        memo = self.__dict__.get("_generation_memo")
        if memo is None:  # a step prepared outside `generate`
            return self._decoder_eval_weights(encoder_task_ids, decoder_task_ids, batch_size, device, compileable)
        ids = (encoder_task_ids, decoder_task_ids)
        # within one call the ids' identity is enough for an inference tensor (no version counter; see `version_of`)
        key = (*(version_of(i) if isinstance(i, torch.Tensor) else i for i in ids), batch_size, device, compileable)
        last = memo.get("last")  # (ids, key, weights); the ids are kept, so their object ids cannot be reused
        if last is None or any(a is not b for a, b in zip(last[0], ids)) or last[1] != key:
            last = memo["last"] = (ids, key, self._decoder_eval_weights(*ids, batch_size, device, compileable))
        return last[2]

    def _decoder_eval_weights(self, encoder_task_ids, decoder_task_ids, batch_size: int, device: torch.device,
                              compileable: bool = False) -> dict[str, dict]:
        """`{layer key: caches}` of every selecting decoder attention for a decoding step routed by these ids
        ([`HeadSelectionAttentionMixin.eval_weights`]). Both sides are routed, in the order `forward` routes them,
        which then finds them remembered: no id tensor is validated twice. `compileable`: the step may be compiled,
        reading tensor ids traced, so the layers keyed by them also hand over all candidates' weights."""
        ids = {"encoder": encoder_task_ids, "decoder": decoder_task_ids}
        # a Routing builds each keyed route once, not once per layer (a pair key reads the ids on the host)
        routing = Routing(**{side: self._remembered_route(side, ids[side], batch_size, device) for side in SIDES})
        weights = {}
        for layer in self.__dict__.get("_selecting_attentions", ()):
            if component_side(layer.component) == "decoder":
                traced = compileable and any(isinstance(ids[side], torch.Tensor) for side in layer.key_sides)
                weights[layer.selection_key] = layer.eval_weights(routing.keyed(self.config, layer.key_sides), traced)
        return weights

    def _encoder_uses_decoder_tasks(self) -> bool:
        """Whether the encoder's layers need the decoder tasks too (adapters keyed by direction)."""
        return bool(self.config.task_adapter_dim) and "decoder" in self.config.adapter_sides("encoder")

    def _encoder_pass_for_generation(self, inputs_tensor, model_kwargs, model_input_name, generation_config):
        """The stock encoder pass of `generate`, its task ids validated and routed once for all the layers: raw ids
        would be validated by every layer, each time with a host synchronisation. The stock pass hands the encoder
        no `decoder_*` keyword, so the routing also carries the decoder tasks when the encoder needs them (adapters
        keyed by direction). `generate` runs it, and so does assisted decoding for a head-selection draft. Installed
        under the installed transformers' name for that pass ([`GENERATION_ENCODER_PASS`], below the class)."""
        stock_pass = getattr(super(), GENERATION_ENCODER_PASS)
        if ROUTING_KWARG in model_kwargs:
            return stock_pass(inputs_tensor, model_kwargs, model_input_name, generation_config)
        sides = SIDES if self._encoder_uses_decoder_tasks() else ("encoder",)
        routes = {side: self._remembered_route(side, model_kwargs.get(f"{side}_task_ids"), inputs_tensor.shape[0],
                                               inputs_tensor.device) for side in sides}
        model_kwargs[ROUTING_KWARG] = Routing(**{"decoder": None, **routes})  # the sides the encoder reads
        try:
            return stock_pass(inputs_tensor, model_kwargs, model_input_name, generation_config)
        finally:  # the decoding steps route themselves (`forward`)
            model_kwargs.pop(ROUTING_KWARG, None)

    def _get_candidate_generator(self, generation_config, input_ids, inputs_tensor, logits_processor, model_kwargs,
                                 assistant_model=None, *args, **kwargs):
        """Assisted decoding (`generate(..., assistant_model=draft)`): a draft whose forward takes no task keywords (a
        stock model) drafts without them, as it would refuse them; a head-selection draft (this package's or its
        remote code) gets them, so it must know the same tasks. The candidates are verified by this model, routed
        as ever, so the tokens do not depend on the draft."""
        drafts_without_tasks = assistant_model is not None and (
            "decoder_task_ids" not in inspect.signature(assistant_model.forward).parameters)
        if drafts_without_tasks:
            model_kwargs = {key: value for key, value in model_kwargs.items() if key not in LAYER_KWARGS}
        return super()._get_candidate_generator(generation_config, input_ids, inputs_tensor, logits_processor,
                                                model_kwargs, assistant_model, *args, **kwargs)

    def export_task_model(self, task: str | None = None, *, encoder_task: str | None = None,
                          decoder_task: str | None = None):
        """A stock model (H heads) computing what this model computes for one task: see
        `conversion.export_task_model`."""
        return export_task_model(self, task, encoder_task=encoder_task, decoder_task=decoder_task)

    @classmethod
    def from_stock(cls, stock_model_or_path, *, from_pretrained_kwargs: dict | None = None, **head_selection_keywords):
        """A head-selection model upcycled from a stock checkpoint, equal to it for every task at initialisation:
        see `conversion.from_stock`."""
        return from_stock(cls, stock_model_or_path, from_pretrained_kwargs=from_pretrained_kwargs,
                          **head_selection_keywords)

    def add_head_selection_kl(self, outputs, labels, routing: Routing):
        """Wrap stock outputs in [`head_selection_output_class`]; with `labels`, add `head_selection_kl_weight * KL`
        to the loss; without them, a training forward says once that a weighted KL is left out of any loss."""
        # `return_dict=True` was asked of the stock forward; a `return_dict=False` tuple is made by `can_return_tuple`
        # on the head-selection forward, from this output (`head_selection_kl` last).
        outputs = self.head_selection_output_class(**outputs)
        if labels is not None:
            kl = self.head_selection_kl(routing, labels)
            outputs.head_selection_kl = kl
            if self.config.head_selection_kl_weight:
                outputs.loss = outputs.loss + self.config.head_selection_kl_weight * kl
        elif self.training and self.config.head_selection_kl_weight and not is_compiling():
            logger.warning_once(KL_WITHOUT_LABELS.format(weight=self.config.head_selection_kl_weight))
        return outputs


# `generate` runs the encoder through this method, named as the installed transformers names it
setattr(HeadSelectionModelMixin, GENERATION_ENCODER_PASS, HeadSelectionModelMixin._encoder_pass_for_generation)


class _AdapterHook:
    """A forward hook running a layer's output through the adapter of every example's task. A class rather than a
    closure, so that a model with adapters pickles (`torch.save(model)`, spawned workers) like the stock model."""

    def __init__(self, config: HeadSelectionConfigMixin, sides: tuple[str, ...]):
        self.config, self.sides = config, sides

    def __call__(self, layer, args, kwargs, output):
        hidden_states = output[0] if isinstance(output, tuple) else output
        route = route_from_kwargs(self.config, self.sides, kwargs, hidden_states)
        adapted = layer.task_adapter(hidden_states, route)
        return (adapted, *output[1:]) if isinstance(output, tuple) else adapted


__all__ = ["BATCH_FIRST_INPUTS", "HeadSelSeq2SeqLMOutput", "HeadSelectionBaseModelMixin", "HeadSelectionModelMixin"]
