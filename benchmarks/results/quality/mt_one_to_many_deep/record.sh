# The steps this folder's record scripts share, sourced by them (`source "$(dirname "$0")/record.sh"`): the working
# directory and environment of every run (the repository root; one thread per lane, alone on the machine), a timed
# run whose status and seconds go to runs.txt, logs copied without their progress bars, and collapse.py's tables.
# The many-to-one depth experiment's scripts (../mt_many_to_one_deep/) source it too and set their own HERE after it.
cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." || exit 1
HERE=benchmarks/results/quality/mt_one_to_many_deep
DEPTH=$HERE  # where collapse.py is, whatever HERE a sourcing script sets
python=.venv/bin/python
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONPATH=src:training

# The depth figures' systems, as quality_plot.py's --system arguments: one-to-many's figure
# (../../gpu_2026-11-28_s42/figure.sh) and many-to-one's (../mt_many_to_one_deep/tables.sh) draw the same systems
# with the same labels, so the same colours
DEPTH_FIGURE_SYSTEMS=(
  --system group "Group head selection (the paper's recipe)"
  --system group_no_sampling_noise_ablation "Group, no sampling noise (ablation)"
  --system adapters_as_many_parameters_as_group_trained_with_the_model_ablation "Adapters, as many parameters as Group (ablation)"
  --system group_no_sampling_noise_selection_frozen_ablation "Group, no sampling noise, selection frozen (ablation)"
)

# timed ENTRY LOG COMMAND...: COMMAND's output into LOG; "rc=<status> <seconds> s <time> ENTRY" appended to runs.txt
timed() {
  local entry=$1 log=$2 start rc
  shift 2
  mkdir -p "$(dirname "$log")"
  start=$(date +%s)
  "$@" > "$log" 2>&1
  rc=$?
  echo "rc=$rc $(($(date +%s) - start)) s $(date -u +%FT%TZ) $entry" >> "$HERE/runs.txt"
}

# without_progress_bars RAW COPY: the log without tqdm's progress lines and blank lines
without_progress_bars() {
  tr '\r' '\n' < "$1" | grep -v -E "[0-9]+/[0-9]+ \[[0-9:]+<|^\s*$" > "$2"
}

# collapse_table ARGS...: collapse.py's table rows (its progress on stderr dropped)
collapse_table() {
  $python $DEPTH/collapse.py "$@" 2>/dev/null | grep '^|'
}

# collapse_with_checkpoints OUT: the table over OUT's runs, then one over each run's checkpoints
collapse_with_checkpoints() {
  echo "### runs"; echo; collapse_table "$1"
  for run in "$1"/runs/*/seed*; do echo; echo "### checkpoints of $run"; echo; collapse_table --checkpoints "$run"; done
}

# misrouting_table FOLDER: route_swap.py's tables of FOLDER's runs (it imports collapse.py beside it and
# benchmarks/quality_tables.py; its progress on stderr dropped)
misrouting_table() {
  PYTHONPATH=$PYTHONPATH:benchmarks $python $DEPTH/route_swap.py "$1" 2>/dev/null
}
