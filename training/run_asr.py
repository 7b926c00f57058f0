#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Speech recognition (ASR) with attention head selection (Gong et al., 2021) on Speech2Text.

The target is the transcript (`--text_column`, default `text`; `tgt_text` in fairseq manifests). With
`--task_type lang` the encoder and the decoder are both keyed by the spoken language (multilingual ASR, paper
section 4.2.1); with `--task_type domain` by the corpus (multi-domain ASR, section 4.2.2). Scores are WER per
language (or domain), lower-cased with punctuation removed, and their mean.

    python training/run_asr.py \
        --train_file data/train.jsonl --validation_file data/dev.jsonl --test_file data/test.jsonl \
        --output_dir outputs/asr --do_train --do_eval --do_predict \
        --config_overrides "encoder_layers=12,decoder_layers=6" --head_selection_strategy group \
        --max_steps 100000 --learning_rate 5e-4 --warmup_steps 10000 --average_last_n 10 --save_steps 2000

    torchrun --nproc_per_node 8 training/run_asr.py asr.yaml   # the same flags as keys of one YAML/JSON file

All flags: `python training/run_asr.py --help` and training/README.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from headsel_recipes import RecipeResult, RecipeTask, run  # noqa: E402

TASK = RecipeTask(name="asr", speech=True, target_field="text", metric="wer", same_language=True)


def main(args: list[str] | None = None) -> RecipeResult:
    """Run the ASR recipe with command-line `args` (default `sys.argv[1:]`)."""
    return run(TASK, args)


if __name__ == "__main__":
    main()
