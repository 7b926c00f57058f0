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
[ -d data/offline_corpus/speech/st ] || timed "st_dropout.sh: corpus" outputs/st_dropout_corpus.log \
  .venv/bin/headsel-build-corpus --output_dir data/offline_corpus --speech
[ -d outputs/benchmark/tokenizers/st ] || $python benchmarks/benchmark_tokenizers.py --kinds st
timed "st_dropout.sh" $OUT/lane1.log.raw $python training/run_experiment.py $HERE/st_dropout.yaml --lanes 2
without_progress_bars $OUT/lane1.log.raw $HERE/st_dropout_lane1.log
without_progress_bars $OUT/lane2.log $HERE/st_dropout_lane2.log  # lane 2 logs to the output folder
cp $OUT/results.md $HERE/st_dropout_results.md
for reference in shared group; do
  $python benchmarks/quality_tables.py $OUT --paired_with $reference > $HERE/st_dropout_paired_with_$reference.md
done
timed "st_dropout.sh: plain test loss" outputs/st_dropout_plain.log \
  env PYTHONPATH=$PYTHONPATH:benchmarks $python $HERE/plain_test_loss.py $OUT ${OUT}_plain
for reference in shared group; do
  $python benchmarks/quality_tables.py ${OUT}_plain --paired_with $reference > $HERE/st_dropout_plain_paired_with_$reference.md
done
