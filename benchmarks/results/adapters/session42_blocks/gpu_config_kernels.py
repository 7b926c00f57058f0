"""Session 42: the kernels of one mixed-task training step (forward and backward, `op_count.count_ops`) at the
configuration of the GPU quality runs whose parameter-matched adapters trained at about 3.8 updates/s against the
shared model's 6.9 (benchmarks/results/gpu_2026-11-28_s42/README.md): d_model 512, 6 + 6 layers, 4 heads, FFN 1024,
8,000-piece vocabulary, one encoder task and 8 decoder tasks (one-to-many: 8 directions), batch 128, adapters keyed by
direction with bottleneck 95; the stock model beside them. Sequence lengths 24 (about the corpus's average); the count
does not depend on them. From the repository root, alone (a few minutes on the CPU):

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=benchmarks python benchmarks/results/adapters/session42_blocks/gpu_config_kernels.py
"""

import copy

import torch

import adapters_ab
import op_count
import overhead
from hf_headsel import adapters as adapters_module

torch.set_num_threads(2)
cfg = overhead.BenchConfig(family="marian", components=overhead.COMPONENT_PRESETS["all"], d_model=512, layers=6,
                           heads=4, total_heads=8, ffn=1024, vocab=8000, encoder_tasks=1, decoder_tasks=8,
                           batch_size=128, src_len=24, tgt_len=24)  # head selection's, for adapter_model's sizes
models = overhead.build_models(cfg, torch.device("cpu"), torch.float32, ("stock", "headsel"))
models["adapters"] = adapters_ab.adapter_model(models["headsel"], cfg, 95, "direction")
del models["headsel"]
train_models = {name: copy.deepcopy(model) for name, model in models.items()}
calls = overhead.measurement_calls(cfg, models, train_models, True, torch.device("cpu"), optimizer_step=False)
print(f"stock: {sum(op_count.count_ops(calls['train step']['stock']).values())} kernels")
blocks = adapters_module.MAX_BLOCK_ROWS
for label, rows in (("adapters in blocks", blocks), ("adapters task by task", 0)):
    adapters_module.MAX_BLOCK_ROWS = rows
    print(f"{label}: {sum(op_count.count_ops(calls['train step']['adapters']).values())} kernels", flush=True)
