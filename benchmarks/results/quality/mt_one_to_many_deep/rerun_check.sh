#!/bin/bash
# Session 63: why did route_swap.sh's retrained runs land near their recorded runs (sessions 40-41) but not on them
# (test loss within 0.002 for the Group systems, 0.024 for the adapters)? Seed 1 of the adapters of as many
# parameters and of Group without the noise (lr_0.001_warmup_400.yaml), trained for 50 updates with the library
# of this checkout (the adapters twice) and of three earlier commits (git worktrees under outputs/rerun_check/,
# removed at the end): session 40's recording commit 4e5b2d5, and 71a2c1b (blocked adapters for mixed-task
# batches; found by bisecting the 85 commits that touched src/ or training/headsel_recipes/ since) with its parent.
# rerun_check.py compares the weights with this checkout's run; the tables go to rerun_check.md. Alone, two lanes,
# about 4 minutes (195 s for the training).
source "$(dirname "$0")/record.sh"
OUT=outputs/rerun_check
ADAPTERS=adapters_as_many_parameters_as_group_trained_with_the_model_ablation
GROUP=group_no_sampling_noise_ablation
COMMITS=(4e5b2d5 71a2c1b^ 71a2c1b)
rm -rf $OUT && mkdir -p $OUT
$python training/run_experiment.py $HERE/lr_0.001_warmup_400.yaml --output_dir $OUT/configs --dry_run \
  --systems "Group, no sampling noise (ablation)" \
  "Adapters as many parameters as Group, trained with the model (ablation)" \
  > /dev/null

# train CODE SYSTEM NAME: SYSTEM's seed 1 for 50 updates with the library in folder CODE, into $OUT/NAME
train() {
  local code=$1 system=$2 name=$3 entry config
  entry=$(grep -Po 'headsel-train = \K\S+' $code/setup.cfg)  # the console script moved between these commits
  config=$($python $HERE/rerun_check.py --config $OUT/configs/runs/$system/seed1/run_config.json $OUT/$name 50)
  PYTHONPATH=$code/src:$code/training $python -c "import importlib, sys
module, function = '$entry'.split(':')
sys.argv = ['headsel-train', 'mt', '$config']
getattr(importlib.import_module(module), function)()" > $OUT/$name.log 2>&1 || echo "$name failed: $OUT/$name.log"
}

for commit in "${COMMITS[@]}"; do git worktree add --detach -f -q $OUT/code_$commit $commit; done
start=$(date +%s)
train . $ADAPTERS adapters_this_checkout & train . $ADAPTERS adapters_this_checkout_again; wait
for commit in "${COMMITS[@]}"; do
  train $OUT/code_$commit $ADAPTERS adapters_$commit & train $OUT/code_$commit $GROUP group_$commit; wait
done
train . $GROUP group_this_checkout
echo "rc=0 $(($(date +%s) - start)) s $(date -u +%FT%TZ) rerun_check.sh" >> $HERE/runs.txt
for commit in "${COMMITS[@]}"; do git worktree remove --force $OUT/code_$commit; done

{
  echo "Seed 1, 50 updates, weights against this checkout's run ($(git rev-parse --short HEAD)):"; echo
  echo "Adapters of as many parameters:"; echo
  $python $HERE/rerun_check.py $OUT/adapters_this_checkout $OUT/adapters_this_checkout_again \
    $OUT/adapters_71a2c1b $OUT/adapters_71a2c1b^ $OUT/adapters_4e5b2d5
  echo; echo "Group without the noise:"; echo
  $python $HERE/rerun_check.py $OUT/group_this_checkout $OUT/group_71a2c1b $OUT/group_71a2c1b^ $OUT/group_4e5b2d5
} > $HERE/rerun_check.md
