# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Attention: a stock attention layer with `H'` candidate heads, of which every example uses the `H` its task selects.

[`HeadSelectionAttentionMixin`] is mixed in before a family's stock attention class (`MarianAttention`,
`Speech2TextAttention`). Only the selected heads are projected, attended and cached; in evaluation the selected
projection rows are sliced once per task, not once per decoding step.

Copied next to saved models as remote code; imports only torch, transformers and its siblings `compat.py`,
`eval_cache.py`, `routing.py`, `selection.py` and `task_rows.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_flash_attention_utils import FlashAttentionKwargs
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack

from .compat import takes_stock_cache_name
from .eval_cache import EvalCacheMixin
from .routing import (
    EVAL_WEIGHTS_KWARG,
    LAYER_KWARGS,
    ROUTING_KWARG,
    Routing,
    TaskRoute,
    is_compiling,
    is_strict_exporting,
    route_from_kwargs,
)
from .selection import HeadSelector
from .task_rows import TaskRowsLinear, task_rows_linear, task_rows_of

MIXED_BATCH_PROJECTIONS = ("auto", "grouped", "gathered", "batched")
#: The parts of the query/key/value projection a call needs: all three from one input (self-attention), or the
#: queries and the keys/values from different inputs (cross-attention). Rows of the stacked q/k/v weights, in units
#: of one projection's rows.
PARTS = {"qkv": (0, 3), "q": (0, 1), "kv": (1, 3)}
#: The projections whose rows are the candidates' queries, keys and values, in the order of [`PARTS`].
PROJECTIONS = ("q_proj", "k_proj", "v_proj")
#: `"auto"`'s cost model of a CPU decoding step's projection: reading one head's weight rows costs about as much as
#: multiplying them by this many examples. Fitted on a 2-core x86 host, one thread (Marian, d_model 256, H = 4, every
#: component selecting; benchmarks/results/issue15/session31): gathered and batched tie at H' = 8 with 4 tasks of 2
#: examples, gathered is faster at H' = 6 (8.6 %) or with 8 tasks of 1 (11.7 %), batched with 2 tasks of 4 or with
#: beam search's 10 rows per task.
EXAMPLES_PER_WEIGHT_READ = 4
#: Strict `torch.export` registers `phi` as a parameter of the module it finds it through (this layer), and then
#: cannot map it back to the exported root when that root is an encoder or decoder alone, which does not own it.
PART_EXPORT_REFUSAL = (
    "torch.export.export(..., strict=True) of a head-selection model's encoder or decoder alone (as transformers' "
    "ExecuTorch wrappers such as Seq2SeqLMExportableModule do) is not supported: phi, the head-selection logits, "
    "is registered on the whole model. Export the whole model, pass strict=False, or export a stock model of one "
    "task (model.export_task_model(task)) and export that."
)


def cheaper_step_projection(route: TaskRoute, heads: int, total_heads: int) -> str:
    """`"batched"` or `"gathered"`, whichever costs a CPU decoding step of the mixed batch `route` (a known layout)
    less in [`EXAMPLES_PER_WEIGHT_READ`]'s model: batched reads each task's `H` heads' rows and multiplies them by its
    block of examples (padded to the largest task's); gathered reads all `H'` candidates' rows once and multiplies
    them by every example. A tie goes to batched (the stock model's arithmetic)."""
    batched = len(route.tasks) * heads * (EXAMPLES_PER_WEIGHT_READ + route.task_blocks[2])
    gathered = total_heads * (EXAMPLES_PER_WEIGHT_READ + len(route.ids))
    return "batched" if batched <= gathered else "gathered"


class HeadSelectionAttentionMixin(EvalCacheMixin):
    """Turns a stock attention layer (`q_proj`, `k_proj`, `v_proj`, `out_proj`) into one with `H'` candidate heads.

    Mixed in before the stock attention class, so output capture (`output_attentions=True`) still recognises it.
    The query/key/value projections produce `H' * head_dim` features, candidate `h` owning rows
    `h*head_dim .. (h+1)*head_dim - 1`. Each example projects only the `H` heads its task selects: the rows of the
    three projections are gathered into one `[3 * H * head_dim, d_model]` matrix per task (once per task in
    evaluation), so self-attention takes one matmul where the stock layer takes three. It attends with them like the
    stock layer, and the output projection (`d_model x d_model`) sees them in slots `0 .. H-1`. The KV cache holds
    only the selected heads.
    """

    eager_attention: Callable  # the stock family's eager attention function, set by the family module
    #: How a batch that mixes tasks is projected (see [`_projector`]): `"grouped"` (one matmul per task present, on
    #: its examples and its heads' rows: the stock model's work), `"gathered"` (one matmul over all `H'` candidates,
    #: then each example gathers its heads), `"batched"` (one batched matmul over the tasks present, each on its
    #: examples and its heads' rows, the tasks' example counts padded to the largest), or `"auto"`: gathered on CUDA;
    #: on other devices, full passes grouped in training and batched in evaluation (grouped where tasks hold unequal
    #: numbers of examples), and one-token decoding steps batched or gathered, whichever reads and multiplies less
    #: ([`EXAMPLES_PER_WEIGHT_READ`]). Set it on the class or on a layer. Single-task batches
    #: project only their selected heads, except in training on CUDA under `"auto"` ([`_gathers_single_task`]).
    mixed_batch_projection: str = "auto"

    def enable_head_selection(self, component: str, layer: int, total_heads: int, selector: HeadSelector) -> None:
        self.component, self.selection_layer, self.total_heads = component, layer, total_heads
        # Read once: both are fixed with the logits' shape, and a config attribute read costs microseconds in
        # every layer call of every decoding step.
        self.key_sides = self.config.component_sides(component)
        self.selection_key = f"{component}.{layer}"  # the layer's key in `head_selection_eval_weights`
        bias = self.q_proj.bias is not None
        width = total_heads * self.head_dim
        self.q_proj = nn.Linear(self.embed_dim, width, bias=bias)
        self.k_proj = nn.Linear(self.embed_dim, width, bias=bias)
        self.v_proj = nn.Linear(self.embed_dim, width, bias=bias)
        # A plain reference, not a submodule: `phi` is registered once, on the model.
        self.__dict__["selector"] = selector
        self.init_eval_cache()

    def __setattr__(self, name: str, value) -> None:
        # A projection replaced (PEFT wraps it, and `merge_and_unload` puts it back with its weight merged through
        # `.data`, which no version counter sees): what was derived from the old one is stale.
        if name in PROJECTIONS or name == "out_proj":
            self.clear_eval_cache()
        super().__setattr__(name, value)

    def extra_repr(self) -> str:
        return (
            f"component={self.component}, layer={self.selection_layer}, heads={self.num_heads}, "
            f"total_heads={self.total_heads}"
        )

    # ---- weights ----------------------------------------------------------------------------------------------

    def _projections(self, part: str = "qkv") -> tuple[nn.Linear, ...]:
        """The projections (`q_proj`, `k_proj`, `v_proj`) whose rows make up `part` of [`PARTS`]."""
        start, stop = PARTS[part]
        return tuple(self._modules[name] for name in PROJECTIONS[start:stop])

    def _projects_through_modules(self) -> bool:
        """Whether a q/k/v projection is more than a plain `nn.Linear` computing `x @ W^T + b` of its own `weight`:
        another class (wrapped by PEFT's LoRA and the like, quantized by `torch.ao.quantization.quantize_dynamic`,
        parametrized), or a plain one with forward hooks (pruning and `weight_norm` compute the weight in a pre-hook;
        DeepSpeed gathers it in one; a user's hook records the output) or a replaced `forward` (accelerate's
        offloading). Its weight rows cannot be sliced per task then: every candidate is projected through the module
        itself, hooks included, and each example takes its heads ([`_module_projector`])."""
        modules = self._modules  # runs in every layer call: no generator, no `nn.Module.__getattr__`
        for name in PROJECTIONS:
            module = modules[name]
            if (type(module) is not nn.Linear or module._forward_hooks or module._forward_pre_hooks
                    or "forward" in module.__dict__):
                return True
        return False

    def _stacked_weights(self, part: str = "qkv") -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weights (and biases) of `part` of all `H'` candidates stacked: `[3 * H' * head_dim, d_model]` for
        q, k and v. Built from the projections themselves (not sliced from all three): a slice would cost a
        zero-filled copy of the whole stack in the backward pass."""
        projections = self._projections(part)
        if len(projections) == 1:
            return projections[0].weight, projections[0].bias
        bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
        return torch.cat([p.weight for p in projections]), bias

    def _task_weights(self, heads: torch.LongTensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The stacked q/k/v weight and bias of one task's heads `heads` (`[H]`): `[3 * H * head_dim, d_model]`, rows
        slot by slot."""
        weight, bias = self._task_weight_stack(heads[None])
        return weight[0], None if bias is None else bias[0]

    def _task_weight_stack(self, heads: torch.LongTensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The stacked q/k/v weights of each row of `heads` (`[tasks, H]`): `[tasks, 3 * H * head_dim, d_model]` (bias
        `[tasks, 3 * H * head_dim]`)."""
        projections = self._projections()
        rows = self._task_rows(heads, self.q_proj.weight.device)
        bias = None if self.q_proj.bias is None else task_rows_of(tuple(p.bias for p in projections), rows)
        return task_rows_of(tuple(p.weight for p in projections), rows), bias

    def _task_rows(self, heads: torch.LongTensor, device: torch.device) -> torch.LongTensor:
        """`[tasks, 3 * H * head_dim]`: the rows of the stacked q/k/v weights of each row of `heads`, slot by slot."""
        return (heads.to(device)[:, None, :, None] * self.head_dim + self._row_offsets(device)).flatten(1)

    def _row_offsets(self, device: torch.device) -> torch.LongTensor:
        """`[3, 1, head_dim]`: the row of dimension `d` of head `h` in projection `p` (q, k, v = 0, 1, 2) of the
        stacked weights is `p * H' * head_dim + h * head_dim + d`; this holds `p * H' * head_dim + d`. Made once
        per device."""
        if is_compiling():  # traced: a few constant kernels, no module state written
            projection = torch.arange(3, device=device)[:, None, None] * self.q_proj.out_features
            return projection + torch.arange(self.head_dim, device=device)
        offsets = self.__dict__.setdefault("_row_offsets_by_device", {})
        if device not in offsets:
            projection = torch.arange(3, device=device)[:, None, None] * self.q_proj.out_features
            offsets[device] = projection + torch.arange(self.head_dim, device=device)
        return offsets[device]

    def _cache_sources(self) -> list[torch.Tensor]:
        """What the cached weights are derived from: the q/k/v weights and biases and `phi` (only `phi` of a
        projection that is no plain `nn.Linear`: see [`_projects_through_modules`])."""
        # Read through `_modules` / `_parameters`: this runs in every layer call, and `nn.Module.__getattr__` is slow.
        modules = self._modules
        params = [modules[name]._parameters.get(kind) for name in PROJECTIONS for kind in ("weight", "bias")]
        params.append(self.selector.logits)
        return [p for p in params if p is not None]

    def _eval_cached(self, key, compute: Callable[[], object], prepared: dict | None = None):
        """`compute()` cached under `key` until the weights or `phi` change (evaluation without autograd only);
        `prepared[key]` where given: the value [`eval_weights`] validated for this call on the host.

        Recomputed when a projection weight or `phi` is replaced (`load_state_dict(assign=True)`) or changed in place
        through autograd-visible ops (optimizer steps, `load_state_dict`, `copy_` under `no_grad`), and dropped when
        the module moves (`.to()`) or switches between `train()` and `eval()` (see [`ParameterDerivedCache`]).
        Writes through `param.data` bypass the version counters: call `model.clear_head_selection_cache()` after
        those.

        Under torch.compile the value is computed in the graph instead (unless `prepared`): the `(id, _version)`
        guard is host-side state that dynamo cannot trace, and a compiled graph must follow the weights without it.
        """
        if prepared is not None and key in prepared:
            return prepared[key]
        if is_compiling():
            return compute()
        return self._eval_cache.get(key, self._cache_sources(), compute)

    def _device(self) -> torch.device:
        """Where the layer computes: its first parameter's device. A quantized layer has none, an offloaded one
        (accelerate) has them on the meta device: then `phi`'s, else the CPU, where quantized layers run."""
        for parameter in (*self.parameters(), self.selector.logits):
            if parameter is not None and not parameter.is_meta:
                return parameter.device
        return torch.device("cpu")

    def eval_weights(self, route: TaskRoute, traced: bool = False) -> dict:
        """The evaluation caches a one-token decoding step without autograd routed by `route` reads, validated now:
        the choice (`"heads"`), the weight and bias rows of the route's one task by part (key: the task; see
        [`_cached_task_weights`]), the tasks' rows stacked for a mixed batch projected `"batched"` (see
        [`_cached_batched_weights`]), and the stacked q/k/v weights of all candidates (`"all"`) where the step gathers
        each example's heads: a mixed batch projected `"gathered"`, or any step whose ids are a tensor that a compiled
        graph cannot read (`traced`). `generate` validates them once per call and hands them to every step
        (`head_selection_eval_weights`): a compiled step cannot validate the cache, and would otherwise gather the
        selected rows in its graph at every step."""
        device = self._device()
        weights = {"heads": self._layer_choice(None, device)[0]}
        if self._projects_through_modules():  # no weight rows to keep: see [`_module_projector`]
            return weights
        task = self._serving_task(route)
        if task is not None:  # as [`_projector`] serves it: one task's rows
            weights[task] = self._cached_task_weights(task, device)
            mixed = None
        else:
            mixed = self._mixed_projection(route, device, step=True)
        if mixed == "batched":
            weights[("batched", route.tasks)] = self._cached_batched_weights(route.tasks, device)
        if mixed == "gathered" or traced:
            weights["all"] = self._eval_cached("all", self._stacked_weights)
        return weights

    # ---- the choice of heads ----------------------------------------------------------------------------------

    def _layer_choice(self, routing: Routing | None, device: torch.device,
                      prepared: dict | None = None) -> tuple[torch.LongTensor, torch.Tensor | None]:
        """The heads `[tasks, H]` of this layer and their gates (`None` when deterministic).

        From the draw the model made for this forward pass (`routing.draws`, one Gumbel-sigmoid sample of all layers
        in training); without one (a layer called directly), drawn here by the same rule. Cached in evaluation
        without autograd (`prepared`: see [`_eval_cached`]).
        """
        if routing is not None and routing.draws is not None:
            return routing.draws[self.component].layer(self.selection_layer)
        if self._uses_eval_cache():
            layer = self.selection_layer
            heads = self._eval_cached("heads", lambda: self.selector.draw(False, 1.0, device).layer(layer)[0],
                                      prepared)
            return heads, None
        draw = self.selector.draw(self.training, float(self.config.head_selection_temperature), device,
                                  noise_scale=float(self.config.head_selection_noise_scale))
        return draw.layer(self.selection_layer)

    def _cached_task_weights(self, task: int, device: torch.device, prepared: dict | None = None) -> dict:
        """The deterministic weight and bias rows of `task`'s heads for each part of [`PARTS`] (`{part: (weight,
        bias)}`), for evaluation without autograd: views of one stacked q/k/v matrix, sliced once per cache fill
        rather than in every call."""
        def compute():
            heads = self._layer_choice(None, device, prepared)[0]
            weight, bias = self._task_weights(heads[task])
            return {part: self._part_rows(weight, bias, part, self.num_heads) for part in PARTS}

        return self._eval_cached(task, compute, prepared)

    def _cached_batched_weights(self, tasks: tuple[int, ...], device: torch.device,
                                prepared: dict | None = None) -> dict:
        """[`_batched_weights`] of the deterministic choice of `tasks`, for evaluation without autograd: transposed
        into the batched matmul's layout once per cache fill. Only the last set of tasks is kept (a server's batches
        may mix any of them)."""
        key = ("batched", tasks)
        if (prepared is None or key not in prepared) and not is_compiling():
            self._eval_cache.keep_one(key, lambda k: isinstance(k, tuple) and k[0] == "batched")

        def compute():
            heads = self._layer_choice(None, device, prepared)[0]
            weight, bias = self._task_weight_stack(heads[list(tasks)])
            return self._batched_weights(weight.transpose(1, 2).contiguous(), bias)

        return self._eval_cached(key, compute, prepared)

    # ---- projections ------------------------------------------------------------------------------------------

    def _mixed_projection(self, route: TaskRoute, device: torch.device, step: bool) -> str:
        """How this layer projects a batch mixing the tasks of `route` (`step`: a one-token decoding step; see
        [`mixed_batch_projection`]): `"gathered"`, `"grouped"` or `"batched"`. A traced route (torch.compile) does
        not know which tasks it holds: each example gathers its heads."""
        mode = self.mixed_batch_projection
        if mode not in MIXED_BATCH_PROJECTIONS:
            raise ValueError(f"mixed_batch_projection must be one of {MIXED_BATCH_PROJECTIONS}, got {mode!r}")
        if not route.layout_known:
            return "gathered"
        if mode != "auto":
            return mode
        # auto, measured on CPU (benchmarks/projection_ab.py): a full pass in training projects grouped (the stock
        # model's arithmetic; batched keeps each task's gathered rows for the backward pass, and was slower at one
        # thread); in evaluation, with no padding, batched: 0.96 of grouped at one thread, 0.88-0.90 at two
        # (benchmarks/results/issue15/session31; unequal tasks, which pad, are not measured). A decoding step's
        # small matmuls, where reading the weights costs as much as multiplying them, take the cheaper of batched
        # (each task's rows, its examples) and gathered (every candidate's rows, every example). Where kernels are
        # launch-bound (CUDA) a fixed number of kernels beats one group per task: gathered.
        if device.type == "cuda":
            return "gathered"
        if not step:
            return "batched" if self._uses_eval_cache() and not route.pads_blocks else "grouped"
        return cheaper_step_projection(route, self.num_heads, self.total_heads)

    def _gathers_single_task(self, device: torch.device) -> bool:
        """Whether a single-task batch under autograd (training) projects gathered, as a mixed batch on CUDA does:
        `mixed_batch_projection="auto"` on CUDA. Measured on an H100 in bf16, every component selecting
        (benchmarks/results/gpu_2026-11-26_s30): 0.84-0.91x the selected rows' training step, from d_model 256 at
        batch 16 to d_model 1024 at batch 64 x 128 tokens, where launches, not the `H'/H` times q/k/v arithmetic,
        bound the step; it keeps the layer's stacked q/k/v weights for the backward pass (1.03-1.16x the memory the
        rows' path keeps). On the CPU the arithmetic counts (1.27x there): the selected rows."""
        return self.mixed_batch_projection == "auto" and device.type == "cuda"

    def _projector(self, route: TaskRoute, states: torch.Tensor, routing: Routing | None, prepared: dict | None):
        """A function `project(x, part)` giving the selected heads' queries, keys and/or values of `x` (`part` in
        [`PARTS`]), each `[batch, time, H, head_dim]`, and the gates (`[H]` or `[batch, H]`; `None` without
        sampling).

        A single-task batch (but in training on CUDA under `"auto"`, [`_gathers_single_task`]; and, with
        `mixed_batch_projection="grouped"`, every batch) projects only the selected heads' weight rows, one matmul per
        task present. `"batched"` does the same arithmetic in one batched matmul over the tasks present (their
        examples laid out in equal blocks, padded). `"gathered"` projects a batch onto all `H'` candidates and takes
        each example's `H` heads: `H'/H` times the projection work, but a fixed number of kernels and no loop over
        tasks, which is what counts where small kernels are launch-bound (CUDA).
        `prepared`: this layer's evaluation caches as validated for the call ([`eval_weights`]), or `None`.
        """
        through_modules = self._projects_through_modules()
        # without autograd in evaluation, the choice and the weights come from the layer's cache
        if self._uses_eval_cache():
            heads = gates = None
            task = self._serving_task(route)
            if task is not None and not through_modules:  # serving one task: its cached rows, validated once
                rows = self._cached_task_weights(task, states.device, prepared)
                return partial(self._project_rows, rows=rows), None
        else:
            heads, gates = self._layer_choice(routing, states.device)
        if gates is not None:  # one task's gates broadcast over the batch, else one row per example
            gates = gates[route.single_task] if route.single_task is not None else gates[route.ids]
        if through_modules:
            return self._module_projector(route, heads, states, prepared), gates
        if route.single_task is None:
            projection = self._mixed_projection(route, states.device, step=states.shape[-2] == 1)
        else:
            projection = "gathered" if heads is not None and self._gathers_single_task(states.device) else None
        if projection == "gathered":
            return self._gathered_projector(route, heads, states.device, prepared), gates
        if projection == "batched":
            if heads is None:
                weights = self._cached_batched_weights(route.tasks, states.device, prepared)
            else:
                weight, bias = self._task_weight_stack(heads[route.task_index])
                weights = self._batched_weights(weight.transpose(1, 2), bias)
            return partial(self._project_batched, route=route, weights=weights), gates
        if heads is None:  # no autograd: the cached rows of each task
            cached = partial(self._cached_task_weights, device=states.device, prepared=prepared)
            return partial(self._project_grouped, route=route, weights=lambda task, part: cached(task)[part]), gates
        first = route.tasks[0]
        present = heads[first : first + 1] if route.task_index is None else heads[route.task_index]
        return partial(self._project_grouped, route=route, rows=self._task_rows(present, states.device)), gates

    def _serving_task(self, route: TaskRoute) -> int | None:
        """The task whose rows serve the whole batch: its only task, or, when the layer has nothing to choose, any
        task present (with `H' = H` every task uses every head, in order: the adapter baseline's layers,
        `total_*_attention_heads` = `H`), so a mixed batch projects as one task, in one matmul. `None` otherwise, or
        with an unknown (traced) layout."""
        if route.single_task is not None:
            return route.single_task
        return route.tasks[0] if self.total_heads == self.num_heads and route.layout_known else None

    def _batched_weights(self, weight: torch.Tensor, bias: torch.Tensor | None) -> dict:
        """`{part: (weight, bias)}` of stacked task rows, for [`_project_batched`]: `weight` `[tasks, d_model, rows]`
        (the transposed stack of [`_task_weight_stack`]), `bias` `[tasks, rows]` or `None`. The q and kv parts are
        the two outputs of one split: its backward is one cat, not a zero-filled gradient per slice."""
        bias = None if bias is None else bias[:, None, :]  # broadcast over each task's examples
        sizes = self._q_kv_sizes()
        weights = zip(weight.split(sizes, -1), (None, None) if bias is None else bias.split(sizes, -1))
        return {"qkv": (weight, bias), **dict(zip(("q", "kv"), weights))}

    def _project_batched(self, x: torch.Tensor, part: str, route: TaskRoute, weights: dict):
        """`x @ W_task + b_task` on the rows of `part`, one batched matmul over the tasks present: the examples laid
        out in one block per task ([`TaskRoute.by_blocks`]), projected, and put back in batch order."""
        weight, bias = weights[part]
        return self._split_heads(route.by_blocks(
            x, lambda blocks: torch.bmm(blocks, weight) if bias is None else torch.baddbmm(bias, blocks, weight)))

    def _gathered_projector(self, route: TaskRoute, heads: torch.LongTensor | None, device: torch.device,
                            prepared: dict | None = None):
        """`project(x, part)` over all `H'` candidates, each example gathering its task's heads (`heads=None`: the
        cached choice and stacked weights)."""
        if heads is None:
            heads = self._layer_choice(None, device, prepared)[0]
            stacked = self._eval_cached("all", self._stacked_weights, prepared)
            weights = partial(self._part_rows, *stacked, heads=self.total_heads)
            rows = self._cached_candidate_rows(route, heads)
        else:
            weights = self._stacked_weights
            rows = partial(self._candidate_rows, heads[route.ids])
        return partial(self._project_gathered, project_all=lambda x, part: F.linear(x, *weights(part)), rows=rows)

    def _module_projector(self, route: TaskRoute, heads: torch.LongTensor | None, states: torch.Tensor,
                          prepared: dict | None = None):
        """`project(x, part)` through the projection modules themselves, onto all `H'` candidates, each example
        taking its task's heads (`heads=None`: the cached choice): for projections that are not plain `nn.Linear`
        ([`_projects_through_modules`]), whose forward, not their weight rows, says what they compute. `H'/H` times
        the projection work of the selected rows alone, as `"gathered"`."""
        if heads is None:
            heads = self._layer_choice(None, states.device, prepared)[0]
        if route.single_task is not None:
            example_heads = heads[route.single_task].expand(states.shape[0], -1)
        else:
            example_heads = heads[route.ids]

        def project_all(x: torch.Tensor, part: str) -> torch.Tensor:
            return torch.cat([projection(x) for projection in self._projections(part)], -1)

        return partial(self._project_gathered, project_all=project_all,
                       rows=partial(self._candidate_rows, example_heads))

    def _candidate_rows(self, example_heads: torch.LongTensor, parts: int, time: int) -> torch.LongTensor:
        """The rows each example takes from its projection onto all candidates, viewed as `[batch * time * parts *
        H', head_dim]` (`parts` projections of `H'` heads each): `[batch * time * parts * H]`, its heads
        `example_heads` (`[batch, H]`) in every position and part. Copying whole rows is several times faster than
        gathering element by element."""
        batch = example_heads.shape[0]
        first = torch.arange(batch * time * parts, device=example_heads.device).view(batch, time, parts, 1)
        return (first * self.total_heads + example_heads[:, None, None, :]).flatten()

    def _cached_candidate_rows(self, route: TaskRoute, heads: torch.LongTensor) -> Callable[[int, int], torch.Tensor]:
        """[`_candidate_rows`] of `heads[route.ids]` by `(parts, time)`, kept while the ids (the same tensor,
        unchanged) and the cached choice `heads` are the ones of the last call: `generate` routes every decoding step
        with the same ids."""
        if is_compiling():
            return partial(self._candidate_rows, heads[route.ids])
        example_heads, rows = self._eval_cache.get("example rows", (route.ids, heads), lambda: (heads[route.ids], {}))

        def rows_of(parts: int, time: int) -> torch.Tensor:
            if (parts, time) not in rows:
                rows[parts, time] = self._candidate_rows(example_heads, parts, time)
            return rows[parts, time]

        return rows_of

    def _part_span(self, part: str, heads: int) -> tuple[int, int]:
        """`(start, stop)`: the rows of `part` in a stacked q/k/v weight holding `heads` heads per projection."""
        start, stop = PARTS[part]
        return start * heads * self.head_dim, stop * heads * self.head_dim

    def _q_kv_sizes(self) -> list[int]:
        """The row counts of the q and kv parts of one task's stacked q/k/v weight: the sizes that split it in two."""
        return [stop - start for start, stop in (self._part_span(part, self.num_heads) for part in ("q", "kv"))]

    def _part_rows(self, weight: torch.Tensor, bias: torch.Tensor | None, part: str, heads: int) -> tuple:
        """The rows of `part` of a stacked q/k/v weight and bias holding `heads` heads per projection."""
        if part == "qkv":  # all of them: a full-range slice would still cost a copy in the backward pass
            return weight, bias
        start, stop = self._part_span(part, heads)
        return weight[start:stop], None if bias is None else bias[start:stop]

    def _project_grouped(self, x: torch.Tensor, part: str, route: TaskRoute,
                         weights: Callable[[int, str], tuple] | None = None, rows: torch.LongTensor | None = None):
        """`x @ W_task^T + b_task` on the rows of `part`, one matmul per task present in the batch: the rows cached for
        evaluation (`weights(task, part)`: weight and bias), or the rows `rows` (`[tasks present, 3 * H * head_dim]`,
        see [`_task_rows`]) of the projections, gathered by [`TaskRowsLinear`] (which keeps no gathered weights for
        the backward pass)."""
        if rows is None:
            return self._split_heads(route.per_task(x, lambda task, examples: F.linear(examples, *weights(task, part))))
        projections = self._projections(part)
        # the columns of `part`, as rows of its own projections stacked; contiguous, since the gathers flatten them in
        # both passes (a part starting at q needs no offset: all rows, or one task's, are contiguous already)
        rows, offset = rows[:, slice(*self._part_span(part, self.num_heads))], PARTS[part][0] * self.q_proj.out_features
        rows = rows - offset if offset else rows.contiguous()
        params = [p.weight for p in projections] + ([] if self.q_proj.bias is None else [p.bias for p in projections])
        # traced: autograd's own graph, whose gathers the compiler's partitioner recomputes in the backward pass as
        # it sees fit
        linear = task_rows_linear if is_compiling() else TaskRowsLinear.apply
        return self._split_heads(route.by_task(
            x, lambda examples: linear(examples, rows, route.sizes, len(projections), *params)))

    def _project_rows(self, x: torch.Tensor, part: str, rows: dict):
        """`x @ W^T + b` on one task's rows of `part` (`rows`: `{part: (weight, bias)}`), the whole batch at once."""
        return self._split_heads(F.linear(x, *rows[part]))

    def _split_heads(self, projected: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`[batch, time, n * H * head_dim]` -> `n` tensors `[batch, time, H, head_dim]` (q, k and/or v)."""
        return projected.unflatten(-1, (-1, self.num_heads, self.head_dim)).unbind(-3)

    def _project_gathered(self, x: torch.Tensor, part: str, project_all: Callable[[torch.Tensor, str], torch.Tensor],
                          rows: Callable[[int, int], torch.Tensor]):
        """All `H'` candidates of `part` (`project_all(x, part)`: `[batch, time, parts * H' * head_dim]`), then each
        example's heads taken (`rows(parts, time)`: see [`_candidate_rows`])."""
        candidates = project_all(x, part)
        parts = candidates.shape[-1] // (self.total_heads * self.head_dim)
        selected = candidates.reshape(-1, self.head_dim).index_select(0, rows(parts, x.shape[1]))
        return selected.view(*x.shape[:2], parts, self.num_heads, self.head_dim).unbind(-3)

    # ---- forward ----------------------------------------------------------------------------------------------

    @takes_stock_cache_name
    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        cache=None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Unpack[FlashAttentionKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Input shape: Batch x Time x Channel. Mirrors the stock attention, heads chosen per example."""
        if kwargs.get(ROUTING_KWARG) is None and is_strict_exporting():  # a layer of an encoder or decoder alone
            raise ValueError(PART_EXPORT_REFUSAL)
        route = route_from_kwargs(self.config, self.key_sides, kwargs, hidden_states)
        prepared = kwargs.get(EVAL_WEIGHTS_KWARG)  # a decoding step's validated caches (see `eval_weights`)
        prepared = prepared.get(self.selection_key) if prepared is not None else None
        project, gates = self._projector(route, hidden_states, kwargs.get(ROUTING_KWARG), prepared)
        kwargs = {key: value for key, value in kwargs.items() if key not in LAYER_KWARGS}

        is_cross_attention = key_value_states is not None
        key_states = value_states = None
        if is_cross_attention:
            (query_states,) = project(hidden_states, "q")
        else:  # queries, keys and values in one matmul
            query_states, key_states, value_states = project(hidden_states, "qkv")
        query_states = query_states.transpose(1, 2)

        is_updated = False
        if cache is not None:
            if isinstance(cache, EncoderDecoderCache):
                is_updated = cache.is_updated.get(self.layer_idx)
                if is_cross_attention:
                    curr_cache = cache.cross_attention_cache
                else:
                    curr_cache = cache.self_attention_cache
            else:
                curr_cache = cache

        if is_cross_attention and cache is not None and is_updated:
            key_states = curr_cache.layers[self.layer_idx].keys
            value_states = curr_cache.layers[self.layer_idx].values
        else:
            if is_cross_attention:
                key_states, value_states = project(key_value_states, "kv")
            key_states, value_states = key_states.transpose(1, 2), value_states.transpose(1, 2)
            if cache is not None:
                key_states, value_states = curr_cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)
                if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                    cache.is_updated[self.layer_idx] = True

        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, type(self).eager_attention
        )
        attn_output, attn_weights = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=0.0 if not self.training else self.dropout,
            scaling=self.scaling,
            **kwargs,
        )
        if gates is not None:  # [batch, time, H, head_dim] * [batch or 1, 1, H, 1]
            attn_output = attn_output * gates[..., None, :, None].to(attn_output.dtype)
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


__all__ = ["MIXED_BATCH_PROJECTIONS", "PART_EXPORT_REFUSAL", "HeadSelectionAttentionMixin"]
