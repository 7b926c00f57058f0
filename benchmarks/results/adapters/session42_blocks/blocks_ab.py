"""Session 42: per-task adapters of a batch mixing tasks in blocks (one batched matmul per projection for all tasks)
in full passes too, against task by task as before (`hf_headsel.adapters.MAX_BLOCK_ROWS` 0: blocks in one-token
decoding steps only). `adapters_ab.py`'s models, batches and method (every component selecting, one thread,
interleaved rounds), mixed-task batches only (a single-task batch takes neither path): the stock model, head
selection, the adapters in blocks and the adapters task by task, timed side by side; then each adapter path's kernels
(`op_count.count_ops`, the training step without the optimizer). From the repository root:

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=benchmarks python benchmarks/results/adapters/session42_blocks/blocks_ab.py \
        --family marian --adapter_key direction --measurements "eval forward" "generate greedy" "train step"
"""

import argparse
import copy

import torch

import adapters_ab
import op_count
import overhead
from hf_headsel import adapters as adapters_module


def with_block_rows(call, rows: int):
    def run():
        adapters_module.MAX_BLOCK_ROWS = rows
        return call()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurements", nargs="+", default=["eval forward", "generate greedy", "train step"],
                        choices=overhead.MEASUREMENTS)
    parser.add_argument("--adapter_key", default="direction", choices=["direction", "task"])
    overhead.add_ab_arguments(parser, threads=1, repeats=20)
    args = parser.parse_args()
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    bottleneck = adapters_ab.matching_bottleneck(models["headsel"], cfg, args.adapter_key)
    models["adapters"] = adapters_ab.adapter_model(models["headsel"], cfg, bottleneck, args.adapter_key)
    train_models = {name: copy.deepcopy(model) for name, model in models.items()}
    about = f"adapters keyed by {args.adapter_key}, bottleneck {bottleneck}"
    calls = overhead.measurement_calls(cfg, models, train_models, True, device)
    kernel_calls = overhead.measurement_calls(cfg, models, train_models, True, device, optimizer_step=False)
    blocks = adapters_module.MAX_BLOCK_ROWS
    for measurement in args.measurements:
        systems = {**calls[measurement], "adapters": with_block_rows(calls[measurement]["adapters"], blocks),
                   "adapters task by task": with_block_rows(calls[measurement]["adapters"], 0)}
        result = overhead.time_systems(overhead.measurement_name(True, measurement, cfg), systems, cfg, device)
        print(overhead.ab_report(result, cfg, args.threads, about,
                                 [("adapters", "adapters task by task"), ("adapters", "headsel"),
                                  ("adapters task by task", "headsel")]), flush=True)
        for label, rows in (("blocks", blocks), ("task by task", 0)):
            adapters_module.MAX_BLOCK_ROWS = rows
            counts = op_count.count_ops(kernel_calls[measurement]["adapters"])
            print(f"adapters kernels, {label}: {sum(counts.values())}", flush=True)
        adapters_module.MAX_BLOCK_ROWS = blocks
        print(flush=True)


if __name__ == "__main__":
    main()
