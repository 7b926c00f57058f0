#!/bin/bash
# Session 24: Group (the paper's recipe) trained again at asr.yaml's and mt.yaml's budgets (200 and 1,000 updates,
# seeds 1-3), whose run folders this machine had lost, for the per-seed losses the quality plot pairs; then whether
# the runs reproduce the recorded scores. Alone on the 2-core machine, in the background, resumable.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
python benchmarks/benchmark_tokenizers.py --kinds asr
for e in asr mt; do
  start=$(date +%s)
  headsel-experiment $R/$e.yaml --systems Group > outputs/baselines_${e}_group_again.log 2>&1
  echo "$e group again rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
  python $R/reproduce_check.py $R/$e.yaml $R/${e}_results.json | grep "^Group, seed" > $R/${e}_session24_reproduced.txt
done
