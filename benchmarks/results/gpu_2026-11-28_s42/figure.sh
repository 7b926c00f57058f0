#!/bin/bash
# Session 42: the README's quality figure for the paper's depth (CPU) and the paper's size (GPU): test cross-entropy
# minus the shared model's, paired by seed. From the repository root, with the run folders unpacked:
#   mkdir -p outputs/benchmark_gpu && tar xzf benchmarks/results/gpu_2026-11-28_s42/mt_runs.tgz -C outputs/benchmark_gpu
# (the depth runs: benchmarks/results/quality/mt_one_to_many_deep/run_lr_0.001_warmup_400.sh trains them).
source "$(dirname "$0")/../quality/mt_one_to_many_deep/record.sh"  # the repository root; the systems and labels
PYTHONPATH=benchmarks:training .venv/bin/python benchmarks/quality_plot.py --reference shared \
    --panel $'MT, 6 + 6 layers of d_model 64\n(CPU, 1,000 updates, 5 seeds)' outputs/benchmark/mt_one_to_many_deep_lr_0.001_warmup_400 \
    --panel $'MT, the paper\'s size\n(GPU, 2,000 updates, 3 seeds)' outputs/benchmark_gpu/mt_one_to_many_2000_updates_screened \
    "${DEPTH_FIGURE_SYSTEMS[@]}" \
    --output benchmarks/results/gpu_2026-11-28_s42/deep_and_full_size_against_shared.png
