#!/usr/bin/env bash
# Session 29: Marian greedy decoding, this checkout against revisions since session 17 (7cdebc7), to find whether and
# where it got slower (the first A/B against 7cdebc7 read 1.025 mixed, 1.019 single-task). Resumable, from the
# repository root:  bash benchmarks/results/issue15/session29/run_bisect.sh mixed|single REV...
set -euo pipefail
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/issue15/session29
batch=$1; shift
flag=(); [ "$batch" = mixed ] && flag=(--mixed)
for rev in "$@"; do
    name=revision_ab_marian_greedy_${batch}_vs_${rev}
    [ -s "$out/$name.txt" ] && { echo "skip $name"; continue; }
    echo "$(date -u +%T) $name"
    python benchmarks/revision_ab.py --rev "$rev" --family marian --measurement "generate greedy" "${flag[@]}" \
        --threads 1 --repeats 30 > "$out/$name.txt.part" 2>&1 && mv "$out/$name.txt.part" "$out/$name.txt"
done
echo "$(date -u +%T) done"
