#!/bin/bash
# The commands as run after run.sh (the first four systems): the demo's group run without sampling noise at make
# demo's 150 updates, seeds 1-3, then the probe again (it only re-reported: the two systems once added to mt_why.yaml
# were taken out before it ran).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "mt_why/run.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_why
for seed in 1 2 3; do
  out=outputs/demo_longer/steps150_no_noise_seed$seed
  [ -f $out/predict_results.json ] && continue
  rm -rf $out; start=$(date +%s)
  python $R/demo_no_noise_probe.py $seed 150 > $R/demo_steps150_no_noise_seed$seed.log 2>&1
  echo "demo steps150 no noise seed $seed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
start=$(date +%s)
python $R/ablation_probe.py >> outputs/benchmark/mt_why/probe.log 2>&1
echo "ablation_probe (added systems) rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
