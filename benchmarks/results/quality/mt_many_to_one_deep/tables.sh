#!/bin/bash
# The tables of the many-to-one depth experiment (session 60) from outputs/benchmark/mt_many_to_one_deep/: the
# runner's results, test cross-entropy / chrF / unusable outputs (alone and paired with the shared model, with Group
# without the noise and with its frozen selection), how far each selection moved, every run's training-loss curve,
# collapse.py's table (does a decoder hold one vector at every position?) and the lane logs without progress bars.
cd "$(dirname "$0")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_many_to_one_deep
OUT=outputs/benchmark/mt_many_to_one_deep
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 PYTHONPATH=src:training
headsel-experiment $HERE/mt_many_to_one_deep.yaml --tables_only > /dev/null
cp $OUT/results.md $OUT/results.json $HERE/
python benchmarks/quality_tables.py $OUT > $HERE/supplementary.md
python benchmarks/quality_tables.py $OUT --paired_with shared > $HERE/paired_with_shared.md
python benchmarks/quality_tables.py $OUT --paired_with group_no_sampling_noise_ablation > $HERE/paired_with_group_no_noise.md
python benchmarks/quality_tables.py $OUT --paired_with group_no_sampling_noise_selection_frozen_ablation \
  > $HERE/paired_with_frozen.md
frozen=group_no_sampling_noise_selection_frozen_ablation
python benchmarks/results/quality/baselines/selection_changes.py $OUT --initial $frozen > $HERE/selection_changes.md
python benchmarks/recipe_curves.py $OUT --output_dir $HERE
python benchmarks/results/quality/mt_one_to_many_deep/collapse.py $OUT 2>/dev/null | grep '^|' > $HERE/collapse.md
for lane in lane1 lane2; do
  tr '\r' '\n' < $OUT/$lane.log | grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<|^\s*$" > $HERE/$lane.log
done
