# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Where a run ran: the library versions and the hardware, one line per recipe invocation in the output folder.

A run repeats bit for bit on one machine with one version of the libraries; on another CPU (another instruction set,
so other kernels) or after a change that rounds the same sums in another order, its training drifts from the
recorded one after a few hundred updates, by up to the seed spread
(`benchmarks/results/quality/mt_one_to_many_deep/README.md`, "Why the retrained runs are near their recorded
runs"). A run folder therefore says where it was trained and scored: `environment.jsonl`, appended by every
invocation that writes to the folder (a resumed or scoring run adds a line; a run starting over clears it with the
earlier run's scores).
"""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

import hf_headsel

#: The file of a run folder that lists where each invocation ran.
ENVIRONMENT_LOG_NAME = "environment.jsonl"
#: The distributions whose versions a record names (`None` where one is not installed).
RECORDED_PACKAGES = ("hf-headsel", "transformers", "torch", "datasets", "accelerate", "tokenizers", "sentencepiece",
                     "sacrebleu", "jiwer", "numpy")
#: The fields of a record that decide how a training run rounds: the code and library versions, the CPU and its
#: kernels, the accelerators (two runs that agree on them repeat bit for bit with one seed).
ROUNDING_KEYS = ("hf_headsel_commit", "packages", "cpu", "cpu_capability", "accelerators")


def package_version(name: str) -> str | None:
    """The installed version of distribution `name`, or `None`."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def library_commit() -> str | None:
    """The git commit of the checkout hf_headsel is imported from, `+dirty` when tracked files differ from it
    (an editable install of a clone); `None` for an installed release or where git cannot tell."""
    folder = Path(hf_headsel.__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}+dirty" if changed else commit


def cpu_name() -> str:
    """The CPU's model name (`/proc/cpuinfo` on Linux, else what `platform` knows; empty when unknown)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def describe_environment() -> dict[str, Any]:
    """The versions of `RECORDED_PACKAGES` (and hf_headsel's commit in a checkout), Python, the platform, the CPU
    (its name and the instruction set torch's CPU kernels use), torch's thread count and the accelerators torch
    sees. [`ROUNDING_KEYS`] names the fields that decide how a training run rounds."""
    accelerators = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    return {
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in RECORDED_PACKAGES},
        "hf_headsel_commit": library_commit(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.version.cuda,
        "accelerators": accelerators,
    }


def record_environment(output_dir: str | Path, **run: Any) -> dict[str, Any]:
    """Append this invocation's line to `output_dir`/environment.jsonl: the UTC time, `run` (what it does, e.g. the
    steps it trains) and [`describe_environment`]. Returns the line's record."""
    record = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **run, **describe_environment()}
    with open(Path(output_dir) / ENVIRONMENT_LOG_NAME, "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
    return record


def recorded_recipe(output_dir: str | Path) -> str:
    """The recipe (`"asr"`, `"st"`, `"mt"`) of the last invocation recorded in `output_dir`/environment.jsonl (every
    recipe run writes its line there: [`record_environment`]), to score a finished run again by its own recipe."""
    return json.loads((Path(output_dir) / ENVIRONMENT_LOG_NAME).read_text().splitlines()[-1])["recipe"]
