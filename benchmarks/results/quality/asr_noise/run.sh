#!/bin/bash
# The commands as run: alone on the 2-core machine, in the background, resumable (finished runs are skipped).
cd "$(dirname "$0")/../../../.." && source .venv/bin/activate
while pgrep -f "mt_why/(queue|flag_check).sh" >/dev/null; do sleep 20; done
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
R=benchmarks/results/quality/asr_noise
start=$(date +%s)
[ -d data/offline_corpus/speech/asr ] || headsel-build-corpus --output_dir data/offline_corpus --speech \
  > outputs/asr_noise_corpus.log 2>&1
echo "corpus rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
[ -f outputs/benchmark/tokenizers/asr/vocab.json ] || python - <<'PY'
import csv, glob
from headsel_recipes.tokenizer import task_tag, train_speech_tokenizer
tasks = "ar de el es fr it pt ru".split()
texts = [row["tgt_text"] for t in tasks for path in sorted(glob.glob(f"data/offline_corpus/speech/asr/train_{t}_{t}_*.tsv"))
         for row in csv.DictReader(open(path, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)]
train_speech_tokenizer(texts, 1000, tags=[task_tag("lang", t) for t in tasks]).save_pretrained(
    "outputs/benchmark/tokenizers/asr")
PY
start=$(date +%s)
headsel-experiment $R/asr_noise.yaml > outputs/asr_noise_experiment.log 2>&1
echo "experiment rc $? $(( $(date +%s) - start )) s" >> $R/runs.txt
