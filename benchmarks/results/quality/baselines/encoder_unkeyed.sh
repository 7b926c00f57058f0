#!/bin/bash
# Session 67: `encoder_unkeyed.sh asr|st [TAG "SYSTEM" ...]`: does head selection's speech gain need its encoder
# routed by the task, or per-task heads at all? <kind>_encoder_unkeyed.yaml (the setup of <kind>.yaml; Shared, Group
# and Subset (ST) as there, each beside the same system with the encoder keyed by no task, then with both sides keyed
# by no task; seeds 1-3) into outputs/benchmark/<kind>_encoder_unkeyed; alone, two lanes of one thread, resumable (a
# finished run is skipped); times in runs.txt beside this script. SYSTEMs given: only those are trained, their logs
# named by TAG (the systems added after the first runs: `one_selection`). Then the tables: the runner's
# (<kind>_encoder_unkeyed_results.md) and every system minus each system routed on both sides, paired by seed
# (<kind>_encoder_unkeyed_paired_with_<run folder>.md: Shared, Group, Group without the noise, and Subset in ST);
# then every run scored again without label smoothing (plain_test_loss.py, into <OUT>_plain) and every system minus
# Shared with that plain cross-entropy (<kind>_encoder_unkeyed_plain_paired_with_shared.md).
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
KIND=${1:?usage: encoder_unkeyed.sh asr|st [TAG "SYSTEM" ...]}
TAG=${2:+_$2}
SYSTEMS=("${@:3}")
case $KIND in asr|st) ;; *) echo "encoder_unkeyed.sh: asr or st, not $KIND" >&2; exit 2 ;; esac
OUT=outputs/benchmark/${KIND}_encoder_unkeyed
speech_inputs $KIND
experiment_in_two_lanes "encoder_unkeyed.sh $*" $OUT/lane1$TAG.log.raw $HERE/${KIND}_encoder_unkeyed$TAG \
  $HERE/${KIND}_encoder_unkeyed.yaml ${SYSTEMS[@]:+--systems "${SYSTEMS[@]}"}
cp $OUT/results.md $HERE/${KIND}_encoder_unkeyed_results.md
cp $OUT/runs/group_encoder_keyed_by_no_task_ablation/seed1/environment.jsonl $HERE/${KIND}_encoder_unkeyed_environment.jsonl
for reference in $(ls $OUT/runs | grep -v -e keyed_by_no_task -e one_selection_for_every_task); do
  $python benchmarks/quality_tables.py $OUT --paired_with $reference > $HERE/${KIND}_encoder_unkeyed_paired_with_$reference.md
done
plain_test_losses "plain test loss of ${KIND}_encoder_unkeyed (plain_test_loss.py)" $OUT
$python benchmarks/quality_tables.py ${OUT}_plain --paired_with shared > $HERE/${KIND}_encoder_unkeyed_plain_paired_with_shared.md
