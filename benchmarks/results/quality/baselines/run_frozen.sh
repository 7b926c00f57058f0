#!/bin/bash
# Session 24: Group without the noise, its selection frozen at the initial logits ("Group, no sampling noise,
# selection frozen (ablation)"), added to mt_3000_updates.yaml and asr_600_updates.yaml, 3 seeds each; the other
# systems' runs are finished and skipped. Alone on the 2-core machine, in the background, resumable.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
SYSTEM="Group, no sampling noise, selection frozen (ablation)"
python benchmarks/benchmark_tokenizers.py --kinds asr
for e in asr_600_updates mt_3000_updates; do
  start=$(date +%s)
  headsel-experiment $R/$e.yaml --systems "$SYSTEM" > outputs/baselines_${e}_frozen.log 2>&1
  echo "$e frozen rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
  # The log kept beside the tables, without its progress-bar lines.
  grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" outputs/baselines_${e}_frozen.log > $R/${e}_frozen_experiment.log
done
