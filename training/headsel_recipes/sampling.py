# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Temperature-based resampling of tasks (as fairseq's `--sampling-alpha`): task `t` with `n_t` training
examples is drawn with probability `p_t ∝ n_t ** alpha`, then an example uniformly within the task. `alpha = 1`
keeps the natural proportions, `alpha = 0` makes tasks uniform; low-resource tasks are upsampled in between."""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils.data import Sampler


def task_sampling_probabilities(counts: dict[str, int], alpha: float) -> dict[str, float]:
    """`{task: n_t ** alpha / sum_u n_u ** alpha}` over the tasks with examples."""
    weights = {task: float(count) ** alpha for task, count in counts.items() if count > 0}
    total = sum(weights.values())
    return {task: weight / total for task, weight in weights.items()}


class TemperatureSampler(Sampler[int]):
    """Dataset indices drawn task-first with [`task_sampling_probabilities`] (with replacement).

    An epoch is `num_samples` draws (default: the dataset size). The draws depend only on `seed` and the epoch set by
    `set_epoch`, so every process of a distributed run sees the same sequence (the data loader shards it) and a
    resumed run sees the order it would have seen.
    """

    def __init__(self, groups: list[str], alpha: float, seed: int = 0, num_samples: int | None = None):
        self.alpha, self.seed, self.epoch = alpha, seed, 0
        self.num_samples = len(groups) if num_samples is None else num_samples
        counts = Counter(groups)
        self.tasks = sorted(counts)
        self.probabilities = task_sampling_probabilities(counts, alpha)
        task_index = {task: index for index, task in enumerate(self.tasks)}
        ids = torch.tensor([task_index[group] for group in groups], dtype=torch.long)
        self.order = torch.argsort(ids, stable=True)  # dataset indices grouped by task
        self.sizes = torch.bincount(ids, minlength=len(self.tasks))
        self.starts = torch.cumsum(self.sizes, 0) - self.sizes

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        weights = torch.tensor([self.probabilities[task] for task in self.tasks], dtype=torch.float64)
        tasks = torch.multinomial(weights, self.num_samples, replacement=True, generator=generator)
        within = (torch.rand(self.num_samples, generator=generator, dtype=torch.float64) * self.sizes[tasks]).long()
        yield from self.order[self.starts[tasks] + within].tolist()
