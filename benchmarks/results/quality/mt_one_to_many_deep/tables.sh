#!/bin/bash
# The tables of the depth experiment (session 38) from outputs/benchmark/mt_one_to_many_deep/: the runner's results,
# test cross-entropy / chrF / unusable outputs (alone and paired with the shared model and with Group without the
# noise), how far each selection moved, every run's training-loss curve (recipe_curves.py), the parameter counts and
# the logs without their progress-bar lines.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/mt_one_to_many_deep
out=outputs/benchmark/mt_one_to_many_deep
file=training/experiments/benchmark/mt_one_to_many_deep.yaml
headsel-experiment $file --tables_only > /dev/null
cp $out/results.md $out/results.json $R/
python benchmarks/quality_tables.py $out > $R/supplementary.md
python benchmarks/quality_tables.py $out --paired_with shared > $R/paired_with_shared.md
python benchmarks/quality_tables.py $out --paired_with group_no_sampling_noise_ablation > $R/paired_with_group_no_noise.md
python benchmarks/results/quality/baselines/selection_changes.py $out > $R/selection_changes.md
python benchmarks/recipe_curves.py $out --output_dir $R
python benchmarks/results/quality/baselines/param_match.py $file --match Group > $R/param_match.md
# run.sh logs lane 1 beside this script; the raw logs stay under outputs/, their copies here lose the progress bars
[ -f $R/experiment.log ] && mv $R/experiment.log $out/lane1.log
for lane in lane1 lane2; do
  grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<" $out/$lane.log > $R/$lane.log
done
