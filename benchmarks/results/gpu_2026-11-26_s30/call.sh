#!/bin/bash
# Session 30's one GPU call (H100 lent, 15 minutes of device time in all). From the repository root, wheels in .whl/
# as in ../gpu_2026-11-26/README.md, device run with carry [".whl"], timeout_s 600:
#   bash benchmarks/results/gpu_2026-11-26_s30/call.sh
# Steps in priority order; $RES is packed into $OUT after every step, so a cut-off call still returns what finished.
# 1: the CUDA tests, first run of session 29's mended mixed-batch test on a GPU;
# 2-5: ../gpu_2026-11-26/next_call.sh's measurements (issue 16's training target): overhead.py's training steps after
#      session 28's kernel trims, the single-task training variants at batch 16 and 128, then the same compiled.
source benchmarks/results/gpu_2026-11-26/setup.sh s30
{ nvidia-smi; python3 -c "import sys, torch, transformers; print(sys.version); print('torch', torch.__version__, \
'transformers', transformers.__version__)"; } >"$RES/environment.txt" 2>&1
step test_cuda 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py
step overhead_all_train_b16 110 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 --components all \
  --repeats 10 --only "train step" --json "$RES/overhead_all_train_b16.json"
variants=benchmarks/results/training_kernels/single_task_training_variants.py
step variants_b16 90 python3 $variants standard --device cuda --dtype bfloat16 --repeats 20
step variants_b128 100 python3 $variants standard --device cuda --dtype bfloat16 --repeats 20 --batch-size 128
step overhead_all_train_b16_compiled 200 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 \
  --components all --repeats 10 --only "train step" --compile --json "$RES/overhead_all_train_b16_compiled.json"
