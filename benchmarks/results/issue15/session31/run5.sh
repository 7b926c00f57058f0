#!/usr/bin/env bash
# Session 31: at two threads the whole table at subset H' = 6 missed on full passes (mixed eval forward 1.20, mixed
# training step 1.25, where the all-candidates reference read 1.19 and 1.15). The full-pass projections side by side
# at two threads, issue 15's configuration. Resumable, from the repository root, alone on the host.
source benchmarks/results/issue15/session31/common.sh
modes() { python benchmarks/projection_ab.py --threads 2 --modes grouped gathered batched "$@"; }
step projection_marian_group_h8_train_2threads modes --family marian --measurement "train step" --repeats 20
step projection_marian_group_h8_eval_2threads modes --family marian --measurement "eval forward" --repeats 30
echo "$(date -u +%T) done"
step projection_speech_to_text_group_h8_eval_2threads modes --family speech_to_text --measurement "eval forward" \
    --repeats 30
step projection_marian_group_h8_eval_1thread python benchmarks/projection_ab.py --threads 1 \
    --modes grouped gathered batched --family marian --measurement "eval forward" --repeats 30
echo "$(date -u +%T) done"
