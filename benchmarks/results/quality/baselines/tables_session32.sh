#!/bin/bash
# Session 32's supplementary tables with the new last column, the share of empty or looping hypotheses
# (`headsel_recipes.metrics.is_unusable`), for the recorded CPU benchmarks (the runs of asr.yaml, mt.yaml, st.yaml and
# their 600 / 3000-update versions, as they are in outputs/benchmark/ on the machine that trained them); nothing retrained.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/baselines
for folder in asr_noise mt_why st_noise asr_600_updates mt_3000_updates; do
  [ -d outputs/benchmark/$folder ] && python benchmarks/quality_tables.py outputs/benchmark/$folder
done > $R/session32_unusable.md
