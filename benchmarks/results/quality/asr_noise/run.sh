#!/bin/bash
# The commands as run: alone on the 2-core machine, in the background, resumable (finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "mt_why/(queue|flag_check).sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/asr_noise
start=$(date +%s)
[ -d data/offline_corpus/speech/asr ] || headsel-build-corpus --output_dir data/offline_corpus --speech \
  > outputs/asr_noise_corpus.log 2>&1
echo "corpus rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
python benchmarks/benchmark_tokenizers.py --kinds asr  # (the same steps were inline when this ran)
start=$(date +%s)
headsel-experiment $R/asr_noise.yaml > outputs/asr_noise_experiment.log 2>&1
echo "experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
