# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The hf-headsel training recipes: `headsel-train asr|st|mt`, `headsel-experiment`, `headsel-demo` (see `cli`).

Modules: `tasks` (the recipes: what each trains and scores), `arguments` (flags), `data` (loading any source into one
standard form), `audio` (reading, resampling, features, SpecAugment), `tokenizer` (sentencepiece training),
`preprocess` (model inputs, skip counting), `collator`, `sampling` (temperature-based task sampling), `modeling`
(model building, encoder init, checkpoint averaging), `trainer` (loss, logging, temperature schedule), `metrics`
(WER / BLEU per task), `results_keys` (the results files and their score keys), `publishing` (card and upload at
the end of a run), `recipe` (the whole run), `experiment` (systems x seeds and the paper's tables), `demo` (`make
demo`) and `cli` (the command lines).

The names below are imported on first use: importing the package (as every console script does) loads neither
torch nor transformers, so a command can set environment variables they read when they load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .arguments import RecipeTask, parse_arguments
    from .recipe import RecipeResult, run

_EXPORTS = {"RecipeTask": "arguments", "parse_arguments": "arguments", "RecipeResult": "recipe", "run": "recipe"}

__all__ = ["RecipeResult", "RecipeTask", "parse_arguments", "run"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
