#!/bin/bash
# The command as run: alone on the 2-core machine, in the background, resumable (finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
start=$(date +%s)
python benchmarks/results/quality/mt_why/ablation_probe.py > outputs/benchmark/mt_why/probe.log 2>&1
echo "rc $? after $(( $(date +%s) - start )) s" >> outputs/benchmark/mt_why/probe.log
