#!/bin/bash
# The commands as run: alone on the 2-core machine, in the background, resumable (finished runs are skipped). The
# corpus, tokenizers and the runs these files share with ../{asr_noise,st_noise,mt_why}/ come from those folders'
# run.sh (same output folders).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
for e in asr st mt; do
  start=$(date +%s)
  headsel-experiment $R/$e.yaml > outputs/baselines_$e.log 2>&1
  echo "$e experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
