#!/usr/bin/env bash
# Session 44: issue 15's CPU figures again, on the code of session 44 (after sessions 30-43's changes: adapters in
# blocks, the generate encoder pass under its installed name, the base-model pre-hook's list made at init), with
# session 29's script: the overhead table of both families (one thread, 20 rounds) and the read floor of mixed-task
# greedy decoding, alone on the host. Resumable: a finished output is skipped. Run from the repository root:
#   nohup bash benchmarks/results/issue15/session44/run.sh > benchmarks/results/issue15/session44/run.log 2>&1 &
set -euo pipefail
echo "$(date -u +%T) code at $(git rev-parse --short HEAD)"
OUT=benchmarks/results/issue15/session44 bash "$(dirname "$0")/../session29/run.sh"
