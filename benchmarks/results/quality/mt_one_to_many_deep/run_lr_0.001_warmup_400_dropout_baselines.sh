#!/bin/bash
# Session 72: the depth regulariser controls for the adapters of as many parameters and the paper's Group
# (lr_0.001_warmup_400_dropout_baselines.yaml: both and Shared at dropout 0.1, 0.2 and 0.3; seeds 1-3) into
# outputs/benchmark/mt_one_to_many_deep_dropout_baselines; alone, two lanes of one thread, resumable (a finished run is
# skipped); the time in runs.txt beside this script. Then the runner's tables (${NAME}_results.md), every system minus
# Shared at 0.1, paired by seed (_paired_with_shared.md), each system minus Shared at its own dropout setting
# (_matched.md), the same with every run scored again without label smoothing (plain_test_loss.py:
# _plain_matched.md, the training examples' plain loss beside the test loss), and collapse.py's table (_collapse.md).
# Session 73: `run_lr_0.001_warmup_400_dropout_baselines.sh seeds_4_5` runs the file's seeds 4-5
# (${NAME}_seeds_4_5.yaml, its own output folder; every table above named ${NAME}_seeds_4_5_*.md), then pairs seeds
# 1-5 from every lane log of the file (lane_log_pairs.py: ${NAME}_five_seeds.md), each pair of one session.
# `... attention_dropout` runs the three systems with attention dropout 0.1 (${NAME}_attention_dropout.yaml, seeds 1-5,
# its own output folder), its tables paired with Shared with attention dropout.
source "$(dirname "$0")/record.sh"
NAME=lr_0.001_warmup_400_dropout_baselines
OUT=outputs/benchmark/mt_one_to_many_deep_dropout_baselines
PART=$NAME  # the YAML this part runs and its tables' names: the file's own, or a part with its own YAML
if [ -f "$HERE/${NAME}_$1.yaml" ]; then PART=${NAME}_$1 OUT=${OUT}_$1; fi
ADAPTERS=adapters_as_many_parameters_as_group
DROPOUT=(--pair ${ADAPTERS}_trained_with_the_model_ablation shared --pair group shared)
for rate in 0_2 0_3; do
  DROPOUT+=(--pair ${ADAPTERS}_dropout_${rate}_regulariser_control shared_dropout_${rate}_regulariser_control
            --pair group_dropout_${rate}_regulariser_control shared_dropout_${rate}_regulariser_control)
done
ATTENTION=shared_attention_dropout_0_1_regulariser_control
ATTENTION_PAIRS=(--pair ${ADAPTERS}_attention_dropout_0_1_regulariser_control $ATTENTION
                 --pair group_attention_dropout_0_1_regulariser_control $ATTENTION)
REFERENCE=shared MATCHED=("${DROPOUT[@]}")
if [ "$1" = attention_dropout ]; then REFERENCE=$ATTENTION MATCHED=("${ATTENTION_PAIRS[@]}"); fi
experiment_in_two_lanes "run_$NAME.sh${1:+ $1}" $OUT/lane1.log $HERE/$NAME${1:+_$1} $HERE/$PART.yaml
cp $OUT/results.md $HERE/${PART}_results.md
$python benchmarks/quality_tables.py $OUT --paired_with $REFERENCE > $HERE/${PART}_paired_with_shared.md
$python benchmarks/quality_tables.py $OUT "${MATCHED[@]}" > $HERE/${PART}_matched.md
plain_test_losses "run_$NAME.sh${1:+ $1}: plain test loss" $OUT
$python benchmarks/quality_tables.py ${OUT}_plain --train_loss "${MATCHED[@]}" > $HERE/${PART}_plain_matched.md
collapse_table $OUT > $HERE/${PART}_collapse.md
# every seed of the file, from the lane logs: each system minus Shared at its own dropout setting
PYTHONPATH=$PYTHONPATH:benchmarks $python $HERE/lane_log_pairs.py "$HERE/${NAME}*_lane*.log" \
  "${DROPOUT[@]}" "${ATTENTION_PAIRS[@]}" \
  > $HERE/${NAME}_five_seeds.md
