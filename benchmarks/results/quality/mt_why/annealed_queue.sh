#!/bin/bash
# The commands as run for the annealed-noise variant (after the ST ablation, alone): the mechanism benchmark, then the
# three experiment files again (each trains only its missing runs: the "noise annealed 1 to 0" systems).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "st_noise/run.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_why
start=$(date +%s)
python benchmarks/mechanism.py --seeds 1 2 3 4 5 --noise_scale 1 --final_noise_scale 0 \
  --output_dir benchmarks/results/mechanism_noise_annealed > benchmarks/results/mechanism_noise_annealed/mechanism.log 2>&1
echo "mechanism annealed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
start=$(date +%s)
headsel-experiment benchmarks/results/quality/asr_noise/asr_noise.yaml >> outputs/asr_noise_experiment.log 2>&1
echo "asr annealed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
start=$(date +%s)
headsel-experiment benchmarks/results/quality/st_noise/st_noise.yaml >> outputs/st_noise_experiment.log 2>&1
echo "st annealed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
start=$(date +%s)
python $R/ablation_probe.py >> outputs/benchmark/mt_why/probe.log 2>&1
echo "mt annealed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
