#!/usr/bin/env bash
# Session 27: q/k/v projections that are not plain nn.Linear project through their modules; every layer call now
# checks the projection types. Timed against the revision before (8a4b7c1). Run alone, about 10 min.
set -euo pipefail
cd "$(dirname "$0")/../../.." && source .venv/bin/activate && export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/projection_modules; mkdir -p $out
python benchmarks/revision_ab.py --rev 8a4b7c1 --family marian --measurement "generate greedy" > $out/marian_greedy.txt 2>&1
python benchmarks/revision_ab.py --rev 8a4b7c1 --family marian --measurement "generate greedy" --mixed > $out/marian_greedy_mixed.txt 2>&1
python benchmarks/revision_ab.py --rev 8a4b7c1 --family marian --measurement "train step" --mixed --repeats 20 > $out/marian_train_mixed.txt 2>&1
