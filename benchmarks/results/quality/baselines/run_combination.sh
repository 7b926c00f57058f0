#!/bin/bash
# Session 24: the combination of head selection and adapters added to mt_3000_updates.yaml and asr_600_updates.yaml.
exec "$(dirname "$0")/run_added_systems.sh" combination \
  "Group no sampling noise plus adapters, trained with the model (ablation)"
