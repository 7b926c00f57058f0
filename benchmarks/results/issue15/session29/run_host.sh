#!/usr/bin/env bash
# Session 29: host time per greedy decoding step (host_time_per_step.py), one process per line. From the repository root.
set -euo pipefail
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
script=benchmarks/results/issue15/session29/host_time_per_step.py
for layers in 2 6; do python "$script" --layers $layers --new-tokens 4 16; done
python "$script" --layers 6 --new-tokens 4 16 --mixed
for patch in output_retyped forward_signature no_base_hooks projector_memo; do
    python "$script" --layers 6 --new-tokens 16 --patch $patch
done
python "$script" --layers 6 --new-tokens 16 --patch output_retyped forward_signature no_base_hooks projector_memo
python "$script" --layers 6 --new-tokens 16
