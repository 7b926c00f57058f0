#!/usr/bin/env bash
# Session 28: two kernels fewer per selecting layer in a single-task training step (no offset subtraction for a part
# starting at q; one task's weight and bias gradients not stacked by a copy). Kernel counts after the change, then
# CPU timings against the revision before (9df2b29). Run alone, about 12 min.
set -euo pipefail
cd "$(dirname "$0")/../../.." && source .venv/bin/activate && export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/training_kernels
python benchmarks/op_count.py > $out/op_count_paper.md 2>/dev/null
python benchmarks/op_count.py --components all > $out/op_count_all.md 2>/dev/null
python benchmarks/revision_ab.py --rev 9df2b29 --measurement "train step" --repeats 20 > $out/marian_train_single.txt 2>&1
python benchmarks/revision_ab.py --rev 9df2b29 --measurement "train step" --quick --repeats 60 > $out/marian_train_single_quick.txt 2>&1
python benchmarks/revision_ab.py --rev 9df2b29 --measurement "train step" --mixed --repeats 20 > $out/marian_train_mixed.txt 2>&1
echo done
