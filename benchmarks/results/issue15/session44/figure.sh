#!/usr/bin/env bash
# Session 57: the README's cost figure (Efficiency, "What it costs against the stock model") from this folder's two
# overhead runs, and their table of paired ratios on stdout: bash benchmarks/results/issue15/session44/figure.sh
set -euo pipefail
cd "$(dirname "$0")/../../../.."
DIR=benchmarks/results/issue15/session44
.venv/bin/python benchmarks/cost_plot.py "$DIR/overhead_cpu_marian_all_1thread_20rounds.json" \
    "$DIR/overhead_cpu_speech_to_text_all_1thread_20rounds.json" --label Marian --label Speech2Text \
    --title "Every component selecting, H = 4 of H' = 8, 4 + 4 tasks, d_model 256, 6 + 6 layers, CPU fp32, 1 thread, 20 rounds (session 44)" \
    --output "$DIR/cost_against_stock.png"
