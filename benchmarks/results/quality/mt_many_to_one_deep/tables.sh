#!/bin/bash
# The tables of the many-to-one depth experiment (session 60) from outputs/benchmark/mt_many_to_one_deep/: the
# runner's results, test cross-entropy / chrF / unusable outputs (alone and paired with the shared model, with Group
# without the noise and with its frozen selection), the paired differences with the shared model as a figure
# (against_shared.png, with one-to-many's systems and labels: record.sh's DEPTH_FIGURE_SYSTEMS), how far each selection
# moved, every run's training-loss curve, collapse.py's table (does a decoder hold one vector at every position?)
# and the lane logs without progress bars.
# The environment and helpers are the depth experiment's (../mt_one_to_many_deep/record.sh). `bash tables.sh PART`
# (session 61: seeds_4_5) copies the lane logs to PART_lane*.log, so an earlier part's copies stay.
source "$(dirname "$0")/../mt_one_to_many_deep/record.sh"
HERE=benchmarks/results/quality/mt_many_to_one_deep
OUT=outputs/benchmark/mt_many_to_one_deep
PREFIX=${1:+$1_}  # a later part keeps its lane logs apart
frozen=group_no_sampling_noise_selection_frozen_ablation
$python training/run_experiment.py $HERE/mt_many_to_one_deep.yaml --tables_only > /dev/null
cp $OUT/results.md $OUT/results.json $HERE/
$python benchmarks/quality_tables.py $OUT > $HERE/supplementary.md
$python benchmarks/quality_tables.py $OUT --paired_with shared > $HERE/paired_with_shared.md
$python benchmarks/quality_tables.py $OUT --paired_with group_no_sampling_noise_ablation \
  > $HERE/paired_with_group_no_noise.md
$python benchmarks/quality_tables.py $OUT --paired_with $frozen > $HERE/paired_with_frozen.md
$python benchmarks/quality_plot.py --reference shared \
  --panel $'MT many-to-one, 6 + 6 layers of d_model 64\n(CPU, 1,000 updates, 5 seeds)' $OUT "${DEPTH_FIGURE_SYSTEMS[@]}" \
  --output $HERE/against_shared.png > $HERE/against_shared.md
$python benchmarks/results/quality/baselines/selection_changes.py $OUT --initial $frozen > $HERE/selection_changes.md
$python benchmarks/recipe_curves.py $OUT --output_dir $HERE
collapse_table $OUT > $HERE/collapse.md
for lane in lane1 lane2; do
  without_progress_bars $OUT/$lane.log $HERE/${PREFIX}$lane.log
done
