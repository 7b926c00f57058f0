#!/bin/bash
# Session 31: the subset strategy at H' = 6 (the systems after "Session 31" in asr.yaml and mt.yaml), with Subset and
# Subset without the noise at H' = 8 trained again beside them (their runs are not on this machine; their scores are
# checked against asr_results.json / mt_results.json). Shared and Group are on this machine already and are skipped
# (a finished run is). Alone on the 2-core machine, in the background, resumable.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
[ -d data/offline_corpus/speech/asr ] || headsel-build-corpus --output_dir data/offline_corpus --speech \
  > outputs/baselines_corpus.log 2>&1
python benchmarks/benchmark_tokenizers.py --kinds asr
SYSTEMS=("Shared" "Group" "Subset" "Subset, no sampling noise (ablation)" "Subset, H' = 6 (ablation)"
         "Subset, H' = 6, no sampling noise (ablation)")
for e in asr mt; do
  start=$(date +%s)
  headsel-experiment $R/$e.yaml --systems "${SYSTEMS[@]}" > outputs/baselines_${e}_session31.log 2>&1
  echo "$e session 31 systems rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
  grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" outputs/baselines_${e}_session31.log > $R/${e}_session31_experiment.log
done
