# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""How often a training draw takes another head than evaluation does, at the initial logits, per noise scale.

Draws with the library's own selector (`HeadSelector`, the group strategy with H' = 2H as in the benchmarks) from
logits initialised as the models initialise them (`LOGIT_INIT_RANGE`), and counts the slots whose sampled head
differs from the deterministic choice (argmax phi). The temperature does not enter: the sigmoid keeps the order.

    python benchmarks/results/quality/noise_scale/flip_share.py      # writes flip_share.md beside it
"""

from __future__ import annotations

from pathlib import Path

import torch

from hf_headsel.selection import LOGIT_INIT_RANGE, HeadSelector

SCALES = (1.0, 0.5, 0.25, 0.0)
SLOTS_PER_TASK = 16  # the CPU MT benchmark's decoder: 2 components x 2 layers x H = 4


def flip_share(scale: float, draws: int = 200, tasks: int = 64, layers: int = 8, heads: int = 4) -> float:
    """The share of slots whose sampled head differs from argmax phi, over `draws` fresh initialisations."""
    torch.manual_seed(0)
    selector = HeadSelector("group", tasks, layers, heads, 2 * heads)
    flipped = total = 0
    for _ in range(draws):
        with torch.no_grad():
            selector.logits.uniform_(*LOGIT_INIT_RANGE)
            sampled = selector.draw(True, 5.0, noise_scale=scale).heads
            flipped += int((sampled != selector.selected_heads()).sum())
            total += sampled.numel()
    return flipped / total


def main() -> None:
    rows = ["| noise scale | slots a training draw flips | passes with no flip (16 slots per task) |",
            "|---:|---:|---:|"]
    for scale in SCALES:
        share = flip_share(scale)
        rows.append(f"| {scale:g} | {share:.1%} | {(1 - share) ** SLOTS_PER_TASK:.1%} |")
    table = "\n".join(rows) + "\n"
    print(table, end="")
    (Path(__file__).parent / "flip_share.md").write_text(table)


if __name__ == "__main__":
    main()
