#!/bin/bash
# Session 24: Group without the noise with its selection frozen at the initial logits, added to mt_3000_updates.yaml
# and asr_600_updates.yaml.
exec "$(dirname "$0")/run_added_systems.sh" frozen "Group, no sampling noise, selection frozen (ablation)"
