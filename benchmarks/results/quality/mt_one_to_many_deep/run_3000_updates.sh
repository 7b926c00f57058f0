#!/bin/bash
# Session 39: the depth probe (mt_one_to_many_deep_3000_updates.yaml: Shared and Group without the noise, seeds 1-2,
# 3,000 updates; seed 2 added after seed 1), alone on the 2-core machine in two lanes of one thread, resumable; then collapse.py over its runs
# and checkpoints (3000_updates_collapse.md) and its tables (3000_updates_results.md). Logs without progress bars here
# (seed 1's launch: 3000_updates_seed1_lane*.log).
source "$(dirname "$0")/record.sh"
OUT=outputs/benchmark/mt_one_to_many_deep_3000_updates
timed run_3000_updates.sh $OUT/lane1.log \
  $python training/run_experiment.py $HERE/mt_one_to_many_deep_3000_updates.yaml --lanes 2
for lane in lane1 lane2; do
  without_progress_bars $OUT/$lane.log $HERE/3000_updates_$lane.log
done
cp $OUT/results.md $HERE/3000_updates_results.md
collapse_with_checkpoints $OUT > $HERE/3000_updates_collapse.md
