#!/bin/bash
# The command as run (session 34): alone on the 2-core machine, in the background, resumable (finished runs are
# skipped). Needs the text corpus (`make corpus`, or `headsel-build-corpus --output_dir data/offline_corpus`).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_many_to_one
mkdir -p outputs/benchmark
start=$(date +%s)
headsel-experiment training/experiments/benchmark/mt_many_to_one.yaml >> outputs/benchmark/mt_many_to_one_experiment.log 2>&1
echo "mt_many_to_one experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
