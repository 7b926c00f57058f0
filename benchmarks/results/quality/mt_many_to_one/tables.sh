#!/bin/bash
# The tables of run.sh's runs (session 34), as they are in outputs/benchmark/mt_many_to_one/: the runner's results,
# the test cross-entropy / chrF / unusable-output tables paired with the shared model (and with group head selection
# without the noise), and how far each head-selection run's selection moved.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/mt_many_to_one
out=outputs/benchmark/mt_many_to_one
headsel-experiment training/experiments/benchmark/mt_many_to_one.yaml --tables_only > /dev/null
cp $out/results.md $R/results.md && cp $out/results.json $R/results.json
python benchmarks/quality_tables.py $out > $R/supplementary.md
python benchmarks/quality_tables.py $out --paired_with shared > $R/paired_with_shared.md
python benchmarks/quality_tables.py $out --paired_with group_no_sampling_noise_ablation > $R/paired_with_group_no_noise.md
python benchmarks/results/quality/baselines/selection_changes.py $out > $R/selection_changes.md
