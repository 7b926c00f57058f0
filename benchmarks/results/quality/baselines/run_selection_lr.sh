#!/bin/bash
# Session 25: Group with and without the sampling noise, the selection logits at ten times the model's learning rate,
# added to mt_3000_updates.yaml and asr_600_updates.yaml.
exec "$(dirname "$0")/run_added_systems.sh" selection_lr \
  "Group, selection learning rate x10 (ablation)" \
  "Group, no sampling noise, selection learning rate x10 (ablation)"
