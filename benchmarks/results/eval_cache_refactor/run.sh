#!/usr/bin/env bash
# Session 27: the evaluation caches of the attention layers and the adapters moved into one helper
# (src/hf_headsel/eval_cache.py); no behaviour change intended. Timed against the revision before (e633dca) on the
# measurements whose every step reads the cache: greedy decoding, single-task and mixed. Run alone, about 10 min.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/eval_cache_refactor
for family in marian speech_to_text; do
  for mixed in "" "--mixed"; do
    python benchmarks/revision_ab.py --rev e633dca --family $family --measurement "generate greedy" $mixed \
      > "$out/${family}_greedy${mixed:+_mixed}.txt" 2>&1
  done
done
