#!/bin/bash
# Session 38's second GPU call (device run, carry [".whl", "data/offline_corpus/mt"], timeout_s 280): six lanes of
# training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_diagnosis.yaml (Group without the noise, seeds 1-3;
# Group frozen, seeds 1-3), each stopped after 225 s (about 1,100 updates); their logged training losses come back in
# the lane logs ($OUT/s38_diagnosis.tgz).
source benchmarks/results/gpu_2026-11-26/setup.sh s38_diagnosis
export PYTHONPATH=$PYTHONPATH:$PWD/training
EXPERIMENT=training/experiments/benchmark_gpu/mt_one_to_many_2000_updates_diagnosis.yaml
for lane in 1 2 3 4 5 6; do
  OMP_NUM_THREADS=2 timeout 225 python3 training/run_experiment.py "$EXPERIMENT" >"$RES/lane$lane.txt" 2>&1 &
  sleep 2  # claims in plan order: no noise seeds 1-3, frozen seeds 1-3
done
wait
echo "== lanes done $(date +%T)"
tar czf "$OUT/s38_diagnosis.tgz" -C "$RES" .
grep -Ho "{'loss': '[0-9.]*'" "$RES"/lane*.txt | head -40
