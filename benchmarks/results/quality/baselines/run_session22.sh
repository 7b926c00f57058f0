#!/bin/bash
# Session 22: the parameter-matched adapters and head selection plus adapters (the systems after "Sessions
# 21-22" in asr.yaml and mt.yaml), paired by seed with Shared, Group without the noise and the adapters trained with
# the model.
# Session 21 ran them but was cut off before anything was committed, and its runs were lost with its machine: on a
# fresh machine only these systems train (`--systems`), so Shared and the two others are trained again; their scores
# are checked against the ones recorded in {asr,mt}_results.json (same code, same seeds). Alone on the 2-core
# machine, in the background, resumable.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
[ -d data/offline_corpus/speech/asr ] || headsel-build-corpus --output_dir data/offline_corpus --speech \
  > outputs/baselines_corpus.log 2>&1
python benchmarks/benchmark_tokenizers.py --kinds asr
PAIRED=("Shared" "Group, no sampling noise (ablation)" "Adapters, trained with the model (same budget)"
        "Adapters as many parameters as Group, trained with the model (ablation)"
        "Group no sampling noise plus adapters, trained with the model (ablation)")
start=$(date +%s)
headsel-experiment $R/asr.yaml --systems "${PAIRED[@]}" > outputs/baselines_asr_session22.log 2>&1
echo "asr session 22 systems rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
start=$(date +%s)
headsel-experiment $R/mt.yaml --systems "${PAIRED[@]}" \
  "Adapters keyed by task as many parameters as Group, trained with the model (ablation)" \
  > outputs/baselines_mt_session22.log 2>&1
echo "mt session 22 systems rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
