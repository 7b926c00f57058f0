#!/usr/bin/env bash
# Session 29: issue 15's CPU figures on the code at this session's start (49ada48), one thread, alone on the host.
# Resumable: a finished output is skipped. Run from the repository root:
#   nohup bash benchmarks/results/issue15/session29/run.sh > benchmarks/results/issue15/session29/run.log 2>&1 &
# OUT=folder writes the outputs there instead (session 44 measured its code so: session44/run.sh).
set -euo pipefail
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=${OUT:-benchmarks/results/issue15/session29}
step() {  # step NAME COMMAND...: runs COMMAND into $out/NAME.txt unless it is there
    local name=$1; shift
    [ -s "$out/$name.txt" ] && { echo "skip $name"; return; }
    echo "$(date -u +%T) $name: $*"
    "$@" > "$out/$name.txt.part" 2>&1 && mv "$out/$name.txt.part" "$out/$name.txt"
}
for family in marian speech_to_text; do
    step "overhead_cpu_${family}_all_1thread_20rounds" python benchmarks/overhead.py --family "$family" \
        --components all --threads 1 --repeats 20 --json "$out/overhead_cpu_${family}_all_1thread_20rounds.json"
done
for family in marian speech_to_text; do
    step "read_floor_ab_${family}_greedy" python benchmarks/read_floor_ab.py --family "$family" --threads 1 --repeats 30
done
echo "$(date -u +%T) done"
