# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Per-task residual bottleneck adapters (Bapna and Firat, 2019), the adapter baseline of Gong et al. (2021).

After every encoder and decoder layer, each example passes through its own task's adapter:
`x + up(relu(down(layer_norm(x))))`. The up-projections start at zero, so a model with fresh adapters gives exactly
the outputs of the model without them. Adapters are keyed per direction (`task_adapter_key="direction"`, the
multilingual setting: one adapter per encoder task x decoder task pair, on both sides) or per task
(`"task"`: encoder adapters by encoder task, decoder adapters by decoder task; the multi-domain setting).

Copied next to saved models for remote code: imports only torch and sibling modules.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .eval_cache import EvalCacheMixin
from .routing import is_compiling

#: The parameters of every task's adapter, in the order [`TaskAdapters.task_parameters`] gives them.
PARAMETERS = ("layer_norm_weight", "layer_norm_bias", "down_weight", "down_bias", "up_weight", "up_bias")

#: A full pass of a batch mixing tasks runs the adapters in blocks while the padded blocks hold at most this many
#: times the batch's rows. Task by task, each adapter is a chain of small kernels per task, which is what a step is
#: bound by on a GPU that waits on the host: a mixed training step (forward and backward) of the GPU quality runs'
#: model (8 directions, batch 128) launches 3,921 kernels task by task, 1,173 in blocks, the stock model 874
#: (benchmarks/results/adapters/session42_blocks/). Past the bound, a batch dominated by one task would spend its
#: time and memory on padding.
MAX_BLOCK_ROWS = 2


class TaskAdapters(EvalCacheMixin, nn.Module):
    """One bottleneck adapter per task for one layer, applied per example by its task id."""

    def __init__(self, num_tasks: int, hidden_size: int, bottleneck: int, eps: float = 1e-5):
        super().__init__()
        self.num_tasks, self.eps = num_tasks, eps
        self.layer_norm_weight = nn.Parameter(torch.ones(num_tasks, hidden_size))
        self.layer_norm_bias = nn.Parameter(torch.zeros(num_tasks, hidden_size))
        self.down_weight = nn.Parameter(torch.empty(num_tasks, bottleneck, hidden_size))
        self.down_bias = nn.Parameter(torch.zeros(num_tasks, bottleneck))
        self.up_weight = nn.Parameter(torch.zeros(num_tasks, hidden_size, bottleneck))
        self.up_bias = nn.Parameter(torch.zeros(num_tasks, hidden_size))
        self.init_eval_cache()  # see [`task_parameters`]

    def extra_repr(self) -> str:
        tasks, bottleneck, hidden = self.down_weight.shape
        return f"tasks={tasks}, hidden_size={hidden}, bottleneck={bottleneck}"

    def adapt(self, hidden_states: torch.Tensor, task: int) -> torch.Tensor:
        """The adapter of `task` applied to `hidden_states` (residual included)."""
        normed = F.layer_norm(
            hidden_states, hidden_states.shape[-1:], self.layer_norm_weight[task], self.layer_norm_bias[task], self.eps
        )
        bottleneck = F.relu(F.linear(normed, self.down_weight[task], self.down_bias[task]))
        return hidden_states + F.linear(bottleneck, self.up_weight[task], self.up_bias[task])

    def forward(self, hidden_states: torch.Tensor, route) -> torch.Tensor:
        """Each example through its own task's adapter; `route` is a `TaskRoute` of this adapter's tasks. A batch
        that mixes tasks runs every task's adapter in one batched matmul per projection ([`adapt_blocks`]), unless
        padding the tasks' blocks would take more than [`MAX_BLOCK_ROWS`] times its rows in a full pass; anything
        else task by task."""
        if route.layout_known and route.single_task is None and (
            hidden_states.shape[1] == 1 or route.block_rows <= MAX_BLOCK_ROWS * len(route.ids)
        ):
            return self.adapt_blocks(hidden_states, route)
        return route.per_task(hidden_states, lambda task, examples: self.adapt(examples, task))

    def adapt_blocks(self, hidden_states: torch.Tensor, route) -> torch.Tensor:
        """The adapters of a batch mixing tasks (a known layout, batch first), laid out as one block per task
        (`route.by_blocks`): one layer norm and one batched matmul per projection for all tasks, instead of a
        chain of small kernels per task ([`MAX_BLOCK_ROWS`]; the same layout as the attention's batched
        projection). The same outputs and gradients as [`adapt`] task by task, up to the kernels' rounding: a padded
        slot's output is dropped, so it gives nothing back."""
        norm_weight, norm_bias, down_weight, down_bias, up_weight, up_bias = self.task_parameters(route)

        def adapt(blocks: torch.Tensor) -> torch.Tensor:
            normed = torch.addcmul(norm_bias.unsqueeze(1), norm_weight.unsqueeze(1),
                                   F.layer_norm(blocks, blocks.shape[-1:], eps=self.eps))
            bottleneck = F.relu(torch.baddbmm(down_bias.unsqueeze(1), normed, down_weight.transpose(1, 2)))
            return blocks + torch.baddbmm(up_bias.unsqueeze(1), bottleneck, up_weight.transpose(1, 2))

        return route.by_blocks(hidden_states, adapt)

    def task_parameters(self, route) -> list[torch.Tensor]:
        """The parameters ([`PARAMETERS`]) of the tasks of `route`, in its order: all of them as they are when
        every task is present in order. In evaluation without autograd the rows gathered for a set of tasks are
        kept until a parameter changes (replaced, written in place through autograd-visible ops such as optimizer
        steps or `load_state_dict`, moved, cast), so that the decoding steps of one `generate` call gather them
        once; writes through `param.data` bypass that check: `model.clear_head_selection_cache()` after those."""
        parameters = [self._parameters[name] for name in PARAMETERS]
        if route.tasks == tuple(range(self.num_tasks)):
            return parameters
        if not self._uses_eval_cache() or is_compiling():
            return [parameter[route.task_index] for parameter in parameters]
        self._eval_cache.keep_one(route.tasks)  # the rows of the last set of tasks only
        return self._eval_cache.get(route.tasks, parameters,
                                    lambda: [parameter[route.task_index] for parameter in parameters])
