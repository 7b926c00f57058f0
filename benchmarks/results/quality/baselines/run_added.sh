#!/bin/bash
# Two systems added to the three files while run.sh was in its ASR (both) and ST (the second) experiments: MT picked
# them up when it started; this runs ASR and ST again afterwards (resumable: only the added systems train).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "baselines/run.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
for e in asr st; do
  start=$(date +%s)
  headsel-experiment $R/$e.yaml > outputs/baselines_${e}_added.log 2>&1
  echo "$e added systems rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
