#!/bin/bash
# Device call A (issue 16): the environment, tests/test_cuda.py, and overhead.py (Marian, bf16, the default `paper`
# components) at batch 16. Run from the repository root: bash benchmarks/results/gpu_2026-11-26/call_a.sh
source benchmarks/results/gpu_2026-11-26/setup.sh call_a
step environment 60 bash -c 'nvidia-smi; python3 -c "import torch, transformers, huggingface_hub, sys; print(sys.version, torch.__version__, torch.version.cuda, transformers.__version__, huggingface_hub.__version__, torch.cuda.get_device_name())"'
step test_cuda 170 python3 -m pytest tests/test_cuda.py -v -p no:cacheprovider -rs
step overhead_marian_paper_b16 200 python3 benchmarks/overhead.py --device cuda --dtype bfloat16 --repeats 6 \
  --json "$RES/overhead_marian_paper_b16.json"
