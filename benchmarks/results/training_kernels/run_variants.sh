#!/usr/bin/env bash
# Session 28: single_task_training_variants.py in both configurations. Run alone, about 5 min. (The outputs were
# made by the script before a refactor with no behaviour change; single_task_variants_quick_rerun.txt is the
# committed script's quick run.)
set -euo pipefail
cd "$(dirname "$0")/../../.." && source .venv/bin/activate && export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/training_kernels
python $out/single_task_training_variants.py quick > $out/single_task_variants_quick.txt 2>&1
python $out/single_task_training_variants.py standard > $out/single_task_variants_standard.txt 2>&1
echo done
