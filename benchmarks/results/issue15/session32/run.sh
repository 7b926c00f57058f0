#!/usr/bin/env bash
# Session 32: the compiled ratios (issue 15, item 3) of the configuration that meets the eager targets, the subset
# strategy at H' = 6 (session 31), every component selecting, 1 thread, torch.compile (inductor). Resumable, from the
# repository root, alone on the host.
source benchmarks/results/issue15/session31/common.sh
out=benchmarks/results/issue15/session32
step compiled_marian_subset_h6_all_1thread python benchmarks/overhead.py --family marian --components all \
    --strategy subset --total-heads 6 --compile --threads 1 --repeats 10 \
    --json "$out/compiled_marian_subset_h6_all_1thread.json"
step compiled_speech_to_text_subset_h6_all_1thread python benchmarks/overhead.py --family speech_to_text \
    --components all --strategy subset --total-heads 6 --compile --threads 1 --repeats 10 \
    --json "$out/compiled_speech_to_text_subset_h6_all_1thread.json"
echo "$(date -u +%T) done"
