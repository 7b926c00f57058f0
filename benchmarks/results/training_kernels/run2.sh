#!/usr/bin/env bash
# Session 28, after run.sh: the first variant skipped the subtraction for every part starting at q, leaving a mixed
# batch's q rows of the cross-attention non-contiguous (copied by every flatten after: 12 kernels more with all
# components, marian_train_mixed_first_variant.txt). The final code makes them contiguous once. Single-task rows are
# contiguous either way, so run.sh's single-task timings hold for it. Kernel counts and mixed-task timings again.
# Run alone, about 8 min.
set -euo pipefail
cd "$(dirname "$0")/../../.." && source .venv/bin/activate && export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/training_kernels
python benchmarks/op_count.py > $out/op_count_paper.md 2>/dev/null
python benchmarks/op_count.py --components all > $out/op_count_all.md 2>/dev/null
python benchmarks/revision_ab.py --rev 9df2b29 --measurement "train step" --mixed --repeats 20 > $out/marian_train_mixed.txt 2>&1
python benchmarks/revision_ab.py --rev 9df2b29 --measurement "train step" --mixed --quick --repeats 60 > $out/marian_train_mixed_quick.txt 2>&1
echo done
