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
    python benchmarks/results/training_kernels/single_task_training_variants.py standard --device cuda --dtype bfloat16
    python benchmarks/results/training_kernels/single_task_training_variants.py large --device cuda --dtype bfloat16

`--saved-bytes` (session 30) counts what one step keeps for its backward pass instead of timing: every storage
autograd saves, parameters excluded, for the stock model, the library's rows and `gathered` (bytes do not depend on
the device: run it on the CPU).

`large` (session 30): Transformer-big widths (d_model 1024, H = 16 of H' = 32, ffn 4096), 6 + 6 layers, 128 tokens a
side, vocabulary 32000, to look for where a GPU step is bound by arithmetic rather than by launches and `gathered`'s
`H'/H` times the q/k/v arithmetic counts (on an H100 in bf16 it was not yet, at batch 64).

Since session 30 the library itself projects single-task training gathered on CUDA (`_gathers_single_task`); this
script turns that off, so that `headsel`, `plain` and `fast` stay the selected rows' path they were written to time.
"""
import argparse
import copy
import sys

import torch

sys.path.insert(0, "benchmarks")  # run from the repository root: overhead.py and op_count.py
import op_count  # noqa: E402
import overhead  # noqa: E402

from hf_headsel import attention  # noqa: E402
from hf_headsel.attention import HeadSelectionAttentionMixin  # noqa: E402
from hf_headsel.task_rows import TaskRowsLinear, task_rows_linear  # noqa: E402

LIBRARY_PROJECTOR = HeadSelectionAttentionMixin._projector
#: size -> BenchConfig fields over overhead.py's standard ones
SIZES = {
    "quick": overhead.QUICK,
    "standard": {},
    "large": dict(d_model=1024, heads=16, total_heads=32, ffn=4096, vocab=32000, src_len=128, tgt_len=128),
}


def gathered_projector(self, route, states, routing, prepared):
    """`_projector`, with a single-task training batch projected over all candidates."""
    if not self._uses_eval_cache() and route.single_task is not None and not self._projects_through_modules():
        heads, gates = self._layer_choice(routing, states.device)
        if gates is not None:
            gates = gates[route.single_task]
        return self._gathered_projector(route, heads, states.device, prepared), gates
    return LIBRARY_PROJECTOR(self, route, states, routing, prepared)


class FastRows(TaskRowsLinear):
    @classmethod
    def apply(cls, *args):
        if torch._C._are_functorch_transforms_active():
            return super().apply(*args)
        return super(torch.autograd.Function, cls).apply(*args)  # torch's Function.apply, without its binding


class PlainRows:  # the selected rows through autograd's own graph (keeps the gathered rows for the backward pass)
    apply = staticmethod(task_rows_linear)


#: variant -> (object, attribute, replacement) patched while the variant's model runs
VARIANTS = {
    "gathered": (HeadSelectionAttentionMixin, "_projector", gathered_projector),
    "plain": (attention, "TaskRowsLinear", PlainRows),
    "fast": (attention, "TaskRowsLinear", FastRows),
}


def patched(call, target, name, replacement):
    def run():
        original = getattr(target, name)
        setattr(target, name, replacement)
        try:
            return call()
        finally:
            setattr(target, name, original)

    return run


def check_gathered(cfg, device: torch.device, dtype: torch.dtype):
    """Loss and gradients of `gathered` against the library's, dropout off, the same Gumbel draws."""
    model = overhead.build_models(cfg, device, dtype, ("headsel",))["headsel"]
    overhead.zero_dropout(model)
    inputs, routing = overhead.make_inputs(cfg, cfg.batch_size, False, device, labels=True, dtype=dtype)

    def step():
        model.train()
        torch.manual_seed(3)
        loss = model(**inputs, **routing).loss
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        model.zero_grad()
        return loss.item(), grads

    results = [step(), patched(step, *VARIANTS["gathered"])()]
    (loss0, grads0), (loss1, grads1) = results
    print("loss", loss0, loss1, "max grad diff", max((a - b).abs().max().item() for a, b in zip(grads0, grads1)))


def saved_bytes(model, inputs: dict) -> int:
    """What one training step of `model` keeps for its backward pass ([`op_count.saved_bytes`])."""
    def step():
        model(**inputs).loss.backward()
        model.zero_grad(set_to_none=True)

    model.train()
    return op_count.saved_bytes(model, step)


def print_saved_bytes(cfg, device: torch.device, dtype: torch.dtype) -> None:
    models = overhead.build_models(cfg, device, dtype, ("stock", "headsel"))
    inputs, routing = overhead.make_inputs(cfg, cfg.batch_size, False, device, labels=True, dtype=dtype)
    stock = saved_bytes(models["stock"], inputs)
    rows = saved_bytes(models["headsel"], {**inputs, **routing})
    gathered = patched(lambda: saved_bytes(models["headsel"], {**inputs, **routing}), *VARIANTS["gathered"])()
    print(f"saved for backward, MiB: stock {stock / 2**20:.1f}, selected rows {rows / 2**20:.1f} "
          f"({rows / stock:.3f}x stock), gathered {gathered / 2**20:.1f} ({gathered / stock:.3f}x stock, "
          f"{gathered / rows:.3f}x rows)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("size", choices=sorted(SIZES), help="overhead.py --quick's sizes, its standard ones, or large")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=sorted(overhead.DTYPES))
    parser.add_argument("--repeats", type=int, help="interleaved rounds (default 40 quick, 12 standard)")
    parser.add_argument("--batch-size", type=int, help="training batch (default: overhead.py's)")
    parser.add_argument("--saved-bytes", action="store_true", help="count what a step keeps for backward, no timing")
    args = parser.parse_args(argv)
    HeadSelectionAttentionMixin._gathers_single_task = lambda self, device: False  # see above: the rows' path
    device, dtype = torch.device(args.device), overhead.DTYPES[args.dtype]
    if device.type == "cpu":
        torch.set_num_threads(1)
    fields = {**SIZES[args.size], "components": overhead.COMPONENT_PRESETS["all"],
              "repeats": args.repeats or (40 if args.size == "quick" else 12)}
    if args.batch_size:
        fields["batch_size"] = args.batch_size
    cfg = overhead.BenchConfig(**fields)
    if args.saved_bytes:
        print(f"{overhead.model_summary(cfg)}; {args.dtype}, batch {cfg.batch_size} x {cfg.src_len} / {cfg.tgt_len}")
        return print_saved_bytes(cfg, device, dtype)
    models = overhead.build_models(cfg, device, dtype, ("stock", "headsel"))
    for variant in VARIANTS:
        models[variant] = copy.deepcopy(models["headsel"])
    train = {name: copy.deepcopy(model) for name, model in models.items()}
    calls = overhead.measurement_calls(cfg, models, train, False, device)["train step"]
    for variant, patch in VARIANTS.items():
        calls[variant] = patched(calls[variant], *patch)
    print(f"{overhead.model_summary(cfg)}; {args.device} {args.dtype}, batch {cfg.batch_size}, {cfg.repeats} rounds")
    check_gathered(cfg, device, dtype)
    print("kernels (train step incl. optimizer):", {k: sum(op_count.count_ops(c).values()) for k, c in calls.items()})
    measurement = overhead.time_systems("train step, single-task", calls, cfg, device)
    for pair in (("headsel", "stock"), ("gathered", "stock"), ("plain", "stock"), ("gathered", "headsel"),
                 ("plain", "headsel"), ("fast", "headsel")):
        print(overhead.paired(measurement.seconds, *pair))


if __name__ == "__main__":
    main()
