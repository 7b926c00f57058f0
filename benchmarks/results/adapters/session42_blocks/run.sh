#!/bin/bash
# Session 42: blocks_ab.py for both families, adapters keyed by direction (with beam search) and by task, as
# ../run.sh ran adapters_ab.py. Run alone on the machine; a finished output is skipped.
cd "$(dirname "$0")/../../../.." || exit 1   # the repository root
export OMP_WAIT_POLICY=PASSIVE PYTHONPATH=benchmarks
HERE=benchmarks/results/adapters/session42_blocks
for key in direction task; do
  for family in marian speech_to_text; do
    out=$HERE/blocks_ab_${family}_by_${key}.txt
    [ -s "$out" ] && continue
    measurements=("eval forward" "generate greedy" "train step")
    [ $key = direction ] && measurements=("eval forward" "generate greedy" "generate beam" "train step")
    .venv/bin/python $HERE/blocks_ab.py --family $family --adapter_key $key --measurements "${measurements[@]}" \
        > "$out.partial" 2> "$HERE/blocks_ab_${family}_by_${key}.log" && mv "$out.partial" "$out"
  done
done
# Added after: the tiny --quick model, where launches and Python bound the time (as on a GPU waiting on the host)
out=$HERE/blocks_ab_quick_marian_by_direction.txt
[ -s "$out" ] || .venv/bin/python $HERE/blocks_ab.py --quick --repeats 30 --measurements "eval forward" "train step" \
    > "$out" 2>/dev/null
