#!/bin/bash
# The tables of the runs (session 34), as they are in outputs/benchmark/mt_many_to_one{,_3000_updates}/: the
# runner's results, the test cross-entropy / chrF / unusable-output tables paired with the shared model (and with
# group head selection without the noise), how far each head-selection run's selection moved, and the logs without
# their progress-bar lines.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/mt_many_to_one
for budget in "" _3000_updates; do
  out=outputs/benchmark/mt_many_to_one$budget
  [ -d $out ] || continue
  file=training/experiments/benchmark/mt_many_to_one.yaml
  [ -n "$budget" ] && file=$R/mt_many_to_one$budget.yaml
  prefix=${budget#_}${budget:+_}
  headsel-experiment $file --tables_only > /dev/null
  cp $out/results.md $R/${prefix}results.md && cp $out/results.json $R/${prefix}results.json
  python benchmarks/quality_tables.py $out > $R/${prefix}supplementary.md
  python benchmarks/quality_tables.py $out --paired_with shared > $R/${prefix}paired_with_shared.md
  python benchmarks/quality_tables.py $out --paired_with group_no_sampling_noise_ablation \
    > $R/${prefix}paired_with_group_no_noise.md
  python benchmarks/results/quality/baselines/selection_changes.py $out > $R/${prefix}selection_changes.md
  grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" outputs/benchmark/mt_many_to_one${budget}_experiment.log \
    > $R/${prefix}experiment.log
done
python benchmarks/quality_plot.py --reference shared \
  --panel "Many-to-one MT, 1,000 updates" outputs/benchmark/mt_many_to_one \
  --panel "Many-to-one MT, 3,000 updates" outputs/benchmark/mt_many_to_one_3000_updates \
  --system group "Group (the paper's recipe)" --system group_no_sampling_noise_ablation "Group, no noise (ablation)" \
  --system adapters_as_many_parameters_as_group_trained_with_the_model_ablation "Adapters, as many parameters (ablation)" \
  --system subset "Subset" --system task_specific_cross_attention_source "Task-specific cross-attention (source)" \
  --output $R/against_shared.png > $R/against_shared.md
