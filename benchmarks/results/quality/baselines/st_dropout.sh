#!/bin/bash
# Session 67: st_dropout.yaml (Shared and Group beside the shared model at dropout 0.2 and 0.3 and Group at 0.2; seeds
# 1-3) into outputs/benchmark/st_dropout; alone, two lanes of one thread, resumable (a finished run is skipped); the
# time in runs.txt beside this script. Then the runner's tables (st_dropout_results.md) and every system minus
# Shared and minus Group, paired by seed (st_dropout_paired_with_{shared,group}.md); then every run scored again
# without label smoothing (plain_test_loss.py, into outputs/benchmark/st_dropout_plain) and the same paired tables with
# the plain test cross-entropy (st_dropout_plain_paired_with_{shared,group}.md).
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
OUT=outputs/benchmark/st_dropout
speech_inputs st
experiment_in_two_lanes "st_dropout.sh" $OUT/lane1.log.raw $HERE/st_dropout $HERE/st_dropout.yaml
cp $OUT/results.md $HERE/st_dropout_results.md
for reference in shared group; do
  $python benchmarks/quality_tables.py $OUT --paired_with $reference > $HERE/st_dropout_paired_with_$reference.md
done
plain_test_losses "st_dropout.sh: plain test loss" $OUT
for reference in shared group; do
  $python benchmarks/quality_tables.py ${OUT}_plain --paired_with $reference > $HERE/st_dropout_plain_paired_with_$reference.md
done
