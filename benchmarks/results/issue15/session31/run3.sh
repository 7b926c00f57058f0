#!/usr/bin/env bash
# Session 31, after the change of "auto"'s rule for CPU decoding steps (the cheaper of batched and gathered in
# reads plus arithmetic, attention.cheaper_step_projection): the configurations where it now gathers, timed again,
# and the two projections at 2 threads (the fit was made at one). Resumable, from the repository root, alone.
source benchmarks/results/issue15/session31/common.sh
floor() { python benchmarks/read_floor_ab.py --threads 1 --repeats 30 "$@"; }
modes() { python benchmarks/projection_ab.py --modes gathered batched "$@"; }
step after_floor_marian_subset_h6_4tasks floor --family marian --strategy subset --total-heads 6
step after_floor_speech_to_text_subset_h6_4tasks floor --family speech_to_text --strategy subset --total-heads 6
step after_floor_marian_group_h8_8tasks floor --family marian --tasks 8
step projection_marian_group_h8_4tasks_greedy_2threads modes --family marian --threads 2 --repeats 30
step projection_marian_subset_h6_greedy_2threads modes --family marian --strategy subset --total-heads 6 \
    --threads 2 --repeats 30
step after_overhead_marian_subset_h6_all_1thread python benchmarks/overhead.py --family marian --components all \
    --strategy subset --total-heads 6 --threads 1 --repeats 20 \
    --json "$out/after_overhead_marian_subset_h6_all_1thread.json"
# The single-task greedy row of the table above (1.07; its path is untouched by the change) timed again alone.
step after_overhead_marian_subset_h6_all_1thread_greedy_single python benchmarks/overhead.py --family marian \
    --components all --strategy subset --total-heads 6 --threads 1 --repeats 20 --only "generate greedy, single"
# The change against the revision before it (2e85361), in one process, at H' = 6: single-task greedy (untouched
# path) and mixed-task greedy (now gathered).
ab() { python benchmarks/revision_ab.py --rev 2e85361 --family marian --strategy subset --total-heads 6 --repeats 30 "$@"; }
step revision_ab_marian_subset_h6_greedy_single_vs_2e85361 ab --measurement "generate greedy"
step revision_ab_marian_subset_h6_greedy_mixed_vs_2e85361 ab --measurement "generate greedy" --mixed
# Both again (host drift between runs: EFFICIENCY.md, session 29).
step revision_ab_marian_subset_h6_greedy_single_vs_2e85361_run2 ab --measurement "generate greedy"
step revision_ab_marian_subset_h6_greedy_mixed_vs_2e85361_run2 ab --measurement "generate greedy" --mixed
step after_floor_marian_subset_h5_4tasks floor --family marian --strategy subset --total-heads 5
echo "$(date -u +%T) done"
