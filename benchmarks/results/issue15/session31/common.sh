# Sourced by this folder's run*.sh: the environment and `step NAME CMD...`, which runs CMD into $out/NAME.txt unless
# that file is there already (so a script resumes where it stopped). From the repository root.
set -euo pipefail
source .venv/bin/activate
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1
out=benchmarks/results/issue15/session31
step() {
    local name=$1; shift
    [ -s "$out/$name.txt" ] && { echo "skip $name"; return; }
    echo "$(date -u +%T) $name: $*"
    "$@" > "$out/$name.txt.part" 2>&1 && mv "$out/$name.txt.part" "$out/$name.txt"
}
