#!/bin/bash
# Session 40: the depth comparison at learning rate 0.001, warmup 400 (lr_0.001_warmup_400.yaml: four systems, seeds
# 1-3), alone on the 2-core machine in two lanes of one thread, resumable; then its tables
# (lr_0.001_warmup_400_results.md, _supplementary.md, the two paired tables) and collapse.py over its runs
# (lr_0.001_warmup_400_collapse.md).
# Session 41: the file now has seeds 1-5; `bash run_lr_0.001_warmup_400.sh seeds_4_5` ran seeds 4-5 (the runner skips
# the finished seeds 1-3), kept their lane logs apart (lr_0.001_warmup_400_seeds_4_5_lane*.log) and rebuilt every
# table over the five seeds.
# Then the frozen-selection control added to the file: `bash run_lr_0.001_warmup_400.sh frozen` (only its five runs
# ran; lane logs lr_0.001_warmup_400_frozen_lane*.log; every table rebuilt with it), and the last line, how far each
# selection moved (lr_0.001_warmup_400_selection_changes.md), added after that run and run by hand.
# Session 44: the noise annealed 1 to 0 added to the file, `bash run_lr_0.001_warmup_400.sh annealed` (its five runs;
# lane logs lr_0.001_warmup_400_annealed_lane*.log; every table rebuilt with it). Then the noise rising 0 to 1:
# `bash run_lr_0.001_warmup_400.sh rising` (lane logs lr_0.001_warmup_400_rising_lane*.log).
source "$(dirname "$0")/record.sh"
NAME=lr_0.001_warmup_400
TAG=${1:+_$1}  # a later part keeps its lane logs apart
OUT=outputs/benchmark/mt_one_to_many_deep_$NAME
timed "run_$NAME.sh $1" $OUT/lane1.log $python training/run_experiment.py $HERE/$NAME.yaml --lanes 2
for lane in lane1 lane2; do
  without_progress_bars $OUT/$lane.log $HERE/${NAME}${TAG}_$lane.log
done
cp $OUT/results.md $HERE/${NAME}_results.md
$python benchmarks/quality_tables.py $OUT > $HERE/${NAME}_supplementary.md
$python benchmarks/quality_tables.py $OUT --paired_with shared > $HERE/${NAME}_paired_with_shared.md
$python benchmarks/quality_tables.py $OUT --paired_with group_no_sampling_noise_ablation \
  > $HERE/${NAME}_paired_with_group_no_noise.md
collapse_table $OUT > $HERE/${NAME}_collapse.md
$python benchmarks/results/quality/baselines/selection_changes.py $OUT > $HERE/${NAME}_selection_changes.md  # session 41
