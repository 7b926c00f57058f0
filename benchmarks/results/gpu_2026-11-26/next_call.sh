#!/bin/bash
# Prepared for the next GPU session; session 30 ran these steps (../gpu_2026-11-26_s30/call.sh, with the CUDA tests
# first): what issue 16's training target waits on, in one call of at most
# 10 minutes (device run with carry [".whl"], timeout_s 600; the wheels as in README.md). From the repository root:
#   bash benchmarks/results/gpu_2026-11-26/next_call.sh
# 1-2: the single-task training variants of ../training_kernels/ (gathered, plain rows, fast apply) against the
#      library and the stock model on the GPU, at batch 16 and 128;
# 3:   overhead.py's training steps after session 28's kernel trims (every component selecting);
# 4:   the same compiled (torch.compile of forward and backward; compilation in the warm-up rounds).
source benchmarks/results/gpu_2026-11-26/setup.sh next
variants=benchmarks/results/training_kernels/single_task_training_variants.py
step variants_b16 100 python3 $variants standard --device cuda --dtype bfloat16 --repeats 20
step variants_b128 120 python3 $variants standard --device cuda --dtype bfloat16 --repeats 20 --batch-size 128
step overhead_all_train_b16 120 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 --components all \
  --repeats 10 --only "train step" --json "$RES/overhead_all_train_b16.json"
step overhead_all_train_b16_compiled 240 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 \
  --components all --repeats 10 --only "train step" --compile --json "$RES/overhead_all_train_b16_compiled.json"
