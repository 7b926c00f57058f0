#!/bin/bash
# Session 68: asr_1800_updates.yaml (asr.yaml's setup at 1,800 updates; Shared, Group and Group without the noise; seeds
# 1-3) into outputs/benchmark/asr_1800_updates; alone, two lanes of one thread, resumable (a finished run is skipped);
# the time in runs.txt beside this script. Then the runner's tables (asr_1800_updates_results.md), every system minus
# Shared and minus Group, paired by seed (asr_1800_updates_paired_with_{shared,group}.md), and the same with every run
# scored again without label smoothing (plain_test_loss.py, into outputs/benchmark/asr_1800_updates_plain), with the
# training examples' plain loss beside the test loss (asr_1800_updates_plain_paired_with_shared.md); once the adapters
# have run, every system minus them too (asr_1800_updates_paired_with_adapters.md). `asr_1800_updates.sh TAG` names its
# runs.txt entries and lane logs by TAG (`adapters`, `one_selection`, `dropout`: the systems added to the YAML after
# the first runs). Once the regulariser controls have run (session 69), Group minus Shared at each dropout setting both
# ran at, with the smoothed and the plain loss (asr_1800_updates_matched.md, asr_1800_updates_plain_matched.md).
# Session 74: `asr_1800_updates.sh combination` runs asr_1800_updates_combination.yaml (its own output folder: the
# session-68 run folders are not kept): its tables paired with its Shared (smoothed and plain), then, from the lane
# logs (lane_log_pairs.py), both combinations minus Shared and session 68's adapters and paper's Group
# (asr_1800_updates_combination_pairs.md; Shared's reruns must score as session 68's to be read with its lane logs).
# `asr_1800_updates.sh seeds_4_5` runs asr_1800_updates_seeds_4_5.yaml (Shared, the paper's Group, the adapters and
# the paper's Group plus adapters, seeds 4-5), its tables as the combination's, then seeds 1-5 of them paired from
# every lane log of the experiment (asr_1800_updates_five_seeds.md).
# `asr_1800_updates.sh matched_adapters` runs asr_1800_updates_matched_adapters.yaml (adapters as many parameters as
# the paper's Group plus adapters, seeds 1-5, no Shared of its own): its plain scores, and its pairs from every lane log
# (asr_1800_updates_matched_adapters_pairs.md).
# Session 75: `asr_1800_updates.sh attention_dropout_adapters` runs asr_1800_updates_attention_dropout_adapters.yaml
# (the adapters of the combination's size and the paper's Group plus adapters, each with attention dropout 0.1, seeds
# 1-5, no Shared of its own): its plain scores, and its pairs from every lane log
# (asr_1800_updates_attention_dropout_adapters_pairs.md). `asr_1800_updates.sh attention_dropout_group_size_adapters`
# runs asr_1800_updates_attention_dropout_group_size_adapters.yaml (the adapters of Group's size with attention dropout
# 0.1, seeds 1-4), its plain scores and its pairs from every lane log, with session 69's paper's Group and Shared with
# attention dropout (asr_1800_updates_attention_dropout_group_size_adapters_pairs.md).
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
OUT=outputs/benchmark/asr_1800_updates
PART=asr_1800_updates  # the YAML this part runs and its tables' names: the file's own, or a part with its own YAML
if [ -f "$HERE/${PART}_$1.yaml" ]; then PART=${PART}_$1 OUT=${OUT}_$1; fi
speech_inputs asr
experiment_in_two_lanes "asr_1800_updates.sh${1:+ $1}" $OUT/lane1.log.raw $HERE/asr_1800_updates${1:+_$1} \
  $HERE/$PART.yaml
ADAPTERS=adapters_as_many_parameters_as_group_trained_with_the_model_ablation
if [ "$PART" != asr_1800_updates ]; then
  cp $OUT/results.md $HERE/${PART}_results.md
  plain_test_losses "asr_1800_updates.sh $1: plain test loss" $OUT
  if [ -d $OUT/runs/shared ]; then
    $python benchmarks/quality_tables.py $OUT --paired_with shared > $HERE/${PART}_paired_with_shared.md
    $python benchmarks/quality_tables.py ${OUT}_plain --train_loss --paired_with shared \
      > $HERE/${PART}_plain_paired_with_shared.md
  else  # no Shared of its own (matched_adapters, attention_dropout_*): its plain scores alone, its pairs from
        # the lane logs below
    $python benchmarks/quality_tables.py ${OUT}_plain --train_loss > $HERE/${PART}_plain.md
  fi
  COMBINATIONS=(group_no_sampling_noise_plus_adapters_trained_with_the_model_ablation
                group_plus_adapters_trained_with_the_model_ablation)
  MATCHED=adapters_as_many_parameters_as_group_plus_adapters_trained_with_the_model_ablation
  MATCHED_AD=adapters_as_many_parameters_as_group_plus_adapters_attention_dropout_0_1_regulariser_control
  COMBINATION_AD=group_plus_adapters_attention_dropout_0_1_regulariser_control
  ADAPTERS_AD=adapters_as_many_parameters_as_group_attention_dropout_0_1_regulariser_control
  LOGS=("$HERE/asr_1800_updates*_lane*.log")  # every lane log of the experiment, but for the combination's table
  TABLE=$HERE/${PART}_pairs.md
  case "$1" in
    attention_dropout_group_size_adapters)
      PAIRS=(--pair group_attention_dropout_0_1_regulariser_control $ADAPTERS_AD --pair $ADAPTERS_AD $ADAPTERS
             --pair $ADAPTERS_AD shared_attention_dropout_0_1_regulariser_control --pair $ADAPTERS_AD shared
             --pair $MATCHED_AD $ADAPTERS_AD --pair $COMBINATION_AD $ADAPTERS_AD) ;;
    attention_dropout_adapters)
      PAIRS=(--pair ${COMBINATIONS[1]} $MATCHED_AD --pair $MATCHED_AD $MATCHED --pair $COMBINATION_AD $MATCHED_AD
             --pair $COMBINATION_AD ${COMBINATIONS[1]} --pair $MATCHED_AD shared --pair $COMBINATION_AD shared) ;;
    matched_adapters)
      PAIRS=(--pair ${COMBINATIONS[1]} $MATCHED --pair $MATCHED $ADAPTERS --pair $MATCHED shared) ;;
    combination)  # session 68's and its own lane logs (the later parts' did not exist yet)
      LOGS=("$HERE/asr_1800_updates_lane*.log" "$HERE/asr_1800_updates_adapters_lane*.log" "$HERE/${PART}_lane*.log")
      PAIRS=()
      for system in "${COMBINATIONS[@]}"; do
        PAIRS+=(--pair $system shared --pair $system $ADAPTERS --pair $system group)
      done
      PAIRS+=(--pair ${COMBINATIONS[1]} ${COMBINATIONS[0]} --pair $ADAPTERS shared --pair group shared) ;;
    *)  # seeds_4_5: seeds 1-5 from every lane log of the experiment
      TABLE=$HERE/asr_1800_updates_five_seeds.md
      PAIRS=(--pair ${COMBINATIONS[1]} $ADAPTERS --pair ${COMBINATIONS[1]} group --pair group $ADAPTERS
             --pair group shared --pair $ADAPTERS shared --pair ${COMBINATIONS[1]} shared) ;;
  esac
  PYTHONPATH=$PYTHONPATH:benchmarks $python $DEPTH/lane_log_pairs.py "${LOGS[@]}" "${PAIRS[@]}" > $TABLE
  exit
fi
cp $OUT/results.md $HERE/asr_1800_updates_results.md
for reference in shared group; do
  $python benchmarks/quality_tables.py $OUT --paired_with $reference > $HERE/asr_1800_updates_paired_with_$reference.md
done
[ -d $OUT/runs/$ADAPTERS ] && $python benchmarks/quality_tables.py $OUT --paired_with $ADAPTERS \
  > $HERE/asr_1800_updates_paired_with_adapters.md
plain_test_losses "asr_1800_updates.sh${1:+ $1}: plain test loss" $OUT
$python benchmarks/quality_tables.py ${OUT}_plain --train_loss --paired_with shared \
  > $HERE/asr_1800_updates_plain_paired_with_shared.md
# Group minus Shared at each setting both ran at: dropout 0.1 (asr.yaml's), 0.2, 0.3, attention dropout 0.1 on top
MATCHED=(--pair group shared
         --pair group_dropout_0_2_regulariser_control shared_dropout_0_2_regulariser_control
         --pair group_dropout_0_3_regulariser_control shared_dropout_0_3_regulariser_control
         --pair group_attention_dropout_0_1_regulariser_control shared_attention_dropout_0_1_regulariser_control)
if [ -d $OUT/runs/group_attention_dropout_0_1_regulariser_control ]; then
  $python benchmarks/quality_tables.py $OUT "${MATCHED[@]}" > $HERE/asr_1800_updates_matched.md
  $python benchmarks/quality_tables.py ${OUT}_plain --train_loss "${MATCHED[@]}" > $HERE/asr_1800_updates_plain_matched.md
fi
