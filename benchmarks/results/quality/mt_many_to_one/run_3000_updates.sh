#!/bin/bash
# Session 34, after run.sh and run_added.sh: mt_many_to_one_3000_updates.yaml (3 systems x 3 seeds; session 35
# added the adapters: 4 x 3; session 36 Subset: 5 x 3; session 37 the frozen selection and the task-specific
# cross-attention: 7 x 3). Alone on the 2-core machine, in the background, resumable (finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_many_to_one
start=$(date +%s)
headsel-experiment $R/mt_many_to_one_3000_updates.yaml >> outputs/benchmark/mt_many_to_one_3000_updates_experiment.log 2>&1
echo "mt_many_to_one 3000 updates rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
