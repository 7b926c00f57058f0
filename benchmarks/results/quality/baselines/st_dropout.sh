#!/bin/bash
# Session 67: st_dropout.yaml (Shared and Group beside the shared model at dropout 0.2 and 0.3 and Group at 0.2; seeds
# 1-3) into outputs/benchmark/st_dropout; alone, two lanes of one thread, resumable (a finished run is skipped); the
# time in runs.txt beside this script. Then the runner's tables (st_dropout_results.md) and every system minus
# Shared and minus Group, paired by seed (st_dropout_paired_with_{shared,group}.md); then every run scored again
# without label smoothing (plain_test_loss.py, into outputs/benchmark/st_dropout_plain) and the same paired tables with
# the plain test cross-entropy (st_dropout_plain_paired_with_{shared,group}.md). `st_dropout.sh TAG` names the entries
# in runs.txt "st_dropout.sh TAG" and its lane logs st_dropout_TAG_lane{1,2}.log (session 68: `dropout_grid`, the
# systems added to st_dropout.yaml then; `seeds_4_5` trains st_dropout_seeds_4_5.yaml instead, seeds 4-5 of four of
# its systems into the same folder, and keeps st_dropout_results.md, the runner's tables of seeds 1-3). Last, Group
# minus Shared at each dropout setting both ran at, with the smoothed and the plain loss (st_dropout_matched.md,
# st_dropout_plain_matched.md; the plain one also gives the training examples' plain loss beside the test loss).
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
OUT=outputs/benchmark/st_dropout
speech_inputs st
EXPERIMENT=$HERE/st_dropout.yaml
[ "$1" = seeds_4_5 ] && EXPERIMENT=$HERE/st_dropout_seeds_4_5.yaml
experiment_in_two_lanes "st_dropout.sh${1:+ $1}" $OUT/lane1.log.raw $HERE/st_dropout${1:+_$1} $EXPERIMENT
[ "$1" = seeds_4_5 ] || cp $OUT/results.md $HERE/st_dropout_results.md
for reference in shared group; do
  $python benchmarks/quality_tables.py $OUT --paired_with $reference > $HERE/st_dropout_paired_with_$reference.md
done
plain_test_losses "st_dropout.sh${1:+ $1}: plain test loss" $OUT
for reference in shared group; do
  $python benchmarks/quality_tables.py ${OUT}_plain --paired_with $reference > $HERE/st_dropout_plain_paired_with_$reference.md
done
# Group minus Shared at each setting both ran at: no dropout, 0.05, 0.1 (st.yaml's), 0.2, 0.3, attention dropout 0.1
MATCHED=(--pair group_no_dropout_regulariser_control shared_no_dropout_regulariser_control
         --pair group_dropout_0_05_regulariser_control shared_dropout_0_05_regulariser_control
         --pair group shared
         --pair group_dropout_0_2_regulariser_control shared_dropout_0_2_regulariser_control
         --pair group_dropout_0_3_regulariser_control shared_dropout_0_3_regulariser_control
         --pair group_attention_dropout_0_1_regulariser_control shared_attention_dropout_0_1_regulariser_control)
$python benchmarks/quality_tables.py $OUT "${MATCHED[@]}" > $HERE/st_dropout_matched.md
$python benchmarks/quality_tables.py ${OUT}_plain --train_loss "${MATCHED[@]}" > $HERE/st_dropout_plain_matched.md
