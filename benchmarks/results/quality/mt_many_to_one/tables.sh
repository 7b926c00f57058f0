#!/bin/bash
# The tables of the runs (session 34), as they are in outputs/benchmark/mt_many_to_one{,_3000_updates}/: the
# runner's results, the test cross-entropy / chrF / unusable-output tables paired with the shared model (and with
# group head selection without the noise), how far each head-selection run's selection moved, and the logs without
# their progress-bar lines.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/mt_many_to_one
# The paired tables of a runs folder: with the shared model, and with group head selection without the noise.
paired_tables() {
  python benchmarks/quality_tables.py $1 --paired_with shared > $R/${2}paired_with_shared.md
  python benchmarks/quality_tables.py $1 --paired_with group_no_sampling_noise_ablation > $R/${2}paired_with_group_no_noise.md
}
# How far each selection moved; with a frozen-selection run in the folder (session 37), how far its logits travelled
# from the frozen run's (the initial ones of the same seed) too.
selection_changes() {
  local frozen=group_no_sampling_noise_selection_frozen_ablation
  python benchmarks/results/quality/baselines/selection_changes.py $1 $([ -d $1/runs/$frozen ] && echo --initial $frozen)
}
# An experiment log without its progress-bar lines.
without_progress_bars() { grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" $1; }
for budget in "" _3000_updates; do
  out=outputs/benchmark/mt_many_to_one$budget
  [ -d $out ] || continue
  file=training/experiments/benchmark/mt_many_to_one.yaml
  [ -n "$budget" ] && file=$R/mt_many_to_one$budget.yaml
  prefix=${budget#_}${budget:+_}
  headsel-experiment $file --tables_only > /dev/null
  cp $out/results.md $R/${prefix}results.md && cp $out/results.json $R/${prefix}results.json
  python benchmarks/quality_tables.py $out > $R/${prefix}supplementary.md
  paired_tables $out $prefix
  selection_changes $out > $R/${prefix}selection_changes.md
  without_progress_bars outputs/benchmark/mt_many_to_one${budget}_experiment.log > $R/${prefix}experiment.log
done
# The plot's 3,000-update panel: seeds 1-3, or every seed run when seeds 4-5 exist (below).
panel_3000=outputs/benchmark/mt_many_to_one_3000_updates panel_seeds=" (seeds 1-3)"
# Sessions 35-37: the 3,000-update systems over seeds 1-5 (seeds 4-5 from their own folder), paired through a folder
# of links to both runs folders.
seeds45=outputs/benchmark/mt_many_to_one_3000_updates_seeds_4_5
if [ -d $seeds45/runs ]; then
  merged=outputs/benchmark/mt_many_to_one_3000_updates_seeds_1_5
  rm -rf $merged
  for system in $(ls outputs/benchmark/mt_many_to_one_3000_updates/runs); do
    mkdir -p $merged/runs/$system
    for run in outputs/benchmark/mt_many_to_one_3000_updates/runs/$system/seed{1,2,3} $seeds45/runs/$system/seed*; do
      [ -d $run ] && ln -s "$PWD/$run" $merged/runs/$system/
    done
  done
  headsel-experiment $R/mt_many_to_one_3000_updates_seeds_4_5.yaml --tables_only > /dev/null
  cp $seeds45/results.md $R/3000_updates_seeds_4_5_results.md
  paired_tables $merged 3000_updates_seeds_1_5_
  selection_changes $seeds45 > $R/3000_updates_seeds_4_5_selection_changes.md
  without_progress_bars ${seeds45}_experiment.log > $R/3000_updates_seeds_4_5_experiment.log
  panel_3000=$merged panel_seeds=" (seeds 1-5)"
fi
python benchmarks/quality_plot.py --reference shared \
  --panel "1,000 updates (seeds 1-3)" outputs/benchmark/mt_many_to_one \
  --panel "3,000 updates$panel_seeds" $panel_3000 \
  --system group "Group (the paper's recipe)" --system group_no_sampling_noise_ablation "Group, no noise (ablation)" \
  --system adapters_as_many_parameters_as_group_trained_with_the_model_ablation "Adapters, as many parameters (ablation)" \
  --system group_no_sampling_noise_selection_frozen_ablation "Group, no noise, selection frozen (ablation)" \
  --system subset "Subset" --system task_specific_cross_attention_source "Task-specific cross-attention (source)" \
  --output $R/against_shared.png > $R/against_shared.md
