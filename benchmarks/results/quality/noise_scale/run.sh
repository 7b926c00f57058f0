#!/bin/bash
# The commands as run (session 33): alone on the 2-core machine, in the background, resumable (finished runs are
# skipped). Needs the speech corpus and the benchmark tokenizers (`make corpus`, then
# `python benchmarks/benchmark_tokenizers.py`).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/noise_scale
mkdir -p outputs/benchmark
python $R/flip_share.py
for scale in 0.5 0.25; do
  start=$(date +%s)
  mkdir -p $R/mechanism_$scale
  python benchmarks/mechanism.py --seeds 1 2 3 4 5 --noise_scale $scale --output_dir $R/mechanism_$scale \
    > $R/mechanism_$scale/mechanism.log 2>&1
  echo "mechanism $scale rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
for task in asr st mt; do
  start=$(date +%s)
  headsel-experiment $R/$task.yaml >> outputs/benchmark/noise_scale_${task}_experiment.log 2>&1
  echo "$task experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
