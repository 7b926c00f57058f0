#!/bin/bash
# Session 39: collapse.py over the depth experiment's runs, the runs at learning rate 0.005, and two 2 + 2-layer
# experiments for comparison (one-to-many: the noise-scale study's runs; many-to-one at 1,000 and 3,000 updates), into
# collapse.md; then the checkpoints of adapters_seed1_checkpoints.sh into adapters_seed1_checkpoints.md.
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_one_to_many_deep
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training
table() { .venv/bin/python $HERE/collapse.py "$@" 2>/dev/null | grep '^|'; }
{
  for folder in mt_one_to_many_deep mt_one_to_many_deep_lr_0.005 noise_scale_mt mt_many_to_one \
      mt_many_to_one_3000_updates mt_many_to_one_3000_updates_seeds_4_5; do
    echo; echo "### outputs/benchmark/$folder"; echo
    table outputs/benchmark/$folder
  done
} > $HERE/collapse.md
table --checkpoints outputs/benchmark/mt_one_to_many_deep_adapters_seed1_checkpoints/runs/adapters_as_many_parameters_as_group_trained_with_the_model_ablation/seed1 \
  > $HERE/adapters_seed1_checkpoints.md
