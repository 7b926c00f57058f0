#!/usr/bin/env bash
# Session 29: is Marian's mixed-task greedy decoding above its read floor now (read_floor_ab 1.065 of the wide
# stock model, against 1.000 in session 17)? The code at 7cdebc7 (session 17's measurement) against this checkout,
# and the floor measured again. Resumable, from the repository root.
set -euo pipefail
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/issue15/session29
step() {
    local name=$1; shift
    [ -s "$out/$name.txt" ] && { echo "skip $name"; return; }
    echo "$(date -u +%T) $name: $*"
    "$@" > "$out/$name.txt.part" 2>&1 && mv "$out/$name.txt.part" "$out/$name.txt"
}
step revision_ab_marian_greedy_mixed_vs_7cdebc7 python benchmarks/revision_ab.py --rev 7cdebc7 --family marian \
    --measurement "generate greedy" --mixed --threads 1 --repeats 30
step read_floor_ab_marian_greedy_run2 python benchmarks/read_floor_ab.py --family marian --threads 1 --repeats 30
echo "$(date -u +%T) done"
