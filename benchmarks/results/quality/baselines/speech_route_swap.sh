#!/bin/bash
# Session 66: misrouting in speech. `speech_route_swap.sh asr|st`: does a speech model of the main results
# (asr.yaml / st.yaml: d_model 64, 2 + 2 layers, 200 updates; both sides keyed by one task, the spoken language in ASR,
# the domain in ST) use its own task's heads, and on which side? ../mt_one_to_many_deep/route_swap.py on the speech
# test split (the recipe's own preparation): each side shifted alone, then both together. Group, Group without the
# noise, adapters trained with the model (ASR: those of as many parameters as Group; st.yaml has only those of
# bottleneck 32) and Blackwood et al.'s task-specific cross-attention (its encoder routing unread: a control), seeds
# 1-3, retrained into outputs/benchmark/<kind>_route_swap (the files' run folders were not kept); alone, two lanes of
# one thread, resumable (a finished run is skipped); times in runs.txt beside this script. Then the retrained runs'
# scores (<kind>_route_swap_retrained_supplementary.md, beside the recorded <kind>*_supplementary.md) and the
# misrouting tables (<kind>_route_swap.md).
# Session 67: `speech_route_swap.sh asr_600_updates` does the same for asr_600_updates.yaml (three times the updates;
# the file has no task-specific cross-attention), into outputs/benchmark/asr_600_updates_route_swap.
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
KIND=${1:?usage: speech_route_swap.sh asr|st|asr_600_updates}
OUT=outputs/benchmark/${KIND}_route_swap
SYSTEMS=("Group" "Group, no sampling noise (ablation)")
case $KIND in
  asr) SYSTEMS+=("Adapters as many parameters as Group, trained with the model (ablation)"
                 "Task-specific cross-attention (target)") ;;
  st) SYSTEMS+=("Adapters, trained with the model (same budget)" "Task-specific cross-attention (target)") ;;
  asr_600_updates) SYSTEMS+=("Adapters as many parameters as Group, trained with the model (ablation)") ;;
  *) echo "speech_route_swap.sh: asr, st or asr_600_updates, not $KIND" >&2; exit 2 ;;
esac
speech_inputs ${KIND%%_*}  # asr_600_updates reads asr's corpus and tokenizer
experiment_in_two_lanes "speech_route_swap.sh $KIND: retrain" $OUT/route_swap_lane1.log $HERE/${KIND}_route_swap \
  $HERE/$KIND.yaml --output_dir $OUT --systems "${SYSTEMS[@]}"
$python benchmarks/quality_tables.py $OUT > $HERE/${KIND}_route_swap_retrained_supplementary.md
cp $OUT/runs/group/seed1/environment.jsonl $HERE/${KIND}_route_swap_environment.jsonl
misrouting_table $OUT > $HERE/${KIND}_route_swap.md
