# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What head selection costs at scale: training throughput, generation latency and peak memory of the stock Marian
model against `HeadSelMarianMTModel`, and how the cost grows with the number of tasks and with H'.

Extends `overhead.py` (same model sizes, inputs and group-strategy models; its all-candidates baseline is left out).
Every *point* of the sweep is one head-selection configuration (tasks per side, H'); at every point the stock model
is measured in the same run, interleaved with the head-selection model, and the ratios are against it:

* **training throughput**: target tokens per second of full training steps (forward, backward, AdamW step) on a
  mixed-task batch (`--batch-kind single` for one task); under `torch.autocast` when `--dtype` is bf16 / fp16, with
  fp32 weights, as `Seq2SeqTrainer --bf16` trains;
* **generation latency**: greedy and beam-search (`--num-beams`, default 5) generation of a batch, weights cast to
  `--dtype`, a fixed number of new tokens;
* **peak memory** above the level before the call, for one training step and one beam-search generation:
  `torch.cuda.max_memory_allocated` on a GPU; on CPU the peak resident set size (Linux `VmHWM`, reset through
  `/proc/self/clear_refs`, with glibc told to return freed blocks at once). CPU figures are indicative (they include
  allocator slack); the memory pass runs after every timing so that allocator setting slows no timing.

Sweeps: `--tasks` (default 2 4 8 16, at the default H') and `--total-heads` (default 4 8 16, at the default task
count). H' = H is the no-selection case (the stock model's arithmetic with routing on top).

    python benchmarks/performance.py --quick --output benchmarks/results/performance_quick     # CPU smoke run
    python benchmarks/performance.py --output benchmarks/results/performance_cpu               # CPU, float32
    python benchmarks/performance.py --device cuda --dtype bf16 --output benchmarks/results/performance_gpu

Writes `<output>.json` (every timing) and `<output>.md` (the tables), and prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

import transformers
from overhead import (  # beside this script (its folder comes first on the module path)
    DTYPES,
    QUICK,
    BenchConfig,
    build_models,
    config_from_flags,
    generate_calls,
    make_inputs,
    non_negative_int,
    positive_int,
    synchronize,
)

SYSTEMS = ("stock", "headsel")
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
MIB = 2**20


@dataclass(frozen=True)
class Point:
    """One head-selection configuration of the sweep, and the sweeps it belongs to."""

    tasks: int
    total_heads: int
    sweeps: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.tasks} tasks, H'={self.total_heads}"


@dataclass
class PointResult:
    """Timings (seconds per call, every repeat) and peak memory (bytes) of both systems at one point."""

    point: Point
    tokens_per_step: int
    # distinct tasks per side in a batch, {"train": n, "generate": n}: a mixed batch holds min(tasks, batch size)
    tasks_per_batch: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # measurement -> system -> seconds
    peak_bytes: dict[str, dict[str, int | None]] = field(default_factory=dict)  # measurement -> system -> bytes
    parameter_bytes: dict[str, int] = field(default_factory=dict)

    def median_s(self, measurement: str, system: str) -> float:
        return statistics.median(self.seconds[measurement][system])

    def cost_ratio(self, measurement: str) -> float:
        """headsel / stock of the median times (> 1: head selection is slower)."""
        return self.median_s(measurement, "headsel") / self.median_s(measurement, "stock")

    def tokens_per_s(self, system: str) -> float:
        return self.tokens_per_step / self.median_s("train step", system)

    def memory_ratio(self, measurement: str) -> float | None:
        stock, headsel = (self.peak_bytes.get(measurement, {}).get(s) for s in SYSTEMS)
        return headsel / stock if stock and headsel is not None else None

    def to_dict(self) -> dict:
        return {
            "tasks": self.point.tasks, "total_heads": self.point.total_heads, "sweeps": list(self.point.sweeps),
            "tokens_per_step": self.tokens_per_step, "tasks_per_batch": self.tasks_per_batch,
            "train_tokens_per_s": {s: self.tokens_per_s(s) for s in SYSTEMS},
            "median_ms": {m: {s: 1000 * self.median_s(m, s) for s in SYSTEMS} for m in self.seconds},
            "cost_ratio": {m: self.cost_ratio(m) for m in self.seconds},
            "peak_mib": {m: {s: None if b is None else b / MIB for s, b in peaks.items()}
                         for m, peaks in self.peak_bytes.items()},
            "memory_ratio": {m: self.memory_ratio(m) for m in self.peak_bytes},
            "parameter_mib": {s: b / MIB for s, b in self.parameter_bytes.items()},
            "seconds": self.seconds,
        }  # fmt: skip


def sweep_points(base: BenchConfig, tasks: list[int], total_heads: list[int]) -> list[Point]:
    """The task-count sweep at the base H', then the H' sweep at the base task count (a shared point once)."""
    members: dict[tuple[int, int], list[str]] = {}
    for count in tasks:
        members.setdefault((count, base.total_heads), []).append("tasks")
    for total in total_heads:
        members.setdefault((base.encoder_tasks, total), []).append("total_heads")
    for _, total in members:
        if total < base.heads or total % base.heads:
            raise SystemExit(f"--total-heads {total}: the group strategy needs a multiple of H = {base.heads}")
    return [Point(t, h, tuple(s)) for (t, h), s in members.items()]


def point_config(base: BenchConfig, point: Point) -> BenchConfig:
    return replace(base, encoder_tasks=point.tasks, decoder_tasks=point.tasks, total_heads=point.total_heads)


def build_systems(cfg: BenchConfig, device: torch.device) -> dict[str, torch.nn.Module]:
    """The stock and head-selection models of `overhead.build_models` (fp32, eval mode), without its reference."""
    models = build_models(cfg, device, torch.float32)
    models.pop("all_candidates")
    return models


# ---------------------------------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------------------------------


def autocast(device: torch.device, dtype: torch.dtype):
    """Mixed precision as the Trainer's --bf16 / --fp16 does it; nothing for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def train_step_calls(models: dict, inputs: dict, routing: dict, device: torch.device, dtype: torch.dtype) -> dict:
    """A full training step per system (train mode, AdamW), on fp32 weights under autocast."""
    optimizers = {s: torch.optim.AdamW(models[s].parameters(), lr=1e-5) for s in SYSTEMS}

    def call(system: str) -> Callable[[], None]:
        model, optimizer = models[system], optimizers[system]
        kwargs = inputs if system == "stock" else {**inputs, **routing}

        def run() -> None:
            model.train()
            with autocast(device, dtype):
                loss = model(**kwargs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return run

    return {system: call(system) for system in SYSTEMS}


def workloads(cfg: BenchConfig, device: torch.device, dtype: torch.dtype, mixed: bool):
    """`(tokens per training step, {measurement: {system: call}}, parameter bytes per system, distinct tasks per
    batch {"train": n, "generate": n})` for one point, on fresh models."""
    train_models = build_systems(cfg, device)
    eval_models = {s: copy.deepcopy(m).to(dtype=dtype).eval() for s, m in train_models.items()}
    torch.manual_seed(30)
    train_inputs, train_routing = make_inputs(cfg, cfg.batch_size, mixed, device, labels=True)
    torch.manual_seed(20)
    gen_inputs, gen_routing = make_inputs(cfg, cfg.gen_batch_size, mixed, device, labels=False)
    gen_inputs.pop("decoder_input_ids")
    calls = {
        "train step": train_step_calls(train_models, train_inputs, train_routing, device, dtype),
        "generate greedy": generate_calls(eval_models, gen_inputs, gen_routing, cfg, num_beams=1),
        f"generate beam {cfg.num_beams}": generate_calls(eval_models, gen_inputs, gen_routing, cfg, cfg.num_beams),
    }
    tokens = int((train_inputs["labels"] != -100).sum())
    parameter_bytes = {s: sum(p.numel() * p.element_size() for p in eval_models[s].parameters()) for s in SYSTEMS}
    tasks_per_batch = {name: int(routing["decoder_task_ids"].unique().numel())
                       for name, routing in (("train", train_routing), ("generate", gen_routing))}
    return tokens, calls, parameter_bytes, tasks_per_batch


# ---------------------------------------------------------------------------------------------------------------------
# Timing and memory
# ---------------------------------------------------------------------------------------------------------------------


def time_calls(calls: dict[str, Callable[[], None]], cfg: BenchConfig, device: torch.device) -> dict[str, list[float]]:
    """Warm both systems up, then `cfg.repeats` rounds of both, the order alternating every round."""
    for _ in range(cfg.warmup):
        for system in SYSTEMS:
            calls[system]()
    seconds = {system: [] for system in SYSTEMS}
    for round_ in range(cfg.repeats):
        for system in SYSTEMS if round_ % 2 == 0 else SYSTEMS[::-1]:
            gc.collect()
            synchronize(device)
            start = time.perf_counter()
            calls[system]()
            synchronize(device)
            seconds[system].append(time.perf_counter() - start)
    return seconds


class PeakMemory:
    """Peak memory of a block above the level at its start, in bytes (`None` where it cannot be measured).

    CUDA: `torch.cuda.max_memory_allocated`. CPU: the resident set size high-water mark `VmHWM` of Linux, reset on
    entry through `/proc/self/clear_refs`; [`PeakMemory.prepare_cpu`] first makes glibc hand freed blocks back at
    once, so that memory freed by an earlier call does not hide this call's allocations.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.bytes: int | None = None

    @staticmethod
    def prepare_cpu() -> str:
        """Use mmap for every block of 64 KiB or more and trim freed heap memory (glibc); returns the method."""
        if not Path("/proc/self/clear_refs").exists():
            return "unavailable (no /proc/self/clear_refs)"
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD (also turns off glibc's dynamic threshold)
            libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD
            return "peak RSS (VmHWM), glibc mmap threshold 64 KiB"
        return "peak RSS (VmHWM)"

    @staticmethod
    def _status_kib(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise OSError(f"{key} missing from /proc/self/status")

    def __enter__(self) -> "PeakMemory":
        gc.collect()
        synchronize(self.device)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            return self
        self._start = None
        with contextlib.suppress(OSError):
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL("libc.so.6").malloc_trim(0)
            Path("/proc/self/clear_refs").write_text("5")  # 5: reset the peak RSS to the current RSS
            self._start = self._status_kib("VmRSS") * 1024
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        if self.device.type == "cuda":
            self.bytes = torch.cuda.max_memory_allocated(self.device) - self._start
        elif self._start is not None:
            self.bytes = self._status_kib("VmHWM") * 1024 - self._start


def measure_memory(calls: dict[str, Callable[[], None]], device: torch.device) -> dict[str, int | None]:
    """Peak memory of one call per system, after one untimed call (optimizer state and caches exist by then)."""
    peaks = {}
    for system in SYSTEMS:
        calls[system]()
        with PeakMemory(device) as peak:
            calls[system]()
        peaks[system] = peak.bytes
    return peaks


# ---------------------------------------------------------------------------------------------------------------------
# Run and report
# ---------------------------------------------------------------------------------------------------------------------


def run(base: BenchConfig, points: list[Point], device: torch.device, dtype: torch.dtype, mixed: bool,
        memory: bool) -> tuple[list[PointResult], str | None]:
    results = []
    for point in tqdm(points, desc="timing", unit=" point"):
        cfg = point_config(base, point)
        tokens, calls, parameter_bytes, tasks_per_batch = workloads(cfg, device, dtype, mixed)
        result = PointResult(point, tokens, tasks_per_batch, parameter_bytes=parameter_bytes)
        for measurement, system_calls in calls.items():
            torch.manual_seed(0)
            result.seconds[measurement] = time_calls(system_calls, cfg, device)
        results.append(result)
        del calls
    if not memory:
        return results, None
    method = "torch.cuda.max_memory_allocated" if device.type == "cuda" else PeakMemory.prepare_cpu()
    for result in tqdm(results, desc="memory", unit=" point"):
        cfg = point_config(base, result.point)
        _, calls, _, _ = workloads(cfg, device, dtype, mixed)
        beam = f"generate beam {cfg.num_beams}"
        for measurement in ("train step", beam):
            result.peak_bytes[measurement] = measure_memory(calls[measurement], device)
        del calls
    return results, method


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MIB:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _time_cells(result: PointResult, measurement: str) -> list[str]:
    """Stock ms, head-selection ms and their ratio."""
    stock, headsel = (f"{1000 * result.median_s(measurement, s):.1f}" for s in SYSTEMS)
    return [stock, headsel, _ratio(result.cost_ratio(measurement))]


def report(results: list[PointResult], cfg: BenchConfig, environment: dict, memory_method: str | None) -> str:
    """The Markdown report: a speed table and a memory table, one row per point."""
    beam = f"generate beam {cfg.num_beams}"
    speed = markdown_table(
        ["tasks", "H'", "tasks per batch (train / gen)", "train tok/s stock", "headsel", "time ratio", "greedy ms stock", "headsel", "ratio",
         f"beam {cfg.num_beams} ms stock", "headsel", "ratio"],
        [[str(r.point.tasks), str(r.point.total_heads), f"{r.tasks_per_batch['train']} / {r.tasks_per_batch['generate']}",
          f"{r.tokens_per_s('stock'):.0f}", f"{r.tokens_per_s('headsel'):.0f}", _ratio(r.cost_ratio("train step")),
          *_time_cells(r, "generate greedy"), *_time_cells(r, beam)]
         for r in results],
    )  # fmt: skip
    parts = [
        f"## hf-headsel performance: {environment['device']}, {environment['dtype']}",
        "",
        f"Marian, d_model {cfg.d_model}, {cfg.layers}+{cfg.layers} layers, H = {cfg.heads}, group strategy on "
        f"{', '.join(cfg.components)}; tasks = tasks per side, of which a batch holds at most its size. "
        f"{environment['batch_kind']}-task batches: training "
        f"{cfg.batch_size} x src {cfg.src_len} x tgt {cfg.tgt_len}; generation {cfg.gen_batch_size} x "
        f"{cfg.max_new_tokens} new tokens. Medians of {cfg.repeats} repeats after {cfg.warmup} warm-up; ratios are "
        f"head selection / stock at the same point (time: > 1 is slower; memory: > 1 is more). torch "
        f"{environment['torch']}, transformers {environment['transformers']}, {environment['threads']} CPU threads.",
        "",
        speed,
    ]
    if memory_method is not None:
        memory = markdown_table(
            ["tasks", "H'", "params MiB stock", "headsel", "train step peak MiB stock", "headsel", "ratio",
             f"beam {cfg.num_beams} peak MiB stock", "headsel", "ratio"],
            [[str(r.point.tasks), str(r.point.total_heads),
              *(_mib(r.parameter_bytes[s]) for s in SYSTEMS),
              *(x for m in ("train step", beam) for x in (
                  *(_mib(r.peak_bytes[m][s]) for s in SYSTEMS), _ratio(r.memory_ratio(m))))]
             for r in results],
        )  # fmt: skip
        parts += ["", f"Peak memory above the level before the call ({memory_method}):", "", memory]
    return "\n".join(parts) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=sorted([*DTYPES, *DTYPE_ALIASES]),
                        help="generation weights; training autocast (default float32)")
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 tasks / H' values per sweep: a smoke run")
    parser.add_argument("--output", type=Path, required=True,
                        help="output path without suffix: writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--tasks", type=positive_int, nargs="+", help="task counts per side to sweep (default 2 4 8 16)")
    parser.add_argument("--total-heads", type=positive_int, nargs="+", help="H' values to sweep (default 4 8 16)")
    parser.add_argument("--batch-kind", choices=["mixed", "single"], default="mixed",
                        help="every task in each batch (default) or one task per batch")
    parser.add_argument("--repeats", type=positive_int, help=f"timed rounds per measurement (default {BenchConfig.repeats})")
    parser.add_argument("--warmup", type=non_negative_int, help=f"untimed rounds per measurement (default {BenchConfig.warmup})")
    parser.add_argument("--num-beams", type=positive_int, help=f"beam size (default {BenchConfig.num_beams})")
    parser.add_argument("--batch-size", type=positive_int, help=f"training batch (default {BenchConfig.batch_size})")
    parser.add_argument("--gen-batch-size", type=positive_int, help=f"generation batch (default {BenchConfig.gen_batch_size})")
    parser.add_argument("--attn-implementation", choices=["eager", "sdpa", "flash_attention_2"],
                        help=f"attention backend (default {BenchConfig.attn_implementation})")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory pass")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: every core; 1 with --quick)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    dtype_name = DTYPE_ALIASES.get(args.dtype, args.dtype)
    overrides = dict(QUICK, repeats=2) if args.quick else {}
    for key in ("repeats", "warmup", "num_beams", "batch_size", "gen_batch_size", "attn_implementation"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    cfg = config_from_flags(**overrides)
    tasks = args.tasks or ([2, 4] if args.quick else [2, 4, 8, 16])
    total_heads = args.total_heads or ([4, 8] if args.quick else [4, 8, 16])
    points = sweep_points(cfg, tasks, total_heads)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(args.threads or (1 if args.quick else cores))
    transformers.logging.set_verbosity_error()
    environment = dict(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        dtype=dtype_name, batch_kind=args.batch_kind, threads=torch.get_num_threads(), cores=cores,
        torch=torch.__version__, transformers=transformers.__version__, python=platform.python_version(),
    )  # fmt: skip
    print(f"hf-headsel performance benchmark: {json.dumps(environment)}", file=sys.stderr)
    print(f"points: {[p.label for p in points]}", file=sys.stderr)

    started = time.perf_counter()
    results, memory_method = run(cfg, points, device, DTYPES[dtype_name], args.batch_kind == "mixed",
                                 memory=not args.no_memory)
    markdown = report(results, cfg, environment, memory_method)
    print(markdown)
    payload = dict(environment=environment, config=asdict(cfg), memory_method=memory_method,
                   wall_s=time.perf_counter() - started, points=[r.to_dict() for r in results])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = args.output.with_suffix(".json"), args.output.with_suffix(".md")
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    md_path.write_text(markdown)
    print(f"wrote {json_path} and {md_path} ({payload['wall_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
