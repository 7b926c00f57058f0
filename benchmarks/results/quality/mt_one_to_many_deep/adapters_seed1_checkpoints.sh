#!/bin/bash
# Session 39: adapters_seed1_checkpoints.yaml (the depth experiment's adapters seed 1 again, a checkpoint every 100
# updates), one lane of one thread as the original run; the log beside this script without its progress bars.
# collapse.sh then scores every checkpoint (adapters_seed1_checkpoints.md).
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_one_to_many_deep
OUT=outputs/benchmark/mt_one_to_many_deep_adapters_seed1_checkpoints
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training
mkdir -p $OUT
start=$(date +%s)
.venv/bin/python training/run_experiment.py $HERE/adapters_seed1_checkpoints.yaml \
  --systems "Adapters as many parameters as Group, trained with the model (ablation)" > $OUT/experiment.log 2>&1
echo "rc=$? $(($(date +%s) - start)) s $(date -u +%FT%TZ) adapters_seed1_checkpoints.sh" >> "$HERE/runs.txt"
tr '\r' '\n' < $OUT/experiment.log | grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<|^\s*$" > $HERE/adapters_seed1_checkpoints.log
