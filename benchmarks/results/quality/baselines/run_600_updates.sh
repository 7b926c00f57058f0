#!/bin/bash
# Session 23: asr_600_updates.yaml (asr.yaml's setup at three times the updates; 4 systems x 3 seeds). Alone on the
# 2-core machine, in the background, resumable (finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
[ -d data/offline_corpus/speech/asr ] || headsel-build-corpus --output_dir data/offline_corpus --speech \
  > outputs/baselines_corpus.log 2>&1
python benchmarks/benchmark_tokenizers.py --kinds asr
start=$(date +%s)
headsel-experiment $R/asr_600_updates.yaml > outputs/baselines_asr_600_updates.log 2>&1
echo "asr 600 updates rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
# The log kept beside the tables, without its progress-bar lines.
grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" outputs/baselines_asr_600_updates.log > $R/asr_600_updates_experiment.log
