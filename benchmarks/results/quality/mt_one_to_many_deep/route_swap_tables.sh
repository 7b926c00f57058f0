#!/bin/bash
# route_swap.sh's tables (session 62): the retrained one-to-many runs' scores (to set beside the recorded ones) and
# route_swap.py's misrouting tables of both depth experiments, in route_swap.md.
source "$(dirname "$0")/record.sh"
OUT=outputs/benchmark/mt_one_to_many_deep_lr_0.001_warmup_400
$python benchmarks/quality_tables.py $OUT > $HERE/route_swap_retrained_supplementary.md
for folder in $OUT outputs/benchmark/mt_many_to_one_deep; do
  echo "### $folder"; echo
  misrouting_table $folder; echo
done > $HERE/route_swap.md
