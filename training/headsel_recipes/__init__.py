# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The shared library of the hf-headsel training recipes (`training/run_asr.py`, `run_st.py`, `run_mt.py`).

Modules: `arguments` (flags), `data` (loading any source into one standard form), `audio` (reading, resampling,
features, SpecAugment), `tokenizer` (sentencepiece training), `preprocess` (model inputs, skip counting), `collator`,
`sampling` (temperature-based task sampling), `modeling` (model building, encoder init, checkpoint averaging),
`trainer` (loss, logging, temperature schedule), `metrics` (WER / BLEU per task) and `recipe` (the whole run).
"""

from .arguments import RecipeTask, parse_arguments
from .recipe import RecipeResult, run

__all__ = ["RecipeResult", "RecipeTask", "parse_arguments", "run"]
