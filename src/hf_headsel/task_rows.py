# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The projection of a batch laid out task by task onto each task's own rows of stacked weights: what a
head-selecting layer computes in training for a mixed batch projected `"grouped"`, with a backward pass that keeps no
gathered weights ([`TaskRowsLinear`]).

Copied next to saved models as remote code; imports only torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _stack(parts: list[torch.Tensor]) -> torch.Tensor:
    # one part (a single-task batch): a view, where `torch.stack` would launch a copy
    return parts[0][None] if len(parts) == 1 else torch.stack(parts)


def task_rows_of(tensors: tuple[torch.Tensor, ...], rows: torch.LongTensor) -> torch.Tensor:
    """The rows `rows` (`[tasks, R]`) of `tensors` stacked along their first dimension: `[tasks, R, ...]`."""
    return _cat(list(tensors)).index_select(0, rows.flatten()).unflatten(0, rows.shape)


def _rows_grad(values: torch.Tensor, rows: torch.LongTensor, like: tuple[torch.Tensor, ...]) -> tuple:
    """The gradients of `like` (stacked) given `values` (`[tasks, R, ...]`) for their rows `rows`: summed where tasks
    share a row, zero where no task took it."""
    summed = values.new_zeros(sum(t.shape[0] for t in like), *values.shape[2:], dtype=like[0].dtype)
    # in place: the zeros are this function's own (an out-of-place add would copy the whole stack once more)
    summed.index_add_(0, rows.flatten(), values.flatten(0, 1).to(summed.dtype))
    return summed.split([t.shape[0] for t in like])


def task_rows_linear(x: torch.Tensor, rows: torch.LongTensor, sizes: tuple[int, ...], num_weights: int,
                     *params: torch.Tensor) -> torch.Tensor:
    """`x_t @ W_t^T + b_t` for the examples `x_t` of each task `t` of a batch laid out task by task (`sizes` examples
    each), `W_t` the rows `rows[t]` of the weights `params[:num_weights]` stacked, `b_t` those of the biases (the rest
    of `params`)."""
    weights, biases = params[:num_weights], params[num_weights:]
    weight = task_rows_of(weights, rows)
    bias = task_rows_of(biases, rows) if biases else None
    return _cat([F.linear(examples, weight[task], None if bias is None else bias[task])
                 for task, examples in enumerate(x.split(sizes))])


class TaskRowsLinear(torch.autograd.Function):
    """[`task_rows_linear`], with a backward pass of its own.

    What autograd computes for `F.linear` on the gathered rows (the same kernels), except that the gathered rows are
    not kept for the backward pass, which gathers them again from the parameters: kept, they would stay alive from
    the forward pass to the backward pass, one `[R, d_model]` copy per task present and layer (8 tasks at d_model
    512: 25 MB per self-attention layer), memory the stock model never holds, and that the allocator gives back and
    faults in again at every step. Autocast is followed (the backward pass computes in the dtype of the incoming
    gradient, as autocast's `F.linear` did), and the backward pass is itself differentiable."""

    @staticmethod
    def forward(x: torch.Tensor, rows: torch.LongTensor, sizes: tuple[int, ...], num_weights: int,
                *params: torch.Tensor) -> torch.Tensor:
        return task_rows_linear(x, rows, sizes, num_weights, *params)

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: torch.Tensor) -> None:
        # a separate context set-up: what `torch.func` transforms (grad, jacrev, ...) need of a custom function
        x, rows, sizes, num_weights, *params = inputs
        ctx.save_for_backward(x, rows, *params)
        ctx.sizes, ctx.num_weights = sizes, num_weights

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, rows, *params = ctx.saved_tensors
        weights, biases = tuple(params[: ctx.num_weights]), tuple(params[ctx.num_weights :])
        grads = grad.split(ctx.sizes)
        grad_x = None
        if ctx.needs_input_grad[0]:
            weight = task_rows_of(weights, rows).to(grad.dtype)
            grad_x = _cat([g.matmul(weight[task]) for task, g in enumerate(grads)]).to(x.dtype)
        grad_params = [None] * len(params)
        if any(ctx.needs_input_grad[4:]):
            flat = [g.flatten(0, -2) for g in grads]
            examples = [e.flatten(0, -2).to(grad.dtype) for e in x.split(ctx.sizes)]
            grad_params[: ctx.num_weights] = _rows_grad(
                _stack([g.t().mm(e) for g, e in zip(flat, examples)]), rows, weights)
            if biases:
                grad_params[ctx.num_weights :] = _rows_grad(_stack([g.sum(0) for g in flat]), rows, biases)
        return grad_x, None, None, None, *grad_params


__all__ = ["TaskRowsLinear", "task_rows_linear", "task_rows_of"]
