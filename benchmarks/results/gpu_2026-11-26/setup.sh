# Sourced by the device scripts beside it, from the repository root on the GPU machine: installs the carried wheels
# (.whl/: transformers 5.24.0 as CI uses, regex), sets the paths and defines `step NAME LIMIT_S COMMAND...`, which
# runs COMMAND under a time limit into $RES/NAME.txt and packs $RES into $OUT after every step.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
RES=/tmp/res/$1
mkdir -p "$RES"
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name $(date +%T)"
  timeout "$limit" "$@" >"$RES/$name.txt" 2>&1
  echo "rc=$? $name $(date +%T)" | tee -a "$RES/$name.txt"
  tar czf "$OUT/$(basename "$RES").tgz" -C "$RES" .
}
