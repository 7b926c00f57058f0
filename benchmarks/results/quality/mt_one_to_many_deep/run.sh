#!/bin/bash
# Session 38: the depth experiment (training/experiments/benchmark/mt_one_to_many_deep.yaml), alone on the 2-core
# machine in two lanes of one thread each (`--lanes 2`; lane 2 logs to the output folder), resumable (a finished run
# is skipped), systems in the file's order (Shared, Group without the noise, Group,
# the parameter-matched adapters), seeds 1-3 each. Log and run times beside this script.
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_one_to_many_deep
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training
start=$(date +%s)
.venv/bin/python training/run_experiment.py training/experiments/benchmark/mt_one_to_many_deep.yaml --lanes 2 \
  > "$HERE/experiment.log" 2>&1
echo "rc=$? $(($(date +%s) - start)) s $(date -u +%FT%TZ) run.sh" >> "$HERE/runs.txt"
