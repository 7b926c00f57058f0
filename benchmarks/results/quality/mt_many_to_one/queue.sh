#!/bin/bash
# Session 34, the order the runs after run.sh were queued in (each script resumable; finished runs are skipped):
# the 3,000-update runs of Shared and Group without the noise first (the question the 1,000-update runs raised),
# then the two systems added to the 1,000-update file, then the paper's Group at 3,000 updates.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_many_to_one
start=$(date +%s)
headsel-experiment $R/mt_many_to_one_3000_updates.yaml --systems "Shared" "Group, no sampling noise (ablation)" \
  >> outputs/benchmark/mt_many_to_one_3000_updates_experiment.log 2>&1
echo "mt_many_to_one 3000 updates (Shared, Group no noise) rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
$R/run_added.sh
$R/run_3000_updates.sh
