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


class TaskAdapters(nn.Module):
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
        """Each example through its own task's adapter; `route` is a `TaskRoute` of this adapter's tasks. A
        one-token decoding step that mixes tasks runs every task's adapter in one batched matmul per projection
        ([`adapt_blocks`]); anything else task by task."""
        if hidden_states.shape[1] == 1 and route.layout_known and route.single_task is None:
            return self.adapt_blocks(hidden_states, route)
        return route.per_task(hidden_states, lambda task, examples: self.adapt(examples, task))

    def adapt_blocks(self, hidden_states: torch.Tensor, route) -> torch.Tensor:
        """The adapters of a batch mixing tasks (a known layout, batch first), laid out as one block per task
        (`route.task_blocks`): one layer norm and one batched matmul per projection for all tasks, instead of a
        chain of small kernels per task, which is what a decoding step of a few examples per task is bound by (the
        same layout as the attention's batched projection). The same outputs as [`adapt`] task by task, up to the
        kernels' rounding."""
        slots, positions, width = route.task_blocks
        time, hidden = hidden_states.shape[1:]
        # the parameters of the tasks present, in block order (all of them as they are when every task is present)
        rows = (lambda p: p) if route.tasks == tuple(range(self.num_tasks)) else (lambda p: p[route.task_index])
        blocks = hidden_states if slots is None else hidden_states.index_select(0, slots)
        blocks = blocks.reshape(len(route.tasks), width * time, hidden)
        normed = torch.addcmul(rows(self.layer_norm_bias).unsqueeze(1), rows(self.layer_norm_weight).unsqueeze(1),
                               F.layer_norm(blocks, (hidden,), eps=self.eps))
        bottleneck = F.relu(torch.baddbmm(rows(self.down_bias).unsqueeze(1), normed,
                                          rows(self.down_weight).transpose(1, 2)))
        adapted = blocks + torch.baddbmm(rows(self.up_bias).unsqueeze(1), bottleneck,
                                         rows(self.up_weight).transpose(1, 2))
        adapted = adapted.reshape(len(route.tasks) * width, time, hidden)
        return adapted if positions is None else adapted.index_select(0, positions)
