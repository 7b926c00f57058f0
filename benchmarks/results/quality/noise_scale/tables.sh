#!/bin/bash
# The tables of run.sh's runs (session 33), as they are in outputs/benchmark/noise_scale_{asr,st,mt}/: the runner's
# results, the test cross-entropy / character-score / unusable-output tables paired with the shared model, and
# whether the systems trained again (Shared, Group, Group without the noise) reproduce their recorded scores.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
R=benchmarks/results/quality/noise_scale
declare -A RECORDED=([asr]=benchmarks/results/quality/baselines/asr_results.json
                     [st]=benchmarks/results/quality/st_noise/results.json
                     [mt]=benchmarks/results/quality/baselines/mt_results.json)
for task in asr st mt; do
  out=outputs/benchmark/noise_scale_$task
  [ -d $out ] || continue
  headsel-experiment $R/$task.yaml --tables_only > /dev/null
  cp $out/results.md $R/${task}_results.md && cp $out/results.json $R/${task}_results.json
  python benchmarks/quality_tables.py $out --paired_with shared > $R/${task}_paired.md
  python benchmarks/results/quality/baselines/reproduce_check.py $R/$task.yaml ${RECORDED[$task]} \
    > $R/${task}_reproduced.txt
done
python $R/mechanism_by_scale.py > /dev/null
python benchmarks/quality_plot.py --reference shared \
  --panel "ASR, 200 updates" outputs/benchmark/noise_scale_asr \
  --panel "ST, 200 updates" outputs/benchmark/noise_scale_st \
  --panel "MT, 1,000 updates" outputs/benchmark/noise_scale_mt \
  --system group "Group, noise scale 1 (the paper)" --system group_noise_scale_0_5_ablation "Group, noise scale 0.5" \
  --system group_noise_scale_0_25_ablation "Group, noise scale 0.25" \
  --system group_no_sampling_noise_ablation "Group, no noise (0)" \
  --output $R/noise_scale_against_shared.png > $R/noise_scale_against_shared.md
