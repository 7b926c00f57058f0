"""Where a measurement's time goes: torch.profiler self CPU time per ATen op (and, for head selection, per op and
input shape), stock vs head selection, 5 profiled calls after 3 warm-up calls (overhead.py's models and batches,
every component selecting, one thread). The two systems are profiled one after the other, so the totals drift with
the host; the per-op differences are what to read. Run from the repository root:

    python benchmarks/results/issue15/session16/profile_by_op.py marian "generate greedy" mixed [gathered]

(the last argument sets `mixed_batch_projection` on every head-selection layer)."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "benchmarks")
import overhead  # noqa: E402
from hf_headsel.attention import HeadSelectionAttentionMixin  # noqa: E402

CALLS = 5


def main(family: str, measurement: str, batch: str, projection: str = "auto") -> None:
    torch.set_num_threads(1)
    HeadSelectionAttentionMixin.mixed_batch_projection = projection
    cfg = overhead.BenchConfig(family=family, components=overhead.COMPONENT_PRESETS["all"])
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    calls = overhead.measurement_calls(cfg, models, models, batch == "mixed", device)[measurement]
    totals, counts = {}, {}
    for system in ("stock", "headsel"):
        for _ in range(3):
            calls[system]()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(CALLS):
                calls[system]()
        totals[system] = {e.key: e.self_cpu_time_total / (CALLS * 1e3) for e in prof.key_averages()}
        counts[system] = {e.key: e.count // CALLS for e in prof.key_averages()}
        if system == "headsel":
            print(f"head selection ({projection}), by op and input shape: self CPU ms per call, calls per call")
            for e in sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)[:25]:
                print(f"{e.key[:45]:45s} {e.self_cpu_time_total / (CALLS * 1e3):8.2f} {e.count // CALLS:6d}  "
                      f"{str(e.input_shapes)[:100]}")
    stock, headsel = (sum(totals[s].values()) for s in ("stock", "headsel"))
    print(f"\n{family}, {measurement}, {batch}-task: self CPU ms per call, stock {stock:.1f}, head selection "
          f"{headsel:.1f} ({headsel / stock:.3f}x)")
    ops = sorted(set(totals["stock"]) | set(totals["headsel"]),
                 key=lambda k: -(totals["headsel"].get(k, 0) - totals["stock"].get(k, 0)))
    print(f"{'op':45s} {'stock':>8s} {'headsel':>8s} {'diff':>8s} {'n stock':>8s} {'n hs':>8s}")
    for key in ops[:15] + ops[-8:]:
        a, b = totals["stock"].get(key, 0), totals["headsel"].get(key, 0)
        print(f"{key[:45]:45s} {a:8.2f} {b:8.2f} {b - a:+8.2f} {counts['stock'].get(key, 0):8d} "
              f"{counts['headsel'].get(key, 0):8d}")


if __name__ == "__main__":
    main(*sys.argv[1:])
