#!/bin/bash
# Session 32's second GPU call (device run, carry [".whl", "data/offline_corpus/mt"], timeout_s 290), after call.sh's
# runs left BLEU 0.0 everywhere: the recipe screen training/experiments/benchmark_gpu/mt_recipe_screen.yaml (shared
# model, seed 1, 1,000 updates, six recipes) in six lanes. Small outputs come back in $OUT/mt_screen.tgz.
source benchmarks/results/gpu_2026-11-26/setup.sh s32_screen
export PYTHONPATH=$PYTHONPATH:$PWD/training
EXPERIMENT=training/experiments/benchmark_gpu/mt_recipe_screen.yaml
RUNS=outputs/benchmark_gpu/mt_recipe_screen
for lane in 1 2 3 4 5 6; do
  OMP_NUM_THREADS=2 timeout 225 python3 training/run_experiment.py "$EXPERIMENT" >"$RES/lane$lane.txt" 2>&1 &
  sleep 1
done
wait
echo "== lanes done $(date +%T)"
tar czf "$OUT/mt_screen.tgz" --exclude=model.safetensors --exclude=training_args.bin --exclude='*.spm' \
  --exclude=vocab.json --exclude='*.py' -C "$(dirname "$RUNS")" "$(basename "$RUNS")" -C "$RES" .
for f in "$RUNS"/runs/*/seed1/trainer_state.json; do
  python3 -c "import json, sys; s = json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-3],
  [round(h['loss'], 2) for h in s['log_history'] if 'loss' in h])" "$f"
done
grep -h '"predict_loss"' "$RUNS"/runs/*/seed1/all_results.json
