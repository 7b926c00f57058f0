#!/bin/bash
# Session 42's second GPU call (device run right after the first, carry [".whl", "data/offline_corpus/mt"]):
# `bash benchmarks/results/gpu_2026-11-28_s42/call2.sh LANE_SECONDS`. Three lanes of
# training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_diagnosis.yaml's Group without the noise with its
# selection frozen (seeds 1-3), each stopped after LANE_SECONDS; the training losses they log at 500 and 1,000 updates
# compare with the learned no-noise runs' (session 38's diagnosis lanes and this session's first call). The lane logs
# are written straight into $OUT, so they come back even if the call's time runs out.
source benchmarks/results/gpu_2026-11-26/setup.sh s42_frozen_no_noise
export PYTHONPATH=$PYTHONPATH:$PWD/training
EXPERIMENT=training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_diagnosis.yaml
for lane in 1 2 3; do
  OMP_NUM_THREADS=4 timeout "${1:-200}" python3 training/run_experiment.py "$EXPERIMENT" \
    --systems "Group, no sampling noise, selection frozen (ablation)" >"$OUT/frozen_no_noise_lane$lane.txt" 2>&1 &
  sleep 2  # claims in plan order: seeds 1-3
done
wait
echo "== lanes done $(date +%T)"
grep -Ho "{'loss': '[0-9.]*'" "$OUT"/frozen_no_noise_lane*.txt
