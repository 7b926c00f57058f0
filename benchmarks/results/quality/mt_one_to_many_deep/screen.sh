#!/bin/bash
# Session 38: lr_screen.yaml in two lanes of one thread each, stopped after 330 s (about 400 updates); the training
# losses are read off the lane logs (outputs/benchmark/mt_one_to_many_deep_lr_screen/lane{1,2}.log).
cd "$(dirname "$0")/../../../.." || exit 1
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training
out=outputs/benchmark/mt_one_to_many_deep_lr_screen
mkdir -p $out
for lane in 1 2; do
  timeout 330 .venv/bin/python training/run_experiment.py benchmarks/results/quality/mt_one_to_many_deep/lr_screen.yaml \
    > $out/lane$lane.log 2>&1 &
  sleep 2
done
wait
grep -Ho "{'loss': '[0-9.]*'\|runs/[a-z0-9_]*/seed1" $out/lane*.log | uniq
