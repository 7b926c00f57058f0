#!/bin/bash
# Session 72: the depth regulariser controls for the adapters of as many parameters and the paper's Group
# (lr_0.001_warmup_400_dropout_baselines.yaml: both and Shared at dropout 0.1, 0.2 and 0.3; seeds 1-3) into
# outputs/benchmark/mt_one_to_many_deep_dropout_baselines; alone, two lanes of one thread, resumable (a finished run is
# skipped); the time in runs.txt beside this script. Then the runner's tables (${NAME}_results.md), every system minus
# Shared at 0.1, paired by seed (_paired_with_shared.md), each system minus Shared at its own dropout setting
# (_matched.md), the same with every run scored again without label smoothing (plain_test_loss.py:
# _plain_matched.md, the training examples' plain loss beside the test loss), and collapse.py's table (_collapse.md).
source "$(dirname "$0")/record.sh"
NAME=lr_0.001_warmup_400_dropout_baselines
OUT=outputs/benchmark/mt_one_to_many_deep_dropout_baselines
ADAPTERS=adapters_as_many_parameters_as_group
experiment_in_two_lanes "run_$NAME.sh" $OUT/lane1.log $HERE/$NAME $HERE/$NAME.yaml
cp $OUT/results.md $HERE/${NAME}_results.md
$python benchmarks/quality_tables.py $OUT --paired_with shared > $HERE/${NAME}_paired_with_shared.md
MATCHED=(--pair ${ADAPTERS}_trained_with_the_model_ablation shared --pair group shared)
for rate in 0_2 0_3; do
  MATCHED+=(--pair ${ADAPTERS}_dropout_${rate}_regulariser_control shared_dropout_${rate}_regulariser_control
            --pair group_dropout_${rate}_regulariser_control shared_dropout_${rate}_regulariser_control)
done
$python benchmarks/quality_tables.py $OUT "${MATCHED[@]}" > $HERE/${NAME}_matched.md
plain_test_losses "run_$NAME.sh: plain test loss" $OUT
$python benchmarks/quality_tables.py ${OUT}_plain --train_loss "${MATCHED[@]}" > $HERE/${NAME}_plain_matched.md
collapse_table $OUT > $HERE/${NAME}_collapse.md
