#!/bin/bash
# Session 40: remedy_screen.yaml (the shared model at 6 + 6 layers, seed 1, four learning-rate / warmup settings),
# alone on the 2-core machine in two lanes of one thread, resumable; then collapse.py over the runs and their
# checkpoints (remedy_screen_collapse.md) and the tables (remedy_screen_results.md). The training losses of the
# README's table are read off remedy_screen_lane*.log (logged every 100 updates).
source "$(dirname "$0")/record.sh"
OUT=outputs/benchmark/mt_one_to_many_deep_remedy_screen
timed remedy_screen.sh $OUT/lane1.log $python training/run_experiment.py $HERE/remedy_screen.yaml --lanes 2
for lane in lane1 lane2; do
  without_progress_bars $OUT/$lane.log $HERE/remedy_screen_$lane.log
done
cp $OUT/results.md $HERE/remedy_screen_results.md
collapse_with_checkpoints $OUT > $HERE/remedy_screen_collapse.md
