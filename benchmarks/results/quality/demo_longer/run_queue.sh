cd /work/main
while pgrep -f run_longer.sh >/dev/null; do sleep 30; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/demo_longer
for seed in 1 2 3; do
  out=outputs/demo_longer/steps1000_selection_lr005_seed$seed
  [ -f $out/predict_results.json ] && continue
  rm -rf $out; start=$(date +%s)
  .venv/bin/python benchmarks/results/quality/demo_longer/selection_lr_probe.py $seed > $R/steps1000_selection_lr005_seed$seed.log 2>&1
  echo "selection_lr005 seed $seed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
for seed in 1 2 3; do
  out=outputs/demo_longer/steps150_seed$seed
  [ -f $out/metrics.json ] && continue
  rm -rf $out; start=$(date +%s)
  .venv/bin/headsel-demo --output_dir $out --max_steps 150 --seed $seed --no_progress > $R/steps150_seed$seed.log 2>&1
  echo "steps150 seed $seed rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
done
