cd /work/main
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
for seed in 1 2 3; do
  out=outputs/demo_longer/steps1000_seed$seed
  [ -f $out/metrics.json ] && continue
  rm -rf $out
  start=$(date +%s)
  .venv/bin/headsel-demo --output_dir $out --max_steps 1000 --seed $seed --no_progress \
    > benchmarks/results/quality/demo_longer/steps1000_seed$seed.log 2>&1
  echo "seed $seed rc $? $(( $(date +%s) - start )) s" >> benchmarks/results/quality/demo_longer/runs.txt
done
