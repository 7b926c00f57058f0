"""Where the adapter model's greedy decoding time goes, single- and mixed-task (cProfile, 3 calls each, one thread;
overhead.py's Marian model and batches, adapters keyed by direction, bottleneck 35). From the repository root:

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=benchmarks python benchmarks/results/adapters/profile_greedy.py
"""

import copy
import cProfile
import pstats

import torch

import adapters_ab
import overhead

torch.set_num_threads(1)
cfg = overhead.BenchConfig(family="marian", components=overhead.COMPONENT_PRESETS["all"])
headsel = overhead.build_models(cfg, torch.device("cpu"), torch.float32, ("headsel",))["headsel"]
models = {"adapters": adapters_ab.adapter_model(headsel, cfg, adapters_ab.matching_bottleneck(headsel, cfg))}
for mixed in (False, True):
    call = overhead.measurement_calls(cfg, models, copy.deepcopy(models), mixed, torch.device("cpu"))[
        "generate greedy"]["adapters"]
    call()  # warm-up
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(3):
        call()
    profile.disable()
    print(f"===== {'mixed' if mixed else 'single'}-task batch")
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)
