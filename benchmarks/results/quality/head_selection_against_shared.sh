#!/bin/bash
# The README's quality figure (head_selection_against_shared.png) and its table (head_selection_against_shared.md):
# test cross-entropy minus the shared model's, paired by seed, d_model 64, 2 + 2 layers, seeds 1-3. Read from the
# experiments' tracked logs (their run folders are not kept), so it needs no training. Each panel's logs are the runs
# its table pairs: at 200 / 1,000 updates the runs of baselines/{asr,mt}.yaml as trained again in session 22 and, for
# Group, session 24 (the runs in outputs/benchmark/{asr_noise,mt_why} when the figure was first drawn, session 24); at
# 600 / 3,000 updates {asr_600,mt_3000}_updates.yaml's; at 1,800 updates asr_1800_updates.yaml's and
# asr_1800_updates_combination.yaml's (Shared trained in both sessions, 68 and 74, with the same scores: read once).
source "$(dirname "$0")/mt_one_to_many_deep/record.sh"  # the repository root, python
LOGS=benchmarks/results/quality/baselines
FIGURE=benchmarks/results/quality/head_selection_against_shared
{
  echo "The README's quality figure (\`head_selection_against_shared.png\`) and this table, made by"
  echo "\`bash $FIGURE.sh\` from the tracked logs of the experiments in"
  echo "\`baselines/\` (the script names which; the losses as the logs print them, rounded to four decimals)."
  echo
  PYTHONPATH=benchmarks:training $python benchmarks/quality_plot.py --reference shared \
    --panel_logs "ASR, 200 updates" $LOGS/asr_session22_experiment.log $LOGS/asr_session24_group_again_experiment.log \
    --panel_logs "ASR, 600 updates" $LOGS/asr_600_updates_experiment.log \
      $LOGS/asr_600_updates_combination_experiment.log \
    --panel_logs "ASR, 1,800 updates" "$LOGS/asr_1800_updates_lane*.log" "$LOGS/asr_1800_updates_adapters_lane*.log" \
      "$LOGS/asr_1800_updates_combination_lane*.log" \
    --panel_logs "MT, 1,000 updates" $LOGS/mt_session22_experiment.log $LOGS/mt_session24_group_again_experiment.log \
    --panel_logs "MT, 3,000 updates" $LOGS/mt_3000_updates_experiment.log \
      $LOGS/mt_3000_updates_combination_experiment.log \
    --system group "Group head selection (the paper's recipe)" \
    --system group_no_sampling_noise_ablation "Group, no sampling noise (ablation)" \
    --system adapters_as_many_parameters_as_group_trained_with_the_model_ablation \
      "Adapters, as many parameters as Group (ablation)" \
    --system group_no_sampling_noise_plus_adapters_trained_with_the_model_ablation \
      "Group without the noise plus adapters (ablation)" \
    --system group_plus_adapters_trained_with_the_model_ablation "Group plus adapters (ablation)" \
    --output $FIGURE.png | grep -v '^wrote '
} > $FIGURE.md
