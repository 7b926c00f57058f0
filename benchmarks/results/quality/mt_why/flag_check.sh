#!/bin/bash
# The recipe flag `--head_selection_noise_scale 0` against the probe's patch: MT group, seed 1, the ablation run's
# own run_config.json with the flag instead of the patch; the test loss must be equal to the last digit.
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "mt_why/queue.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/mt_why
out=outputs/benchmark/mt_why/flag_check/seed1
mkdir -p $out
python - <<'PY'
import json
from pathlib import Path
flags = json.loads(Path("outputs/benchmark/mt_why/runs/group_no_sampling_noise_ablation/seed1/run_config.json").read_text())
flags.update(output_dir="outputs/benchmark/mt_why/flag_check/seed1", head_selection_noise_scale=0.0)
Path("outputs/benchmark/mt_why/flag_check/seed1/run_config.json").write_text(json.dumps(flags, indent=2) + "\n")
PY
start=$(date +%s)
headsel-train mt $out/run_config.json > $R/flag_check_seed1.log 2>&1
echo "flag check rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
python - >> $R/flag_check.txt <<'PY'
import json
a = json.load(open("outputs/benchmark/mt_why/runs/group_no_sampling_noise_ablation/seed1/predict_results.json"))
b = json.load(open("outputs/benchmark/mt_why/flag_check/seed1/predict_results.json"))
keys = sorted(k for k in a if not k.endswith(("runtime", "per_second")))
print("patch (probe) vs flag, seed 1:", "equal" if all(a[k] == b[k] for k in keys) else "DIFFERENT")
for k in keys:
    print(f"  {k}: {a[k]!r} {b[k]!r}")
PY
