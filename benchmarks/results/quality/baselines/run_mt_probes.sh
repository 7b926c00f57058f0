#!/bin/bash
# Two MT probes added to mt.yaml after run.sh and run_added.sh (resumable: only they train).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
start=$(date +%s)
headsel-experiment $R/mt.yaml > outputs/baselines_mt_probes.log 2>&1
echo "mt probes rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
