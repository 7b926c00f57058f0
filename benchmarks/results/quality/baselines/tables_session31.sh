#!/bin/bash
# Session 31's tables, after run_session31.sh: every system of asr.yaml / mt.yaml on this machine minus Shared,
# Subset (H' = 8), Subset without the noise and Group without the noise, paired by seed
# ({asr,mt}_session31_paired.md; quality_tables.py).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/baselines
for e in asr:asr_noise mt:mt_why; do
  name=${e%%:*}; folder=outputs/benchmark/${e#*:}
  for reference in shared subset subset_no_sampling_noise_ablation group_no_sampling_noise_ablation; do
    python benchmarks/quality_tables.py "$folder" --paired_with "$reference"
  done > $R/${name}_session31_paired.md
done
