#!/bin/bash
# Session 70: regulariser controls at depth (lr_0.001_warmup_400_dropout.yaml: Shared and Group without the noise at
# dropout 0.1, 0.2 and 0.3; seeds 1-3) into outputs/benchmark/mt_one_to_many_deep_dropout; alone, two lanes of one
# thread, resumable (a finished run is skipped); the time in runs.txt beside this script. Then the runner's tables
# (lr_0.001_warmup_400_dropout_results.md), every system minus Shared, paired by seed (_paired_with_shared.md),
# Group without the noise minus Shared at each dropout setting (_matched.md), the same with every run scored again
# without label smoothing (plain_test_loss.py, into outputs/benchmark/mt_one_to_many_deep_dropout_plain:
# _plain_matched.md, the training examples' plain loss beside the test loss), and collapse.py's table (_collapse.md).
# `run_lr_0.001_warmup_400_dropout.sh TAG` names its runs.txt entries and lane logs by TAG (`attention_dropout`: the
# systems added to the YAML after the first runs).
# Session 71: `run_lr_0.001_warmup_400_dropout.sh seeds_4_5` runs the file's seeds 4-5 (${NAME}_seeds_4_5.yaml, its own
# output folder; every table above named ${NAME}_seeds_4_5_*.md), then pairs seeds 1-5 from every lane log of the
# file (lane_log_pairs.py: ${NAME}_five_seeds.md), as seeds 1-3's run folders are not kept.
source "$(dirname "$0")/record.sh"
NAME=lr_0.001_warmup_400_dropout
OUT=outputs/benchmark/mt_one_to_many_deep_dropout
PART=$NAME  # the YAML this part runs and its tables' names: the file's own, or a part with its own YAML
if [ -f "$HERE/${NAME}_$1.yaml" ]; then PART=${NAME}_$1 OUT=${OUT}_$1; fi
experiment_in_two_lanes "run_$NAME.sh${1:+ $1}" $OUT/lane1.log $HERE/$NAME${1:+_$1} $HERE/$PART.yaml
cp $OUT/results.md $HERE/${PART}_results.md
$python benchmarks/quality_tables.py $OUT --paired_with shared > $HERE/${PART}_paired_with_shared.md
MATCHED=(--pair group_no_sampling_noise_ablation shared
         --pair group_no_sampling_noise_dropout_0_2_regulariser_control shared_dropout_0_2_regulariser_control
         --pair group_no_sampling_noise_dropout_0_3_regulariser_control shared_dropout_0_3_regulariser_control
         --pair group_no_sampling_noise_attention_dropout_0_1_regulariser_control
                shared_attention_dropout_0_1_regulariser_control)
$python benchmarks/quality_tables.py $OUT "${MATCHED[@]}" > $HERE/${PART}_matched.md
plain_test_losses "run_$NAME.sh${1:+ $1}: plain test loss" $OUT
$python benchmarks/quality_tables.py ${OUT}_plain --train_loss "${MATCHED[@]}" > $HERE/${PART}_plain_matched.md
collapse_table $OUT > $HERE/${PART}_collapse.md
# every seed of the file, from the lane logs: each control minus Shared at 0.1, and the matched pairs
# (named one by one: ${NAME}_baselines_*.log are another file's, with runs of the same names and seeds)
LOGS=("$HERE/$NAME"{,_attention_dropout,_seeds_4_5}"_lane*.log")
PYTHONPATH=$PYTHONPATH:benchmarks $python $HERE/lane_log_pairs.py "${LOGS[@]}" \
  --pair shared_dropout_0_2_regulariser_control shared --pair shared_dropout_0_3_regulariser_control shared \
  --pair shared_attention_dropout_0_1_regulariser_control shared "${MATCHED[@]}" > $HERE/${NAME}_five_seeds.md
