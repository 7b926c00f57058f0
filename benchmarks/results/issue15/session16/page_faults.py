"""Minor page faults and time per mixed-task training step, stock vs head selection, in a fresh process and again
after the inference measurements have run in it (overhead.py's models and batches, Marian, every component selecting,
one thread). Run from the repository root:

    python benchmarks/results/issue15/session16/page_faults.py
    MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 python benchmarks/results/issue15/session16/page_faults.py

(the second: glibc keeps the memory it frees, so steps after the first fault no pages in)."""
import copy
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
import overhead  # noqa: E402

SYSTEMS = ("stock", "headsel")


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(label: str, train: dict, rounds: int) -> None:
    """Median time and minor page faults per step of each system, the rounds interleaved, the order alternating."""
    for system in SYSTEMS:
        train[system]()
    samples = {system: [] for system in SYSTEMS}
    for index in range(rounds):
        for system in SYSTEMS if index % 2 == 0 else SYSTEMS[::-1]:
            before, start = faults(), time.perf_counter()
            train[system]()
            samples[system].append((time.perf_counter() - start, faults() - before))
    ms = {s: statistics.median(t for t, _ in samples[s]) * 1e3 for s in SYSTEMS}
    flt = {s: statistics.median(f for _, f in samples[s]) for s in SYSTEMS}
    ratio = overhead.format_paired(overhead.paired_ratio({s: [t for t, _ in samples[s]] for s in SYSTEMS},
                                                         "headsel", "stock"))
    print(f"{label:17s} stock {ms['stock']:6.1f} ms {flt['stock']:7.0f} faults | headsel {ms['headsel']:6.1f} ms "
          f"{flt['headsel']:7.0f} faults | headsel / stock paired {ratio}", flush=True)


def main(rounds: int = 16) -> None:
    torch.set_num_threads(1)
    cfg = overhead.BenchConfig(family="marian", components=overhead.COMPONENT_PRESETS["all"])
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, SYSTEMS)
    train_models = {name: copy.deepcopy(model) for name, model in models.items()}
    calls = {mixed: overhead.measurement_calls(cfg, models, train_models, mixed, device) for mixed in (False, True)}
    print(f"mixed-task training step, {rounds} rounds; median per step")
    measure("fresh process", calls[True]["train step"], rounds)
    for mixed in (False, True):
        for name in ("eval forward", "generate greedy", "generate beam"):
            for system in SYSTEMS:
                for _ in range(3):
                    calls[mixed][name][system]()
    measure("after inference", calls[True]["train step"], rounds)


if __name__ == "__main__":
    main()
