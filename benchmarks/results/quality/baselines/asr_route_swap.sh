#!/bin/bash
# Session 66: misrouting in speech. Does a multilingual ASR model of the main results (asr.yaml: d_model 64, 2 + 2
# layers, 200 updates, both sides keyed by the spoken language) use its own language's heads, and on which side?
# ../mt_one_to_many_deep/route_swap.py on the speech test split (the recipe's own preparation): each side shifted
# alone, then both together. Group, Group without the noise, the adapters of as many parameters and Blackwood et
# al.'s task-specific cross-attention (its encoder routing unread: a control), seeds 1-3, retrained into
# outputs/benchmark/asr_route_swap (asr.yaml's run folders were not kept); alone, two lanes of one thread,
# resumable (a finished run is skipped); times in runs.txt beside this script. Then the retrained runs' scores
# (asr_route_swap_retrained_supplementary.md, beside the recorded asr_supplementary.md) and the misrouting tables
# (asr_route_swap.md).
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/baselines
OUT=outputs/benchmark/asr_route_swap
[ -d data/offline_corpus/speech/asr ] || timed "asr_route_swap.sh: corpus" outputs/asr_route_swap_corpus.log \
  .venv/bin/headsel-build-corpus --output_dir data/offline_corpus --speech
[ -d outputs/benchmark/tokenizers/asr ] || $python benchmarks/benchmark_tokenizers.py --kinds asr
timed "asr_route_swap.sh: retrain" $OUT/route_swap_lane1.log \
  $python training/run_experiment.py $HERE/asr.yaml --output_dir $OUT --lanes 2 \
  --systems "Group" "Group, no sampling noise (ablation)" \
  "Adapters as many parameters as Group, trained with the model (ablation)" "Task-specific cross-attention (target)"
without_progress_bars $OUT/route_swap_lane1.log $HERE/asr_route_swap_lane1.log
without_progress_bars $OUT/lane2.log $HERE/asr_route_swap_lane2.log  # lane 2 logs to the output folder
$python benchmarks/quality_tables.py $OUT > $HERE/asr_route_swap_retrained_supplementary.md
cp $OUT/runs/group/seed1/environment.jsonl $HERE/asr_route_swap_environment.jsonl
misrouting_table $OUT > $HERE/asr_route_swap.md
