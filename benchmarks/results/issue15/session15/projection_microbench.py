"""One decoding step's q/k/v projection at the benchmark's sizes (d_model 256, H = 4 of H' = 8 heads of 64, a
mixed batch of 8 rows, 2 per task), each way of computing it timed alone, one thread, weights hot in cache:
the stock model's three matmuls, one task's stacked rows, all candidates (gathered), one batched matmul over the
tasks (batched), and one matmul per task (grouped). Median of 5 runs of 1,000 calls, microseconds per call.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/results/issue15/session15/projection_microbench.py
"""
import statistics
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(0)
TASKS, PER_TASK, D, ROWS = 4, 2, 256, 768  # ROWS: q, k and v of H = 4 heads of 64


def per_call_us(fn, calls=1000, runs=5):
    for _ in range(50):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


x = torch.randn(TASKS * PER_TASK, 1, D)
blocks = torch.randn(TASKS, PER_TASK, D)
stock = [(torch.randn(256, D), torch.randn(256)) for _ in range(3)]
single, single_bias = torch.randn(ROWS, D), torch.randn(ROWS)
candidates, candidates_bias = torch.randn(2 * ROWS, D), torch.randn(2 * ROWS)
batched, batched_bias = torch.randn(TASKS, D, ROWS), torch.randn(TASKS, 1, ROWS)
grouped = [(torch.randn(PER_TASK, 1, D), torch.randn(ROWS, D)) for _ in range(TASKS)]
cases = {
    "stock: 3 matmuls 8 x 256 -> 256": lambda: [F.linear(x, w, b) for w, b in stock],
    "single task: 1 matmul 8 x 256 -> 768": lambda: F.linear(x, single, single_bias),
    "gathered: 1 matmul 8 x 256 -> 1536 (all candidates)": lambda: F.linear(x, candidates, candidates_bias),
    "batched: baddbmm 4 x (2 x 256 -> 768)": lambda: torch.baddbmm(batched_bias, blocks, batched),
    "grouped: 4 matmuls 2 x 256 -> 768": lambda: [F.linear(e, w, single_bias) for e, w in grouped],
}
for name, fn in cases.items():
    print(f"{name:55s} {per_call_us(fn):7.1f} us")
