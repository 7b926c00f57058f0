#!/usr/bin/env bash
# Session 27: the projection check also looks for forward hooks and a replaced forward (pruning, recording hooks,
# accelerate), in a loop over q/k/v; TaskRowsLinear moved to task_rows.py. Timed against 11e469f. About 6 min, alone.
set -euo pipefail
cd "$(dirname "$0")/../../.." && source .venv/bin/activate && export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/projection_modules
python benchmarks/revision_ab.py --rev 11e469f --family marian --measurement "generate greedy" > $out/hook_check_marian_greedy.txt 2>&1
python benchmarks/revision_ab.py --rev 11e469f --family marian --measurement "generate greedy" --mixed > $out/hook_check_marian_greedy_mixed.txt 2>&1
