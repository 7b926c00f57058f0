#!/usr/bin/env bash
# Session 31, last: the whole overhead.py table at subset H' = 6 for Speech2Text (one thread), and for Marian at two
# threads (the issue's own figures were taken at two). Resumable, from the repository root, alone on the host.
source benchmarks/results/issue15/session31/common.sh
step after_overhead_speech_to_text_subset_h6_all_1thread python benchmarks/overhead.py --family speech_to_text \
    --components all --strategy subset --total-heads 6 --threads 1 --repeats 20 \
    --json "$out/after_overhead_speech_to_text_subset_h6_all_1thread.json"
step after_overhead_marian_subset_h6_all_2threads python benchmarks/overhead.py --family marian --components all \
    --strategy subset --total-heads 6 --threads 2 --repeats 20 \
    --json "$out/after_overhead_marian_subset_h6_all_2threads.json"
echo "$(date -u +%T) done"
