#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Text translation (MT) with attention head selection (Gong et al., 2021) on Marian.

Sources and targets come from `--source_column` / `--target_column` (default `source` / `target`; `col.key` reads a
dict column such as WMT's `translation.de`). With `--task_type lang` the encoder is keyed by the source language
and the decoder by the target language (the paper's many-to-one and one-to-many WMT setups, section 4.1); with
`--task_type domain` both sides by the domain. Scores are sacreBLEU per direction (or domain) and their mean.

    python training/run_mt.py \
        --train_file data/train.jsonl --validation_file data/dev.jsonl --output_dir outputs/mt \
        --do_train --do_eval --config_overrides "d_model=512,encoder_layers=6,decoder_layers=6" \
        --learning_rate 7e-4 --sampling_alpha 0.2 ...

All flags: `python training/run_mt.py --help` and training/README.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from headsel_recipes import RecipeResult, RecipeTask, run  # noqa: E402

TASK = RecipeTask(name="mt", speech=False, target_field="target", metric="bleu")


def main(args: list[str] | None = None) -> RecipeResult:
    """Run the text translation recipe with command-line `args` (default `sys.argv[1:]`)."""
    return run(TASK, args)


if __name__ == "__main__":
    main()
