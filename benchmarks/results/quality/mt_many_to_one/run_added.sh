#!/bin/bash
# Session 34, after run.sh: the two systems added to the file (Subset; task-specific cross-attention keyed by the
# source language), the same setup; finished runs are skipped.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_many_to_one
start=$(date +%s)
headsel-experiment training/experiments/benchmark/mt_many_to_one.yaml \
  --systems "Subset" "Task-specific cross-attention (source)" >> outputs/benchmark/mt_many_to_one_experiment.log 2>&1
echo "mt_many_to_one added systems rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
