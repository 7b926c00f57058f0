# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Mechanism benchmark: does head selection find the sharing a multi-task problem needs, where the answer is known?

Four tasks read the same kind of input, random symbol sequences, with nothing in the input that tells them apart:
only the routing (`encoder_task_ids` / `decoder_task_ids`) does. Two tasks copy the sequence (`copy_a`, `copy_b`),
two reverse it (`reverse_a`, `reverse_b`). Tasks of one kind agree (the same output for every input: sharing heads
helps them), tasks of different kinds conflict (on most inputs no shared computation serves both). So:

* the shared model (the stock Marian model, every head shared) cannot beat guessing between copy and reverse;
* head selection can solve every task only by giving conflicting tasks different heads, and should give agreeing
  tasks the same ones (the paper's Figure 3 read on a problem whose ground truth is known).

All selection logits start equal for every task (one random row copied to all tasks): without learning, every task
selects the same heads and the model is the shared model with H heads. What separates the tasks is the learned
selection alone; with the straight-through gradient to the logits cut (`--frozen_selection`) nothing does.

    python benchmarks/mechanism.py --seeds 1 2 3 --output_dir benchmarks/results/mechanism

writes `mechanism.json` (accuracy per task and system, head overlap per task pair, per seed) and
`mechanism_sharing.png` (task-by-task head overlap, ground truth beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402
from transformers import MarianConfig, MarianMTModel  # noqa: E402

from hf_headsel import HeadSelMarianConfig, HeadSelMarianMTModel, HeadSelector  # noqa: E402
from headsel_recipes.trainer import schedule_value  # noqa: E402
from overhead import positive_int  # noqa: E402  (beside this script)

TASKS = ("copy_a", "copy_b", "reverse_a", "reverse_b")
PAD, EOS, FIRST_SYMBOL = 0, 1, 2
COMPONENTS = ("encoder_self", "decoder_self", "decoder_cross")


@dataclass
class MechanismSettings:
    """The problem, the model and the training budget (defaults: a few seconds on one CPU core).

    Attributes:
        symbols, length: inputs are `length` symbols drawn uniformly from `symbols` (then `</s>`).
        d_model, heads, candidates, layers: the model (H = `heads` of H' = `candidates` per attention, group
            strategy, every component selecting).
        steps, batch_size, learning_rate, selection_learning_rate, temperature: training (AdamW, constant rates).
        noise_scale, final_noise_scale: `head_selection_noise_scale`, the scale of the Gumbel noise in the training
            sample (1.0, the paper's; 0.0 trains on the deterministic choice); with `final_noise_scale` it goes
            linearly from `noise_scale` at the first update to `final_noise_scale` at the last.
        eval_size: held-out sequences per task.
    """

    symbols: int = 8
    length: int = 6
    d_model: int = 32
    heads: int = 2
    candidates: int = 4
    layers: int = 1
    steps: int = 300
    batch_size: int = 64
    learning_rate: float = 3e-3
    selection_learning_rate: float = 0.1
    temperature: float = 1.0
    noise_scale: float = 1.0
    final_noise_scale: float | None = None
    eval_size: int = 128


def target_of(task: str, sources: torch.Tensor) -> torch.Tensor:
    """The known answer: the symbols themselves (copy) or reversed (reverse)."""
    return sources if task.startswith("copy") else sources.flip(-1)


def make_batch(settings: MechanismSettings, size_per_task: int, generator: torch.Generator) -> dict:
    """`size_per_task` examples of every task, mixed in one batch: inputs, labels and task ids."""
    count = size_per_task * len(TASKS)
    symbols = torch.randint(FIRST_SYMBOL, FIRST_SYMBOL + settings.symbols, (count, settings.length),
                            generator=generator)
    task_ids = torch.arange(len(TASKS)).repeat_interleave(size_per_task)
    targets = torch.stack([target_of(TASKS[t], row) for t, row in zip(task_ids.tolist(), symbols)])
    eos = torch.full((count, 1), EOS)
    return {"input_ids": torch.cat([symbols, eos], 1), "labels": torch.cat([targets, eos], 1),
            "encoder_task_ids": task_ids, "decoder_task_ids": task_ids}


def model_config(settings: MechanismSettings, shared: bool = False):
    """The tiny Marian config of both systems (the shared one is the stock model with H heads)."""
    keywords = dict(vocab_size=FIRST_SYMBOL + settings.symbols, d_model=settings.d_model,
                    encoder_layers=settings.layers, decoder_layers=settings.layers,
                    encoder_attention_heads=settings.heads, decoder_attention_heads=settings.heads,
                    encoder_ffn_dim=2 * settings.d_model, decoder_ffn_dim=2 * settings.d_model,
                    max_position_embeddings=4 * settings.length, dropout=0.0, attention_dropout=0.0,
                    pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=None,
                    scale_embedding=True, init_std=settings.d_model ** -0.5)
    if shared:
        return MarianConfig(**keywords)
    return HeadSelMarianConfig(
        **keywords, encoder_tasks=list(TASKS), decoder_tasks=list(TASKS), task_type="domain",
        head_selection_strategy="group", head_selection_components=list(COMPONENTS),
        total_encoder_attention_heads=settings.candidates, total_decoder_attention_heads=settings.candidates,
        head_selection_temperature=settings.temperature, head_selection_noise_scale=settings.noise_scale)


def build_model(settings: MechanismSettings, seed: int, shared: bool = False):
    """A fresh model; for head selection, every task's logits start as one shared random row."""
    torch.manual_seed(seed)
    config = model_config(settings, shared)
    model = (MarianMTModel if shared else HeadSelMarianMTModel)(config)
    for module in model.modules():
        if isinstance(module, HeadSelector) and module.logits is not None:
            with torch.no_grad():
                module.logits.copy_(module.logits[:1].expand_as(module.logits))
    return model


def train(model, settings: MechanismSettings, seed: int, frozen_selection: bool = False, progress: bool = False):
    """Train on mixed-task batches (the selection logits at their own learning rate; frozen: not trained)."""
    logits = [m.logits for m in model.modules() if isinstance(m, HeadSelector) and m.logits is not None]
    for parameter in logits:
        parameter.requires_grad_(not frozen_selection)
    selection_ids = {id(p) for p in logits}
    others = [p for p in model.parameters() if id(p) not in selection_ids]
    groups = [{"params": others, "lr": settings.learning_rate}]
    if logits and not frozen_selection:
        groups.append({"params": logits, "lr": settings.selection_learning_rate, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    per_task = settings.batch_size // len(TASKS)
    model.train()
    for step in tqdm(range(settings.steps), disable=not progress, desc="training", leave=False):
        if settings.final_noise_scale is not None and hasattr(model, "head_selection"):
            model.config.head_selection_noise_scale = schedule_value(
                step, settings.steps, settings.noise_scale, settings.final_noise_scale, "linear")
        batch = make_batch(settings, per_task, generator)
        if not hasattr(model, "head_selection"):  # the stock model takes no task ids
            batch = {k: v for k, v in batch.items() if not k.endswith("task_ids")}
        loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy_per_task(model, settings: MechanismSettings, seed: int) -> dict[str, float]:
    """Exact-match accuracy of greedy decoding on held-out sequences, per task (evaluation mode: the deterministic
    selection). Free-running decoding must choose copy or reverse from its first token on; teacher forcing would
    reveal it after the first label."""
    batch = make_batch(settings, settings.eval_size, torch.Generator().manual_seed(10_000 + seed))
    routing = {k: v for k, v in batch.items() if k.endswith("task_ids")} if hasattr(model, "head_selection") else {}
    generated = model.generate(input_ids=batch["input_ids"], attention_mask=torch.ones_like(batch["input_ids"]),
                               num_beams=1, do_sample=False, max_new_tokens=settings.length + 1,
                               min_new_tokens=settings.length, **routing)[:, 1:]
    correct = (generated == batch["labels"]).all(-1).float()
    task_ids = batch["encoder_task_ids"]
    return {task: float(correct[task_ids == t].mean()) for t, task in enumerate(TASKS)}


def head_overlap(model) -> torch.Tensor:
    """`[tasks, tasks]`: the fraction of (component, layer, slot) choices two tasks make alike."""
    selected = model.selected_heads()
    same = sum((chosen[:, None] == chosen[None]).flatten(2).float().sum(-1) for chosen in selected.values())
    total = sum(chosen[0].numel() for chosen in selected.values())
    return same / total


def agreement_summary(overlap: torch.Tensor) -> dict[str, float]:
    """Mean head overlap of the agreeing pairs (same kind) and of the conflicting pairs (different kinds)."""
    kinds = [task.split("_")[0] for task in TASKS]
    agree, conflict = [], []
    for i in range(len(TASKS)):
        for j in range(i + 1, len(TASKS)):
            (agree if kinds[i] == kinds[j] else conflict).append(float(overlap[i, j]))
    return {"agreeing": sum(agree) / len(agree), "conflicting": sum(conflict) / len(conflict)}


def run_seed(settings: MechanismSettings, seed: int, progress: bool = False) -> dict:
    """Train and measure the three systems of one seed: head selection, head selection with frozen (untrained)
    selection, and the shared model."""
    result = {}
    for name, shared, frozen in (("head_selection", False, False), ("frozen_selection", False, True),
                                 ("shared", True, False)):
        model = train(build_model(settings, seed, shared), settings, seed, frozen, progress)
        entry = {"accuracy": accuracy_per_task(model, settings, seed)}
        entry["mean_accuracy"] = sum(entry["accuracy"].values()) / len(TASKS)
        if not shared:
            overlap = head_overlap(model)
            entry["overlap"] = overlap.tolist()
            entry.update(agreement_summary(overlap))
        result[name] = entry
    return result


def plot(results: dict, path: Path) -> Path:
    """The learned head overlap per task pair (mean over seeds) beside the ground truth of which tasks agree."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = list(results["seeds"].values())
    learned = torch.tensor([seed["head_selection"]["overlap"] for seed in seeds]).mean(0)
    kinds = [task.split("_")[0] for task in TASKS]
    truth = torch.tensor([[float(a == b) for b in kinds] for a in kinds])
    figure, axes = plt.subplots(1, 2, figsize=(10.5, 4.2), gridspec_kw={"wspace": 0.45})
    for axis, matrix, title in ((axes[0], truth, "ground truth: tasks that agree"),
                                (axes[1], learned, f"learned head overlap ({len(seeds)} seeds)")):
        image = axis.imshow(matrix.numpy(), vmin=0, vmax=1, cmap="viridis")
        axis.set_xticks(range(len(TASKS)), TASKS, rotation=45, ha="right")
        axis.set_yticks(range(len(TASKS)), TASKS)
        axis.set_title(title)
        for i in range(len(TASKS)):
            for j in range(len(TASKS)):
                axis.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color="w" if matrix[i, j] < .6
                          else "k")
    figure.colorbar(image, ax=axes, shrink=0.8, label="fraction of head choices shared")
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def summary_table(results: dict) -> str:
    """The range (min–max) over seeds of: the mean accuracy over tasks (copy / reverse), the head overlap of
    agreeing and of conflicting task pairs (`mechanism.json` holds every seed's values)."""
    seeds = list(results["seeds"].values())
    lines = ["| system (range over seeds) | mean accuracy | agreeing-pair overlap | conflicting-pair overlap |",
             "|---|---:|---:|---:|"]
    for system in ("head_selection", "frozen_selection", "shared"):
        def cell(key):
            values = [seed[system][key] for seed in seeds if key in seed[system]]
            if not values:
                return "–"
            return f"{min(values):.2f}–{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"
        lines.append(f"| {system} | {cell('mean_accuracy')} | {cell('agreeing')} | {cell('conflicting')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=positive_int, default=MechanismSettings.steps)
    parser.add_argument("--noise_scale", type=float, default=MechanismSettings.noise_scale,
                        help="scale of the Gumbel noise in training (0: the deterministic choice)")
    parser.add_argument("--final_noise_scale", type=float,
                        help="anneal the noise scale linearly to this value at the last update")
    parser.add_argument("--output_dir", type=Path, default=Path("benchmarks/results/mechanism"))
    args = parser.parse_args(argv)
    settings = MechanismSettings(steps=args.steps, noise_scale=args.noise_scale,
                                 final_noise_scale=args.final_noise_scale)
    torch.set_num_threads(1)
    results = {"settings": asdict(settings), "tasks": list(TASKS), "seeds": {}}
    for seed in tqdm(args.seeds, desc="seeds"):
        results["seeds"][str(seed)] = run_seed(settings, seed)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "mechanism.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.output_dir / "mechanism_sharing.png")
    table = summary_table(results)
    (args.output_dir / "mechanism.md").write_text(table + "\n")
    print(table)
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
