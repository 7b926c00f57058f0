#!/usr/bin/env bash
# Session 31, after "auto" takes batched for evaluation full passes of equal tasks: the change against 8b64cb5 in
# one process, issue 15's configuration. Resumable, from the repository root, alone on the host.
source benchmarks/results/issue15/session31/common.sh
ab() { python benchmarks/revision_ab.py --rev 8b64cb5 --family "$@"; }
step eval_batched_marian_eval_mixed_1thread_vs_8b64cb5 ab marian --measurement "eval forward" --mixed --repeats 30
step eval_batched_marian_eval_mixed_2threads_vs_8b64cb5 ab marian --measurement "eval forward" --mixed --threads 2 \
    --repeats 30
step eval_batched_speech_to_text_eval_mixed_1thread_vs_8b64cb5 ab speech_to_text --measurement "eval forward" \
    --mixed --repeats 30
step eval_batched_marian_greedy_mixed_1thread_vs_8b64cb5 ab marian --measurement "generate greedy" --mixed \
    --repeats 30
echo "$(date -u +%T) done"
