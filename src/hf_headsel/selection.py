# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Selection: `phi`, the rule that turns scores into the heads a task uses, the Gumbel-sigmoid draw and the KL.

* [`HeadSelector`]: the logits `phi` of one attention component (`[tasks, layers, H']`), the choice of heads
  (group, subset or task-specific strategy), the training sample and the closed-form KL to the prior.
* [`HeadDraw`]: the heads (and straight-through gates) of every task and layer of one component for one forward pass.
* [`ComponentSelectors`]: the selectors of a model, one per selecting component (`model.head_selection`).

Copied next to saved models as remote code; imports only torch and its sibling `configuration_head_selection.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_head_selection import HeadSelectionConfigMixin, component_side

HALF_PRECISION = (torch.float16, torch.bfloat16)
# Initial logits: phi ~ U(log 0.01, log 1.0), as in the fairseq reference.
LOGIT_INIT_RANGE = (math.log(0.01), 0.0)


class HeadSelector(nn.Module):
    """The head choice of one attention component.

    Holds `logits` (`phi`, shape `[tasks, layers, H']`) for the learned strategies (none for `task_specific`) and
    turns scores into the candidate heads each task uses, listed slot by slot:

    * group: slot `g` takes the best-scoring candidate of group `{g + j*H : j < H'/H}`;
    * subset: the `H` best-scoring candidates, in ascending candidate order (the paper's description; the fairseq
      reference fills slots in rank order instead);
    * task_specific: task `t` uses candidates `t*H .. t*H+H-1`.
    """

    def __init__(self, strategy: str, num_tasks: int, num_layers: int, heads: int, total_heads: int):
        super().__init__()
        self.strategy = strategy
        self.num_tasks, self.num_layers = num_tasks, num_layers
        self.heads, self.total_heads = heads, total_heads
        self.learned = strategy != "task_specific"
        # float32 whatever the default dtype: `from_config(config, dtype=torch.bfloat16)` builds the model under that
        # default, and `_keep_in_fp32_modules_strict` promises these stay float32 (`from_pretrained` upcasts them)
        phi = torch.zeros(num_tasks, num_layers, total_heads, dtype=torch.float32)
        self.logits = nn.Parameter(phi) if self.learned else None

    def _apply(self, fn, *args, **kwargs):
        # `phi` keeps its precision when the model is cast to half precision (`.to(torch.bfloat16)`, `.half()`; moves
        # still apply): near-ties would round to equal values there and change which heads are chosen. The gates
        # follow the activations' dtype in the attention layers.
        def keep_precision(tensor: torch.Tensor) -> torch.Tensor:
            converted = fn(tensor)
            if converted.dtype in HALF_PRECISION and tensor.dtype not in HALF_PRECISION:
                return tensor.to(converted.device)
            return converted

        return super()._apply(keep_precision, *args, **kwargs)

    @property
    def chooses(self) -> bool:
        """Whether the component learns a choice: a learned strategy with more candidates than slots (`H' > H`)."""
        return self.learned and self.total_heads > self.heads

    def extra_repr(self) -> str:
        return (
            f"strategy={self.strategy}, tasks={self.num_tasks}, layers={self.num_layers}, "
            f"heads={self.heads}, total_heads={self.total_heads}"
        )

    def choose(self, scores: torch.Tensor) -> torch.LongTensor:
        """Candidate heads per slot, `[..., H]`, from scores `[..., H']` (the highest-scoring ones win)."""
        heads = self.heads
        if self.strategy == "group":
            # candidate g + j*H sits at [..., j, g] of the [..., r, H] view
            best = scores.unflatten(-1, (self.total_heads // heads, heads)).argmax(dim=-2)
            return best * heads + torch.arange(heads, device=scores.device)
        return scores.topk(heads, dim=-1).indices.sort(dim=-1).values

    def task_specific_heads(self, device: torch.device | None = None) -> torch.LongTensor:
        """`[tasks, H]`: task `t` owns candidates `t*H .. t*H+H-1`."""
        offsets = torch.arange(self.num_tasks, device=device)[:, None] * self.heads
        return offsets + torch.arange(self.heads, device=device)

    def draw(self, sample: bool, temperature: float, device: torch.device | None = None,
             gates_per_layer: bool = False, noise_scale: float = 1.0) -> "HeadDraw":
        """[`forward`]: a call of the module, so that hooks on it run (accelerate's offloading brings `phi` back in
        one)."""
        return self(sample, temperature, device, gates_per_layer, noise_scale)

    def forward(self, sample: bool, temperature: float, device: torch.device | None = None,
                gates_per_layer: bool = False, noise_scale: float = 1.0) -> "HeadDraw":
        """The heads of every task and layer, `[tasks, layers, H]`, and their gates (`None` when deterministic).

        With `sample=True` the scores are a Gumbel-sigmoid sample `y = sigmoid((phi + s (g1 - g2)) / tau)`, redrawn
        on every call (`s` = `noise_scale`, 1 in the paper; at 0 no noise is drawn and the heads are argmax phi),
        and each selected head gets the straight-through gate `1 - y.detach() + y`: value 1, gradient to `phi`.
        Otherwise the scores are `phi` itself and no gate is applied. The model draws once per forward pass for all
        layers (a few kernels, not a few per layer).

        `gates_per_layer=True` (gradient checkpointing) keeps the one draw (the heads and the noise) but leaves the
        gates to be made by each layer from `phi` and its slice of the noise: no autograd graph then links the
        layers, which reentrant checkpointing needs (each layer's recomputation runs its own backward pass). The
        values and gradients are those of the stacked gates.
        """
        if not self.learned:  # nothing to sample: `sample` is ignored
            return HeadDraw(self.task_specific_heads(device)[:, None].expand(-1, self.num_layers, -1))
        logits = self._live_logits()
        if not sample:
            return HeadDraw(self.choose(logits.detach()))
        noise = _sample_noise(logits, noise_scale)
        if gates_per_layer:
            heads = self.choose(torch.sigmoid((logits.detach() + noise) / temperature))
            return HeadDraw(heads, logits=logits, noise=noise, temperature=temperature)
        y = torch.sigmoid((logits + noise) / temperature)
        heads = self.choose(y)
        return HeadDraw(heads, (1.0 - y.detach() + y).gather(-1, heads))

    def _live_logits(self) -> torch.Tensor:
        """`phi`, refused while it has no data (a meta tensor): offloaded by accelerate and read outside this
        module's forward, where accelerate's hooks, which bring offloaded weights back, do not run. Computed on, it
        would give garbage."""
        logits = self.logits
        if logits.is_meta:
            raise ValueError(
                "the head-selection logits are on the meta device (offloaded by accelerate) and were read outside the "
                "selector's forward, where accelerate brings them back: use model.head_selection[component](...) / "
                "draw(...), or load the model on one device"
            )
        return logits

    def layer_choice(self, layer: int, sample: bool, temperature: float, noise_scale: float = 1.0):
        """The heads `[tasks, H]` of every task in `layer` and their gates: one layer of a fresh [`draw`]."""
        return self.draw(sample, temperature, noise_scale=noise_scale).layer(layer)

    def selected_heads(self) -> torch.LongTensor:
        """The deterministic choice of every task and layer, `[tasks, layers, H]`."""
        with torch.no_grad():  # through the module's forward: see [`draw`]
            return self.draw(False, 1.0).heads.clone()

    def task_kl(self) -> torch.Tensor | None:
        """Closed-form KL between Bernoulli(sigmoid(phi)) and the prior Bernoulli(H/H'), per task: `[tasks]`.

        `None` when the component learns nothing (task-specific strategy, or `H' = H`: every head always used).
        """
        if not self.chooses:
            return None
        prior = self.heads / self.total_heads
        logits = self._live_logits().float()
        log_q, log_not_q = F.logsigmoid(logits), F.logsigmoid(-logits)
        kl = log_q.exp() * (log_q - math.log(prior)) + log_not_q.exp() * (log_not_q - math.log1p(-prior))
        return kl.mean(dim=(1, 2))


@dataclass(frozen=True)
class HeadDraw:
    """The heads every task uses in every layer of one component, `[tasks, layers, H]`, for one forward pass, and
    their straight-through gates (same shape; `None` when the choice is deterministic).

    A draw made for gradient checkpointing has no stacked `gates` but `logits` (`phi`), the detached Gumbel
    `noise` (`g1 - g2`, same shape) and the `temperature`: [`layer`] then makes each layer's gates on its own."""

    heads: torch.LongTensor
    gates: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    noise: torch.Tensor | None = None
    temperature: float = 1.0

    def __post_init__(self):
        # one view per layer, taken at once: the backward pass then stacks one gradient instead of accumulating one
        # zero-padded gradient per layer
        layer_gates = None if self.gates is None else self.gates.unbind(1)
        object.__setattr__(self, "_layer_gates", layer_gates)

    def layer(self, layer: int) -> tuple[torch.LongTensor, torch.Tensor | None]:
        """The heads `[tasks, H]` and gates of one layer."""
        heads = self.heads[:, layer]
        if self.noise is not None:  # same elementwise ops as the stacked gates: same values, same gradients
            y = torch.sigmoid((self.logits[:, layer] + self.noise[:, layer]) / self.temperature).gather(-1, heads)
            return heads, 1.0 - y.detach() + y
        return heads, None if self._layer_gates is None else self._layer_gates[layer]


def _sample_noise(logits: torch.Tensor, scale: float) -> torch.Tensor:
    """`s (g1 - g2)`, `g1, g2 ~ Gumbel(0, 1)`, drawn without autograd (it carries no graph); zeros, without drawing,
    at `s = 0`."""
    if scale == 0:
        return torch.zeros_like(logits)
    noise = _gumbel_like(logits) - _gumbel_like(logits)
    return noise if scale == 1 else noise * scale


def _gumbel_like(tensor: torch.Tensor) -> torch.Tensor:
    uniform = torch.rand_like(tensor, dtype=torch.float32).clamp_(1e-10, 1.0 - 1e-7)
    return (-torch.log(-torch.log(uniform))).to(tensor.dtype)


class ComponentSelectors(nn.ModuleDict):
    """The [`HeadSelector`]s of a model, keyed by selecting component: `model.head_selection.<component>.logits`.

    (Named `HeadSelection` before; the attribute name `head_selection`, not the class, makes the state-dict keys.)
    """

    def __init__(self, config: HeadSelectionConfigMixin):
        super().__init__(
            {
                component: HeadSelector(
                    config.head_selection_strategy,
                    num_tasks=config.num_tasks(component),
                    num_layers=config.num_layers(component),
                    heads=config.heads(component_side(component)),
                    total_heads=config.total_heads(component_side(component)),
                )
                for component in config.head_selection_components
            }
        )


__all__ = ["LOGIT_INIT_RANGE", "ComponentSelectors", "HeadDraw", "HeadSelector"]
