#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Speech translation (ST) with attention head selection (Gong et al., 2021) on Speech2Text.

The target is the translation (`--translation_column`, default `translation`; `tgt_text` in fairseq manifests).
With `--task_type lang` the encoder is keyed by the source language and the decoder by the target language, so
directions never seen in training (zero-shot, paper section 4.3.1) still route to heads both sides have learned;
with `--task_type domain` both sides are keyed by the corpus (section 4.3.2). As in the paper, the encoder can start
from an ASR model (`--init_encoder_from`). Scores are BLEU per direction (or domain) and their mean.

    python training/run_st.py \
        --manifest_dir data/mtedx --train_file train_es_en_tedx,train_fr_en_tedx,train_es_fr_tedx \
        --validation_file valid_es_en_tedx,valid_fr_en_tedx --output_dir outputs/st \
        --init_encoder_from outputs/asr --do_train --do_eval --sampling_alpha 0.5 ...

All flags: `python training/run_st.py --help` and training/README.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from headsel_recipes import RecipeResult, RecipeTask, run  # noqa: E402

TASK = RecipeTask(name="st", speech=True, target_field="translation", metric="bleu")


def main(args: list[str] | None = None) -> RecipeResult:
    """Run the speech translation recipe with command-line `args` (default `sys.argv[1:]`)."""
    return run(TASK, args)


if __name__ == "__main__":
    main()
