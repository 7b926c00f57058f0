#!/bin/bash
# Session 35: seeds 4 and 5 of Shared and Group without the noise at 3,000 updates; session 36: Group and the
# adapters too; session 37: the frozen selection (queued after run_3000_updates.sh), then Subset and the task-specific
# cross-attention. Alone on the 2-core machine, in the background, resumable (finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_many_to_one
start=$(date +%s)
headsel-experiment $R/mt_many_to_one_3000_updates_seeds_4_5.yaml \
  >> outputs/benchmark/mt_many_to_one_3000_updates_seeds_4_5_experiment.log 2>&1
echo "mt_many_to_one 3000 updates seeds 4-5 rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
