#!/bin/bash
# The commands as run (after the mechanism run, alone): the tokenizer as RESULTS.md's round-3 commands build it, then
# the experiment (resumable: finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "mechanism_no_noise/run.sh|asr_noise/run.sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/st_noise
[ -f outputs/benchmark/tokenizers/st/vocab.json ] || python - <<'PY'
import csv, glob
from headsel_recipes.tokenizer import task_tag, train_speech_tokenizer
domains = ["django", "horizon", "wagtail"]
texts = [row["tgt_text"] for d in domains for path in sorted(glob.glob(f"data/offline_corpus/speech/st/train_*_en_{d}.tsv"))
         for row in csv.DictReader(open(path, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)]
train_speech_tokenizer(texts, 1000, tags=[task_tag("domain", d) for d in domains]).save_pretrained(
    "outputs/benchmark/tokenizers/st")
PY
start=$(date +%s)
headsel-experiment $R/st_noise.yaml > outputs/st_noise_experiment.log 2>&1
echo "experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
