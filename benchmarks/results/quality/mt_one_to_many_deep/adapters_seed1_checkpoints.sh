#!/bin/bash
# Session 39: adapters_seed1_checkpoints.yaml (the depth experiment's adapters seed 1 again, a checkpoint every 100
# updates), one lane of one thread as the original run; the log beside this script without its progress bars.
# collapse.sh then scores every checkpoint (adapters_seed1_checkpoints.md).
source "$(dirname "$0")/record.sh"
OUT=outputs/benchmark/mt_one_to_many_deep_adapters_seed1_checkpoints
timed adapters_seed1_checkpoints.sh $OUT/experiment.log \
  $python training/run_experiment.py $HERE/adapters_seed1_checkpoints.yaml \
  --systems "Adapters as many parameters as Group, trained with the model (ablation)"
without_progress_bars $OUT/experiment.log $HERE/adapters_seed1_checkpoints.log
