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

# speech_inputs KIND: the offline speech corpus and the benchmarks' shared tokenizer of KIND (asr, st), each built if
# missing (the corpus's build log: outputs/speech_corpus.log)
speech_inputs() {
  [ -d data/offline_corpus/speech/$1 ] || timed "speech corpus ($1)" outputs/speech_corpus.log \
    .venv/bin/headsel-build-corpus --output_dir data/offline_corpus --speech
  [ -d outputs/benchmark/tokenizers/$1 ] || $python benchmarks/benchmark_tokenizers.py --kinds $1
}

# experiment_in_two_lanes ENTRY RAW_LOG COPY ARGS...: training/run_experiment.py ARGS in two lanes, timed as ENTRY,
# lane 1 logging to RAW_LOG (in the experiment's output folder, where lane 2 logs to lane2.log); both logs copied
# without their progress bars to COPY_lane1.log and COPY_lane2.log
experiment_in_two_lanes() {
  local entry=$1 raw=$2 copy=$3
  shift 3
  timed "$entry" "$raw" $python training/run_experiment.py "$@" --lanes 2
  without_progress_bars "$raw" "${copy}_lane1.log"
  without_progress_bars "$(dirname "$raw")/lane2.log" "${copy}_lane2.log"
}

# plain_test_losses ENTRY OUT: every finished run of the experiment folder OUT scored again without label smoothing
# (../baselines/plain_test_loss.py) into OUT_plain, timed as ENTRY (log: outputs/<OUT's name>_plain.log)
plain_test_losses() {
  timed "$1" "outputs/$(basename "$2")_plain.log" \
    env PYTHONPATH=$PYTHONPATH:benchmarks $python benchmarks/results/quality/baselines/plain_test_loss.py "$2" "$2_plain"
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
