#!/bin/bash
# Session 39: the depth probe (mt_one_to_many_deep_3000_updates.yaml: Shared and Group without the noise, seeds 1-2,
# 3,000 updates; seed 2 added after seed 1), alone on the 2-core machine in two lanes of one thread, resumable; then collapse.py over its runs
# and checkpoints (3000_updates_collapse.md) and its tables (3000_updates_results.md). Logs without progress bars here
# (seed 1's launch: 3000_updates_seed1_lane*.log).
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_one_to_many_deep
OUT=outputs/benchmark/mt_one_to_many_deep_3000_updates
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training
mkdir -p $OUT
start=$(date +%s)
.venv/bin/python training/run_experiment.py $HERE/mt_one_to_many_deep_3000_updates.yaml --lanes 2 > $OUT/lane1.log 2>&1
echo "rc=$? $(($(date +%s) - start)) s $(date -u +%FT%TZ) run_3000_updates.sh" >> "$HERE/runs.txt"
for lane in lane1 lane2; do
  tr '\r' '\n' < $OUT/$lane.log | grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<|^\s*$" > $HERE/3000_updates_$lane.log
done
cp $OUT/results.md $HERE/3000_updates_results.md
table() { .venv/bin/python $HERE/collapse.py "$@" 2>/dev/null | grep '^|'; }
{
  echo "### runs"; echo; table $OUT
  for run in $OUT/runs/*/seed*; do echo; echo "### checkpoints of $run"; echo; table --checkpoints $run; done
} > $HERE/3000_updates_collapse.md
