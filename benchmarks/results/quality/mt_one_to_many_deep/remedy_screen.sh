#!/bin/bash
# Session 40: remedy_screen.yaml (the shared model at 6 + 6 layers, seed 1, four learning-rate / warmup settings),
# alone on the 2-core machine in two lanes of one thread, resumable; then collapse.py over the runs and their
# checkpoints (remedy_screen_collapse.md) and the tables (remedy_screen_results.md). The training losses of the
# README's table are read off remedy_screen_lane*.log (logged every 100 updates).
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_one_to_many_deep
OUT=outputs/benchmark/mt_one_to_many_deep_remedy_screen
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training
mkdir -p $OUT
start=$(date +%s)
.venv/bin/python training/run_experiment.py $HERE/remedy_screen.yaml --lanes 2 > $OUT/lane1.log 2>&1
echo "rc=$? $(($(date +%s) - start)) s $(date -u +%FT%TZ) remedy_screen.sh" >> "$HERE/runs.txt"
for lane in lane1 lane2; do
  tr '\r' '\n' < $OUT/$lane.log | grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<|^\s*$" > $HERE/remedy_screen_$lane.log
done
cp $OUT/results.md $HERE/remedy_screen_results.md
table() { .venv/bin/python $HERE/collapse.py "$@" 2>/dev/null | grep '^|'; }
{
  echo "### runs"; echo; table $OUT
  for run in $OUT/runs/*/seed*; do echo; echo "### checkpoints of $run"; echo; table --checkpoints $run; done
} > $HERE/remedy_screen_collapse.md
