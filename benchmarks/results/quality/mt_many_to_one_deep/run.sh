#!/bin/bash
# Session 60: many-to-one MT at depth (mt_many_to_one_deep.yaml beside this script), alone on the 2-core machine in two
# lanes of one thread each (`--lanes 2`; lane 2 logs to the output folder), resumable (a finished run is skipped),
# five systems x seeds 1-3; then its tables (tables.sh). Run times in runs.txt beside this script. The environment and
# the timing are the depth experiment's (../mt_one_to_many_deep/record.sh).
# Session 61: the file now has seeds 1-5; `bash run.sh seeds_4_5` ran seeds 4-5 (the runner skips the finished seeds
# 1-3), kept their lane logs apart (seeds_4_5_lane*.log) and rebuilt every table over the five seeds.
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/mt_many_to_one_deep
export TOKENIZERS_PARALLELISM=false
timed "run.sh $1" outputs/benchmark/mt_many_to_one_deep/lane1.log \
  $python training/run_experiment.py $HERE/mt_many_to_one_deep.yaml --lanes 2
bash $HERE/tables.sh "$1"
