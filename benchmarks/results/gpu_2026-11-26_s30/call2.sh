#!/bin/bash
# Session 30's second GPU call (device run with carry [".whl"], timeout_s 300): the single-task training variants at
# Transformer-big widths (`large`), where arithmetic rather than launches could bound a step, batch 16 and 64.
source benchmarks/results/gpu_2026-11-26/setup.sh s30_large
variants=benchmarks/results/training_kernels/single_task_training_variants.py
step variants_large_b16 120 python3 $variants large --device cuda --dtype bfloat16 --repeats 20
step variants_large_b64 150 python3 $variants large --device cuda --dtype bfloat16 --repeats 20 --batch-size 64
