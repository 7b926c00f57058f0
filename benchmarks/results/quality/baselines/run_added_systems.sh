#!/bin/bash
# Systems added to mt_3000_updates.yaml and asr_600_updates.yaml after their first runs, 3 seeds each; the other
# systems' runs are finished and skipped. Alone on the 2-core machine, in the background, resumable (a finished run
# is skipped). Usage: run_added_systems.sh TAG "SYSTEM NAME" ["SYSTEM NAME" ...]; TAG names the logs
# (outputs/baselines_<experiment>_<TAG>.log, and beside the tables <experiment>_<TAG>_experiment.log without its
# progress-bar lines) and the lines appended to runs.txt.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/baselines
TAG=$1; shift
[ -d data/offline_corpus/speech/asr ] || headsel-build-corpus --output_dir data/offline_corpus --speech \
  > outputs/baselines_corpus.log 2>&1
python benchmarks/benchmark_tokenizers.py --kinds asr
for e in asr_600_updates mt_3000_updates; do
  start=$(date +%s)
  headsel-experiment $R/$e.yaml --systems "$@" > outputs/baselines_${e}_${TAG}.log 2>&1
  echo "$e $TAG rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
  grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" outputs/baselines_${e}_${TAG}.log > $R/${e}_${TAG}_experiment.log
done
