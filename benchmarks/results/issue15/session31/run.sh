#!/usr/bin/env bash
# Session 31: what the configuration changes named for issue 15's missed target (mixed-task greedy decoding
# <= 1.15x) would buy: fewer candidates (H' < 2H, which needs the subset strategy: group needs H' a multiple of H)
# and fewer tasks per batch. Each run times the stock model, the wide stock model (reading H'/H times the stock
# q/k/v rows) and head selection on the mixed-task batch, every component selecting, 1 thread. Resumable, from the
# repository root, alone on the host.
source benchmarks/results/issue15/session31/common.sh
floor() { python benchmarks/read_floor_ab.py --threads 1 --repeats 30 "$@"; }
step floor_marian_group_h8_4tasks floor --family marian
step floor_marian_subset_h8_4tasks floor --family marian --strategy subset
step floor_marian_subset_h6_4tasks floor --family marian --strategy subset --total-heads 6
step floor_marian_subset_h5_4tasks floor --family marian --strategy subset --total-heads 5
step floor_marian_group_h8_2tasks floor --family marian --tasks 2
step floor_speech_to_text_subset_h6_4tasks floor --family speech_to_text --strategy subset --total-heads 6
step overhead_marian_subset_h6_all_1thread python benchmarks/overhead.py --family marian --components all \
    --strategy subset --total-heads 6 --threads 1 --repeats 20 --json "$out/overhead_marian_subset_h6_all_1thread.json"
echo "$(date -u +%T) done"
