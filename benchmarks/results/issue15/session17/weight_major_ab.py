"""Mixed-task decoding steps with the batched projection computed weight-major (`W_task @ x^T`, `torch.baddbmm` over
`[tasks, rows, d_model] x [tasks, d_model, examples]`) against the code's `x @ W_task^T` (`[tasks, examples, d_model]
x [tasks, d_model, rows]`), and the stock model: overhead.py's method (interleaved rounds, the order rotating), every
component selecting, one thread. The variant is patched in here (weight-major only for one-token steps with at most
`--max-width` examples per task); run from the repository root:

    python benchmarks/results/issue15/session17/weight_major_ab.py --family marian --repeats 30"""
import argparse
import sys

import torch

sys.path.insert(0, "benchmarks")
import overhead  # noqa: E402
from hf_headsel.attention import HeadSelectionAttentionMixin as Mixin  # noqa: E402

_batched_weights, _project_batched = Mixin._batched_weights, Mixin._project_batched
MAX_WIDTH = [4]


def batched_weights(self, weight, bias):
    weights = _batched_weights(self, weight, bias)
    major = weight.transpose(1, 2).contiguous()  # [tasks, rows, d_model]
    major_bias = None if bias is None else bias[:, :, None]
    sizes = self._q_kv_sizes()
    parts = zip(major.split(sizes, 1), (None, None) if major_bias is None else major_bias.split(sizes, 1))
    weights.update({("major", p): w for p, w in zip(("qkv", "q", "kv"), [(major, major_bias), *parts])})
    return weights


def project_batched(self, x, part, route, weights):
    slots, positions, width = route.task_blocks
    if x.shape[1] != 1 or width > MAX_WIDTH[0] or ("major", part) not in weights:
        return _project_batched(self, x, part, route, weights)
    weight, bias = weights["major", part]
    blocks = (x if slots is None else x.index_select(0, slots)).reshape(len(route.tasks), -1, x.shape[-1])
    columns = blocks.transpose(1, 2)
    projected = torch.bmm(weight, columns) if bias is None else torch.baddbmm(bias, weight, columns)
    projected = projected.transpose(1, 2).reshape(len(route.tasks) * width, 1, -1)
    return self._split_heads(projected if positions is None else projected.index_select(0, positions))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--measurement", default="generate greedy", choices=overhead.MEASUREMENTS)
    parser.add_argument("--max-width", type=int, default=4)
    overhead.add_ab_arguments(parser, threads=1, repeats=30)
    args = parser.parse_args()
    MAX_WIDTH[0] = args.max_width
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    calls = overhead.measurement_calls(cfg, models, models, True, device)[args.measurement]

    def patched(on):
        def call():
            Mixin._batched_weights = batched_weights if on else _batched_weights
            Mixin._project_batched = project_batched if on else _project_batched
            try:
                return calls["headsel"]()
            finally:
                Mixin._batched_weights, Mixin._project_batched = _batched_weights, _project_batched
        return call

    reference, variant = patched(False)(), patched(True)()
    same = reference.equal(variant) if torch.is_tensor(reference) else None
    systems = {"stock": calls["stock"], "auto": patched(False), "weight_major": patched(True)}
    measurement = overhead.Measurement(args.measurement, None, {system: [] for system in systems})
    overhead.run_measurement(measurement, systems, cfg, device)
    print(f"{overhead.model_summary(cfg)}; {args.measurement}, mixed-task; {args.threads} thread(s), "
          f"{cfg.repeats} interleaved rounds; weight-major up to {args.max_width} examples per task; "
          f"outputs equal: {same}")
    print("\n".join(overhead.ratio_lines(measurement)))
    for system in ("auto", "weight_major"):
        print(overhead.paired(measurement.seconds, system, "stock"))
    print(overhead.paired(measurement.seconds, "weight_major", "auto"))


if __name__ == "__main__":
    main()
