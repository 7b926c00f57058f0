#!/bin/bash
# Prepared in session 42 for the next GPU call (device run, carry [".whl", "data/offline_corpus/mt"], timeout 560 s;
# wheels and corpus as in ../gpu_2026-11-26_s32/README.md). The two sets of runs session 42 could not finish, full
# 2,000 updates with test scores, six lanes on the one GPU: three lanes for the parameter-matched adapters of
# training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_screened.yaml (seeds 1-3; their adapters now run in
# blocks in a training step, session 42, where they had trained at about 3.8 updates/s task by task), three for Group
# without the noise with its selection frozen of mt_one_to_many_2000_updates_diagnosis.yaml (seeds 1-3). The finished
# runs are not carried (the carry's 64 MiB): afterwards, here, unpack $OUT/mt_runs.tgz beside
# ../gpu_2026-11-28_s42/mt_runs.tgz and build the tables with `headsel-experiment FILE --tables_only`.
source benchmarks/results/gpu_2026-11-26/setup.sh next
export PYTHONPATH=$PYTHONPATH:$PWD/training
SCREENED=training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_screened.yaml
DIAGNOSIS=training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_diagnosis.yaml
lane() {  # lane NUMBER FILE SYSTEM: one lane of FILE training SYSTEM's runs, its log straight into $OUT
  OMP_NUM_THREADS=2 timeout 470 python3 training/run_experiment.py "$2" --systems "$3" >"$OUT/lane$1.txt" 2>&1 &
  sleep 2  # claims in plan order: seeds 1-3
}
for number in 1 2 3; do lane $number $SCREENED "Adapters as many parameters as Group, trained with the model (ablation)"; done
for number in 4 5 6; do lane $number $DIAGNOSIS "Group, no sampling noise, selection frozen (ablation)"; done
wait
echo "== lanes done $(date +%T)"
tar czf "$OUT/mt_runs.tgz" --exclude=model.safetensors --exclude=training_args.bin --exclude='*.spm' \
  --exclude=vocab.json --exclude='*.py' -C outputs/benchmark_gpu mt_one_to_many_2000_updates_screened \
  mt_one_to_many_2000_updates_diagnosis
grep -h "'train_runtime'\|predict_loss " "$OUT"/lane*.txt | head -12
