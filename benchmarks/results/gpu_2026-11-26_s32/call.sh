#!/bin/bash
# Session 32's GPU call (device run, carry [".whl", "data/offline_corpus/mt"], timeout_s 560): the CUDA tests on the
# current code, beside the first full-size quality runs: one-to-many MT at 2,000 updates
# (training/experiments/benchmark_gpu/mt_one_to_many_2000_updates.yaml) in six lanes on the one GPU (each lane one
# process; the steps are host-bound, so the lanes share the card). Wheels: ../gpu_2026-11-26/README.md plus the
# training extras the machine lacks (datasets, evaluate, jiwer, rapidfuzz, dill, multiprocess, fsspec, sacremoses,
# polib, soundfile, cffi, pycparser; the versions of .venv here). Everything small the runs write comes back in
# $OUT/mt_runs.tgz (model weights left behind).
source benchmarks/results/gpu_2026-11-26/setup.sh s32
export PYTHONPATH=$PYTHONPATH:$PWD/training
EXPERIMENT=${EXPERIMENT:-training/experiments/benchmark_gpu/mt_one_to_many_2000_updates.yaml}
RUNS=${RUNS:-outputs/benchmark_gpu/mt_one_to_many_2000_updates}
{ nvidia-smi; python3 -c "import sys, torch, transformers, datasets, pyarrow, fsspec, sacrebleu, tokenizers
print(sys.version); print('torch', torch.__version__, 'transformers', transformers.__version__, 'datasets',
datasets.__version__, 'pyarrow', pyarrow.__version__, 'fsspec', fsspec.__version__, 'sacrebleu', sacrebleu.__version__,
'tokenizers', tokenizers.__version__)"; nproc; } >"$RES/environment.txt" 2>&1
python3 -c "import headsel_recipes.recipe, jiwer, soundfile, polib" >"$RES/imports.txt" 2>&1 || cat "$RES/imports.txt"
for lane in 1 2 3 4 5 6; do
  OMP_NUM_THREADS=2 timeout 450 python3 training/run_experiment.py "$EXPERIMENT" >"$RES/lane$lane.txt" 2>&1 &
  sleep 2  # claims in plan order: Shared seeds 1-3, Group seeds 1-3; a lane that finishes takes a frozen-control run
done
OMP_NUM_THREADS=4 step test_cuda 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py
wait
echo "== lanes done $(date +%T)"
step tables 60 python3 training/run_experiment.py "$EXPERIMENT" --tables_only
# Added in session 39: whether each saved model needs its dropout and whether its encoder and decoder tell positions
# apart (benchmarks/results/quality/mt_one_to_many_deep/README.md, "Models that work only with dropout on"); CPU.
OMP_NUM_THREADS=8 step collapse 45 python3 benchmarks/results/quality/mt_one_to_many_deep/collapse.py "$RUNS"
tar czf "$OUT/mt_runs.tgz" --exclude=model.safetensors --exclude=training_args.bin --exclude='*.spm' \
  --exclude=vocab.json --exclude='*.py' -C "$(dirname "$RUNS")" "$(basename "$RUNS")"
grep -h "rc=\|passed\|failed" "$RES"/test_cuda.txt | tail -3
tail -c 1500 "$RES/tables.txt"
