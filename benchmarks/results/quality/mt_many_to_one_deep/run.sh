#!/bin/bash
# Session 60: many-to-one MT at depth (mt_many_to_one_deep.yaml beside this script), alone on the 2-core machine in two
# lanes of one thread each (`--lanes 2`; lane 2 logs to the output folder), resumable (a finished run is skipped),
# five systems x seeds 1-3; then its tables (tables.sh). Run times in runs.txt beside this script.
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_many_to_one_deep
OUT=outputs/benchmark/mt_many_to_one_deep
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training TOKENIZERS_PARALLELISM=false
mkdir -p $OUT
start=$(date +%s)
.venv/bin/python training/run_experiment.py $HERE/mt_many_to_one_deep.yaml --lanes 2 > $OUT/lane1.log 2>&1
echo "rc=$? $(($(date +%s) - start)) s $(date -u +%FT%TZ) run.sh" >> $HERE/runs.txt
bash $HERE/tables.sh
