"""Host (Python) time head selection adds per greedy decoding step, and what some trims would save: session 29.

`overhead.py --quick`'s models (d_model 32, every component selecting, one thread), where a step's arithmetic is
negligible and its time is host work. Stock and head-selection `generate` calls alternate for 300 rounds (20 dropped
as warm-up; its own loop, not `overhead.time_systems`, which collects garbage before every call: minutes for 300
rounds of these 7-45 ms calls); printed: the stock call's median and the median of head selection's extra time per
call. The extra time per step is the difference between two token counts over their difference in steps.
`--patch` applies experimental trims, measured as upper bounds, none adopted:

- `output_retyped`: the model's forward retypes the stock `Seq2SeqLMOutput` as `HeadSelSeq2SeqLMOutput` when there
  are no labels, instead of building a new output from it;
- `forward_signature`: the model's `forward` carries a precomputed `__signature__` (transformers' generation asks for
  the signature at every step; the decorated forward is unwrapped each time);
- `no_base_hooks`: the base model's grouping hooks removed (wrong for mixed full passes; timing only);
- `projector_memo`: each attention layer reuses its last projector while the step's prepared caches are the same
  object (skips choosing the projection per layer call).

Run from the repository root, e.g.:

    python benchmarks/results/issue15/session29/host_time_per_step.py --layers 6 --new-tokens 4 16
    python benchmarks/results/issue15/session29/host_time_per_step.py --layers 6 --new-tokens 16 --patch output_retyped
"""
import argparse
import inspect
import statistics
import sys
import time
from dataclasses import replace

import torch

sys.path.insert(0, "benchmarks")
import overhead  # noqa: E402
from hf_headsel import attention, modeling_head_selection  # noqa: E402
from hf_headsel.modeling_headsel_marian import HeadSelMarianMTModel  # noqa: E402


def output_retyped(models):
    add = modeling_head_selection.HeadSelectionModelMixin.add_head_selection_kl

    def retyping(self, outputs, labels, routing):
        if labels is None:
            outputs.__class__ = modeling_head_selection.HeadSelSeq2SeqLMOutput
            return outputs
        return add(self, outputs, labels, routing)

    modeling_head_selection.HeadSelectionModelMixin.add_head_selection_kl = retyping


def forward_signature(models):
    HeadSelMarianMTModel.forward.__signature__ = inspect.signature(HeadSelMarianMTModel.forward)


def no_base_hooks(models):
    base = models["headsel"].get_submodule("model")
    for hooks in (base._forward_hooks, base._forward_pre_hooks, base._forward_hooks_with_kwargs,
                  base._forward_pre_hooks_with_kwargs):
        hooks.clear()


def projector_memo(models):
    projector = attention.HeadSelectionAttentionMixin._projector

    def remembered(self, route, states, routing, prepared):
        memo = self.__dict__.get("_projector_memo")
        if prepared is not None and memo is not None and memo[0] is prepared:
            return memo[1]
        out = projector(self, route, states, routing, prepared)
        self.__dict__["_projector_memo"] = (prepared, out)
        return out

    attention.HeadSelectionAttentionMixin._projector = remembered


PATCHES = {f.__name__: f for f in (output_retyped, forward_signature, no_base_hooks, projector_memo)}


def extra_ms(layers: int, new_tokens: int, mixed: bool, patches: list[str], rounds: int = 300) -> tuple[float, float]:
    cfg = replace(overhead.BenchConfig(family="marian", components=overhead.COMPONENT_PRESETS["all"]),
                  **{**overhead.QUICK, "max_new_tokens": new_tokens, "layers": layers})
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    for patch in patches:
        PATCHES[patch](models)
    calls = overhead.measurement_calls(cfg, models, models, mixed, device)["generate greedy"]
    stock, extra = [], []
    for round_ in range(rounds):
        t0 = time.perf_counter(); calls["stock"](); t1 = time.perf_counter(); calls["headsel"](); t2 = time.perf_counter()
        if round_ >= 20:
            stock.append(t1 - t0); extra.append((t2 - t1) - (t1 - t0))
    return statistics.median(stock) * 1e3, statistics.median(extra) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--patch", nargs="*", default=[], choices=sorted(PATCHES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {}
    for tokens in args.new_tokens:
        stock, extra = extra_ms(args.layers, tokens, args.mixed, args.patch)
        results[tokens] = extra
        print(f"{'mixed' if args.mixed else 'single'}-task, {args.layers} layers, {tokens} new tokens, patches "
              f"{args.patch or 'none'}: stock {stock:.3f} ms, head selection's extra {extra:.3f} ms per call")
    if len(results) == 2:
        (a, ea), (b, eb) = sorted(results.items())
        print(f"  extra per decoding step: {(eb - ea) / (b - a) * 1e3:.0f} us")


if __name__ == "__main__":
    main()
