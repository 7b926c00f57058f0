#!/bin/bash
# Fetches into .whl/ (ignored: `echo /.whl/ >> .git/info/exclude`) every wheel session 32's device calls carried: the
# GPU machine (Python 3.12, no network) lacks these or has other versions. Run from the repository root, here:
#   bash benchmarks/results/gpu_2026-11-26_s32/fetch_wheels.sh
# then name ".whl" (and "data/offline_corpus/mt", built by `make corpus`) in the device call's carry.
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude || echo /.whl/ >> .git/info/exclude
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  transformers==5.24.0 regex==2026.11.19 datasets==5.2.0 evaluate==0.4.6 jiwer==4.0.0 rapidfuzz==3.14.6 dill==0.4.1 \
  multiprocess==0.70.19 fsspec==2026.9.0 sacremoses==0.2.0 polib==1.2.0 soundfile==0.14.0 cffi==2.1.1 pycparser==3.12
du -sh .whl
