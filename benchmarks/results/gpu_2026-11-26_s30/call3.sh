#!/bin/bash
# Session 30's third GPU call (device run with carry [".whl"], timeout_s 200), after the library's change: a
# single-task training batch on CUDA projects gathered under `auto`. The CUDA tests (the new equality test among
# them), then overhead.py's training steps again, to compare with call.sh's run of the code before.
source benchmarks/results/gpu_2026-11-26/setup.sh s30_after
step test_cuda 100 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py
step overhead_all_train_b16 60 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 --components all \
  --repeats 10 --only "train step" --json "$RES/overhead_all_train_b16.json"
