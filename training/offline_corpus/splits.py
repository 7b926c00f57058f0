# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Train/dev/test splits in which no identical sentence crosses splits.

Pairs are grouped into connected components of a graph whose nodes are normalised English sources (shared by all
languages and domains) and normalised targets (per language): two pairs that share either end are in the same
component. Every component goes, whole, to one split, chosen from a hash of the component and the seed: so an
English sentence is in the same split for every language and domain (en->x and x->en cannot leak through the
pivot), and so is every target sentence. A component larger than `max_eval_component` pairs (generic labels that
many strings translate to) goes to train, where it cannot make dev/test lopsided.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from .pairs import Pair
from .po import normalize_text

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class SplitRules:
    """The expected share of dev and test (the rest is train), the seed of the assignment and the largest component
    that may go to dev or test."""

    dev_fraction: float = 0.1
    test_fraction: float = 0.2
    seed: int = 13
    max_eval_component: int = 64

    def __post_init__(self):
        if self.dev_fraction < 0 or self.test_fraction < 0 or self.dev_fraction + self.test_fraction >= 1:
            raise ValueError(
                f"dev_fraction and test_fraction must be >= 0 and leave room for train, got {self.dev_fraction} "
                f"and {self.test_fraction}"
            )


class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, node: str) -> str:
        self.parent.setdefault(node, node)
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:  # path compression
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: str, b: str) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            # the smaller name becomes the root, so roots do not depend on the order of unions
            self.parent[max(root_a, root_b)] = min(root_a, root_b)


def source_node(pair: Pair) -> str:
    return "en\t" + normalize_text(pair.source)


def target_node(pair: Pair) -> str:
    return f"{pair.lang}\t" + normalize_text(pair.target)


def components(pairs: list[Pair]) -> dict[str, list[Pair]]:
    """`{component root: its pairs}` of the source/target graph described in the module docstring."""
    forest = _UnionFind()
    for pair in pairs:
        forest.union(source_node(pair), target_node(pair))
    groups: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        groups[forest.find(source_node(pair))].append(pair)
    return dict(groups)


def unit_hash(key: str, seed: int) -> float:
    """A number in [0, 1) from a key and a seed, the same on every machine and Python run."""
    digest = hashlib.sha256(f"{seed}\t{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_splits(pairs: list[Pair], rules: SplitRules = SplitRules()) -> dict[str, list[Pair]]:
    """`{"train": [...], "dev": [...], "test": [...]}`, each sorted by domain, language and id."""
    splits: dict[str, list[Pair]] = {split: [] for split in SPLITS}
    for root, members in components(pairs).items():
        draw = unit_hash(root, rules.seed)
        if len(members) > rules.max_eval_component:
            split = "train"
        elif draw < rules.test_fraction:
            split = "test"
        elif draw < rules.test_fraction + rules.dev_fraction:
            split = "dev"
        else:
            split = "train"
        splits[split].extend(members)
    return {split: sorted(members, key=lambda p: (p.domain, p.lang, p.id)) for split, members in splits.items()}


def crossing_sentences(splits: dict[str, list[Pair]]) -> set[str]:
    """The normalised sentences (`en\\t...` or `{lang}\\t...`) found in more than one split; empty when the splits
    are disjoint."""
    seen: dict[str, str] = {}
    crossing = set()
    for split, members in splits.items():
        for pair in members:
            for node in (source_node(pair), target_node(pair)):
                if seen.setdefault(node, split) != split:
                    crossing.add(node)
    return crossing
