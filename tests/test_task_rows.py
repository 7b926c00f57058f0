"""The training projection of each task's weight rows (`hf_headsel/task_rows.py`) on its own: `TaskRowsLinear`
computes what autograd computes for `task_rows_linear` (outputs, first and second derivatives), while keeping no
gathered weights for its backward pass (that memory is tested through the model in `test_modeling_headsel.py`)."""

import pytest
import torch

from hf_headsel.task_rows import TaskRowsLinear, task_rows_linear, task_rows_of


#: Examples of each task, laid out task by task: three tasks, or one (a single-task batch, its own code path).
TASK_SIZES = [(2, 3, 1), (4,)]


def inputs(dtype=torch.float64, bias: bool = True, sizes: tuple[int, ...] = TASK_SIZES[0]):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(sum(sizes), 2, 5, dtype=dtype, generator=generator, requires_grad=True)
    # three stacked projections of 4 rows each; tasks take overlapping rows, in their own order
    rows = torch.tensor([[0, 5, 9], [5, 1, 11], [8, 0, 5]])[: len(sizes)]
    weights = [torch.randn(4, 5, dtype=dtype, generator=generator, requires_grad=True) for _ in range(3)]
    biases = [torch.randn(4, dtype=dtype, generator=generator, requires_grad=True) for _ in range(3)] if bias else []
    return x, rows, sizes, weights, biases


def test_task_rows_of_stacks_each_tasks_rows():
    tensors = (torch.arange(4.0)[:, None], torch.arange(4.0, 8.0)[:, None])
    assert task_rows_of(tensors, torch.tensor([[0, 7], [5, 5]])).squeeze(-1).tolist() == [[0.0, 7.0], [5.0, 5.0]]


@pytest.mark.parametrize("sizes", TASK_SIZES)
@pytest.mark.parametrize("bias", [True, False])
def test_the_custom_backward_gives_autograds_outputs_and_gradients(bias, sizes):
    x, rows, sizes, weights, biases = inputs(bias=bias, sizes=sizes)
    params = (*weights, *biases)
    ours = TaskRowsLinear.apply(x, rows, sizes, len(weights), *params)
    reference = task_rows_linear(x, rows, sizes, len(weights), *params)
    torch.testing.assert_close(ours, reference, rtol=0, atol=0)
    grad = torch.randn_like(ours)
    torch.testing.assert_close(torch.autograd.grad(ours, (x, *params), grad),
                               torch.autograd.grad(reference, (x, *params), grad))


@pytest.mark.parametrize("sizes", TASK_SIZES)
def test_gradcheck_and_gradgradcheck(sizes):
    x, rows, sizes, weights, biases = inputs(sizes=sizes)

    def function(x, *params):
        return TaskRowsLinear.apply(x, rows, sizes, len(weights), *params)

    assert torch.autograd.gradcheck(function, (x, *weights, *biases))
    assert torch.autograd.gradgradcheck(function, (x, *weights, *biases))


@pytest.mark.parametrize("trainable", ["x", "weights", "biases"])
def test_gradients_when_only_some_inputs_are_trained(trainable):
    # frozen weights with trained biases (BitFit), frozen biases, or a frozen model under an input attribution: the
    # backward pass must still give each trained input autograd's gradient
    x, rows, sizes, weights, biases = inputs()
    groups = {"x": [x], "weights": weights, "biases": biases}
    for name, group in groups.items():
        for tensor in group:
            tensor.requires_grad_(name == trainable)
    params = (*weights, *biases)
    ours = TaskRowsLinear.apply(x, rows, sizes, len(weights), *params)
    reference = task_rows_linear(x, rows, sizes, len(weights), *params)
    grad = torch.randn_like(ours)
    torch.testing.assert_close(torch.autograd.grad(ours, groups[trainable], grad),
                               torch.autograd.grad(reference, groups[trainable], grad))
