#!/bin/bash
# Session 62: does a trained depth run use its own task's heads? route_swap.py's tables for the two depth
# experiments at learning rate 0.001 / warmup 400: one-to-many (its decoder routed by the target language; Group
# without the noise, its frozen selection and the adapters of as many parameters retrained, seeds 1-5: their run
# folders were not kept) and many-to-one (its encoder routed by the source language; ../mt_many_to_one_deep/run.sh's
# runs). Alone on the machine, two lanes, resumable (a finished run is skipped); times in runs.txt beside this
# script; then route_swap_tables.sh.
source "$(dirname "$0")/record.sh"
OUT=outputs/benchmark/mt_one_to_many_deep_lr_0.001_warmup_400
timed "route_swap.sh: retrain $1" $OUT/route_swap_lane1.log \
  $python training/run_experiment.py $HERE/lr_0.001_warmup_400.yaml --lanes 2 \
  --systems "Group, no sampling noise (ablation)" "Adapters as many parameters as Group, trained with the model (ablation)" \
  "Group, no sampling noise, selection frozen (ablation)"
without_progress_bars $OUT/route_swap_lane1.log $HERE/route_swap_${1:+$1_}lane1.log
without_progress_bars $OUT/lane2.log $HERE/route_swap_${1:+$1_}lane2.log  # lane 2 logs to the output folder
bash $HERE/route_swap_tables.sh
