#!/bin/bash
# The commands as run (after the mechanism run, alone): the tokenizer as RESULTS.md's round-3 commands build it, then
# the experiment (resumable: finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "mechanism_no_noise/run.sh|asr_noise/run.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/st_noise
python benchmarks/benchmark_tokenizers.py --kinds st  # (the same steps were inline when this ran)
start=$(date +%s)
headsel-experiment $R/st_noise.yaml > outputs/st_noise_experiment.log 2>&1
echo "experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
