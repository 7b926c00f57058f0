"""Experiment (session 28), not a library change: three other ways a single-task training step could project its
selected heads, timed against the library's (`headsel`: the selected rows through `TaskRowsLinear`) and the stock
model, every component selecting, Marian, 1 thread, interleaved rounds:

* `gathered`: all `H'` candidates in one matmul, then each example's heads (what CUDA does for mixed batches);
* `plain`: the selected rows through autograd's own graph (`task_rows_linear`: the gathered rows are kept for the
  backward pass, one copy per layer);
* `fast`: `TaskRowsLinear` without torch's per-call binding of the arguments to `forward`'s signature (a private
  fast path of `Function.apply`).

First the loss and gradients of `gathered` are checked against the library's, then the kernels of one step counted.

    python benchmarks/results/training_kernels/single_task_training_variants.py quick      # launch-bound (GPU-like)
    python benchmarks/results/training_kernels/single_task_training_variants.py standard   # overhead.py's sizes
"""
import sys, copy, torch
sys.path.insert(0, "benchmarks")  # run from the repository root
import overhead, op_count
from hf_headsel.attention import HeadSelectionAttentionMixin as M
torch.set_num_threads(1)
original = M._projector

def gathered_projector(self, route, states, routing, prepared):
    if not self._uses_eval_cache() and route.single_task is not None and not self._projects_through_modules():
        heads, gates = self._layer_choice(routing, states.device)
        if gates is not None:
            gates = gates[route.single_task]
        return self._gathered_projector(route, heads, states.device, prepared), gates
    return original(self, route, states, routing, prepared)

import hf_headsel.attention as A
from hf_headsel.task_rows import task_rows_linear, TaskRowsLinear
class FastRows(TaskRowsLinear):
    @classmethod
    def apply(cls, *args):
        if torch._C._are_functorch_transforms_active():
            return super().apply(*args)
        return super(torch.autograd.Function, cls).apply(*args)
class PlainRows:  # single-task rows through autograd's own graph (keeps the gathered rows for the backward pass)
    apply = staticmethod(task_rows_linear)
QUICK = sys.argv[1] == "quick"
cfg = overhead.BenchConfig(**{**(overhead.QUICK if QUICK else {}), "components": overhead.COMPONENT_PRESETS["all"], "repeats": 40 if QUICK else 12})
models = overhead.build_models(cfg, torch.device("cpu"), torch.float32, ("stock", "headsel"))
models["gathered"] = copy.deepcopy(models["headsel"])
models["plain"] = copy.deepcopy(models["headsel"])
models["fast"] = copy.deepcopy(models["headsel"])
train = {k: copy.deepcopy(v) for k, v in models.items()}
calls = overhead.measurement_calls(cfg, models, train, False, torch.device("cpu"))["train step"]
gathered_call = calls["gathered"]
def patched():
    M._projector = gathered_projector
    try:
        return gathered_call()
    finally:
        M._projector = original
calls["gathered"] = patched
plain_call = calls["plain"]
def plain():
    A.TaskRowsLinear = PlainRows
    try:
        return plain_call()
    finally:
        A.TaskRowsLinear = TaskRowsLinear
calls["plain"] = plain
fast_call = calls["fast"]
def fast():
    A.TaskRowsLinear = FastRows
    try:
        return fast_call()
    finally:
        A.TaskRowsLinear = TaskRowsLinear
calls["fast"] = fast
# same loss and gradients as the rows path (dropout is on: compare under one seed each, dropout off)
m = overhead.build_models(cfg, torch.device("cpu"), torch.float32, ("headsel",))["headsel"]
overhead.zero_dropout(m)
inputs, routing = overhead.make_inputs(cfg, cfg.batch_size, False, torch.device("cpu"), labels=True)
outs = []
for proj in (original, gathered_projector):
    M._projector = proj
    m.train(); torch.manual_seed(3); loss = m(**inputs, **routing).loss; loss.backward()
    outs.append((loss.item(), [p.grad.clone() for p in m.parameters() if p.grad is not None])); m.zero_grad()
M._projector = original
print("loss", outs[0][0], outs[1][0], "max grad diff", max((a - b).abs().max().item() for a, b in zip(outs[0][1], outs[1][1])))
print("kernels (train step incl. optimizer):", {k: sum(op_count.count_ops(c).values()) for k, c in calls.items()})
mes = overhead.time_systems("train step, single-task", calls, cfg, torch.device("cpu"))
for pair in (("headsel", "stock"), ("gathered", "stock"), ("plain", "stock"), ("gathered", "headsel"), ("plain", "headsel"), ("fast", "headsel")):
    print(overhead.paired(mes.seconds, *pair))
