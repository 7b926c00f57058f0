#!/bin/bash
# Session 42: the README's quality figure for the paper's depth (CPU) and the paper's size (GPU): test cross-entropy
# minus the shared model's, paired by seed. From the repository root, with the run folders unpacked:
#   mkdir -p outputs/benchmark_gpu && tar xzf benchmarks/results/gpu_2026-11-28_s42/mt_runs.tgz -C outputs/benchmark_gpu
# (the depth runs: benchmarks/results/quality/mt_one_to_many_deep/run_lr_0.001_warmup_400.sh trains them).
cd "$(dirname "$0")/../../.." || exit 1
PYTHONPATH=benchmarks:training .venv/bin/python benchmarks/quality_plot.py --reference shared \
    --panel $'MT, 6 + 6 layers of d_model 64\n(CPU, 1,000 updates, 5 seeds)' outputs/benchmark/mt_one_to_many_deep_lr_0.001_warmup_400 \
    --panel $'MT, the paper\'s size\n(GPU, 2,000 updates, 3 seeds)' outputs/benchmark_gpu/mt_one_to_many_2000_updates_screened \
    --system group "Group head selection (the paper's recipe)" \
    --system group_no_sampling_noise_ablation "Group, no sampling noise (ablation)" \
    --system adapters_as_many_parameters_as_group_trained_with_the_model_ablation "Adapters, as many parameters as Group (ablation)" \
    --system group_no_sampling_noise_selection_frozen_ablation "Group, no sampling noise, selection frozen (ablation)" \
    --output benchmarks/results/gpu_2026-11-28_s42/deep_and_full_size_against_shared.png
