#!/bin/bash
# Device call B (issue 16): overhead.py at batch 128 (the earlier H100 run's shape), performance.py at batch 16 and
# 128, then overhead.py with every component selecting (issue 15's configuration) at batch 16.
source benchmarks/results/gpu_2026-11-26/setup.sh call_b
B128=(--batch-size 128 --src-len 64 --tgt-len 64 --gen-batch-size 64)
step overhead_marian_paper_b128 180 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 --repeats 6 \
  "${B128[@]}" --json "$RES/overhead_marian_paper_b128.json"
step performance_b16 110 python3 benchmarks/performance.py --device cuda --dtype bf16 --repeats 3 --warmup 1 \
  --output "$RES/performance_b16"
step performance_b128 110 python3 benchmarks/performance.py --device cuda --dtype bf16 --repeats 3 --warmup 1 \
  --batch-size 128 --gen-batch-size 64 --output "$RES/performance_b128"
step overhead_marian_all_b16 150 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 --repeats 6 \
  --components all --json "$RES/overhead_marian_all_b16.json"
