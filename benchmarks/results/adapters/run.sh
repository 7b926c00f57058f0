#!/bin/bash
# Session 26: what serving and training cost with head selection and with adapters of as many parameters, against
# the stock model (benchmarks/adapters_ab.py), both families, adapters keyed by direction then by task. Run alone on
# the machine; a finished output is skipped.
cd "$(dirname "$0")/../.." && source ../.venv/bin/activate || exit 1   # benchmarks/
export OMP_WAIT_POLICY=PASSIVE
for key in direction task; do
  for family in marian speech_to_text; do
    suffix=$([ $key = task ] && echo _keyed_by_task)
    out=results/adapters/adapters_ab_${family}${suffix}_1thread_20rounds.txt
    [ -s "$out" ] && continue
    measurements=("eval forward" "generate greedy" "train step")
    [ $key = direction ] && measurements=("eval forward" "generate greedy" "generate beam" "train step")
    python adapters_ab.py --family $family --repeats 20 --adapter_key $key --measurements "${measurements[@]}" \
        > "$out.partial" 2> "results/adapters/adapters_ab_${family}${suffix}.log" && mv "$out.partial" "$out"
  done
done
