#!/bin/bash
# Session 63: misrouting at 2 + 2 layers. Does a one-to-many model of the main results (mt.yaml: d_model 64, 2 + 2
# layers, 1,000 updates) use its own target language's heads? ../mt_one_to_many_deep/route_swap.py, as at depth:
# Group, Group without the noise and the adapters of as many parameters, seeds 1-3, retrained into
# outputs/benchmark/mt_2x2_route_swap (mt.yaml's run folders were not kept); alone, two lanes of one thread,
# resumable (a finished run is skipped); times in runs.txt beside this script. Then the retrained runs' scores
# (route_swap_retrained_supplementary.md, to set beside the recorded mt_supplementary.md) and route_swap.py's
# tables (route_swap.md).
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
OUT=outputs/benchmark/mt_2x2_route_swap
timed "route_swap.sh: retrain" $OUT/route_swap_lane1.log \
  $python training/run_experiment.py $HERE/mt.yaml --output_dir $OUT --lanes 2 \
  --systems "Group" "Group, no sampling noise (ablation)" \
  "Adapters as many parameters as Group, trained with the model (ablation)"
without_progress_bars $OUT/route_swap_lane1.log $HERE/route_swap_lane1.log
without_progress_bars $OUT/lane2.log $HERE/route_swap_lane2.log  # lane 2 logs to the output folder
$python benchmarks/quality_tables.py $OUT > $HERE/route_swap_retrained_supplementary.md
cp $OUT/runs/group/seed1/environment.jsonl $HERE/route_swap_environment.jsonl  # where they ran (the report: all alike)
misrouting_table $OUT > $HERE/route_swap.md
