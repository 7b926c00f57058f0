#!/usr/bin/env bash
# Session 31, after run.sh: head selection at H' = 6 cost 1.21x the stock model where the wide stock model reading
# its rows costs 1.05x. Which projection a decoding step takes there (auto: batched, which reads each task's rows,
# as many bytes whatever H'), with more tasks than H'/H, and what a batch ordered by task would save.
# Resumable, from the repository root, alone on the host.
source benchmarks/results/issue15/session31/common.sh
modes() { python benchmarks/projection_ab.py --threads 1 --modes gathered batched "$@"; }
step projection_marian_subset_h6_greedy modes --family marian --strategy subset --total-heads 6 --repeats 30
step projection_marian_subset_h6_beam modes --family marian --strategy subset --total-heads 6 --repeats 20 \
    --measurement "generate beam"
step projection_marian_group_h8_8tasks_greedy modes --family marian --tasks 8 --repeats 30
step projection_marian_group_h8_4tasks_greedy modes --family marian --repeats 30
step sorted_batch_marian_greedy env PYTHONPATH=benchmarks python "$out/sorted_batch_ab.py" --family marian \
    --repeats 30
echo "$(date -u +%T) done"
