#!/bin/bash
# The command as run (after the ASR ablation, alone): the mechanism benchmark with the training noise switched off.
cd "$(dirname "$0")/../../.." && source .venv/bin/activate
while pgrep -f "asr_noise/run.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
start=$(date +%s)
python benchmarks/mechanism.py --seeds 1 2 3 4 5 --noise_scale 0 --output_dir benchmarks/results/mechanism_no_noise \
  > benchmarks/results/mechanism_no_noise/mechanism.log 2>&1
echo "rc $? $(( $(date +%s) - start )) s" >> benchmarks/results/mechanism_no_noise/mechanism.log
