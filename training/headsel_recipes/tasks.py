# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The recipes' tasks: what each of `headsel-train asr|st|mt` trains and how it is scored.

This is the one registry of recipes: the command line ([`headsel_recipes.cli.train`]), the experiment runner and the
demo look tasks up here.

* `asr`, speech recognition on Speech2Text. The target is the transcript (`--text_column`, default `text`; `tgt_text`
  in fairseq manifests). With `--task_type lang` the encoder and the decoder are both keyed by the spoken language
  (multilingual ASR, paper section 4.2.1); with `--task_type domain` by the corpus (multi-domain ASR, section 4.2.2).
  Scores are WER per language (or domain), lower-cased with punctuation removed, and their mean.
* `st`, speech translation on Speech2Text. The target is the translation (`--translation_column`, default
  `translation`). With `--task_type lang` the encoder is keyed by the source language and the decoder by the target
  language, so directions never seen in training (zero-shot, section 4.3.1) still route to heads both sides have
  learned; with `--task_type domain` both sides are keyed by the corpus (section 4.3.2). The encoder can start from
  an ASR model (`--init_encoder_from`). Scores are BLEU per direction (or domain) and their mean.
* `mt`, text translation on Marian. Sources and targets come from `--source_column` / `--target_column` (default
  `source` / `target`; `col.key` reads a dict column such as WMT's `translation.de`). With `--task_type lang` the
  encoder is keyed by the source language and the decoder by the target language (the paper's many-to-one and
  one-to-many WMT setups, section 4.1); with `--task_type domain` both sides by the domain. Scores are sacreBLEU per
  direction (or domain) and their mean.
"""

from __future__ import annotations

from .arguments import RecipeTask

ASR = RecipeTask(name="asr", speech=True, target_field="text", metric="wer", same_language=True)
ST = RecipeTask(name="st", speech=True, target_field="translation", metric="bleu")
MT = RecipeTask(name="mt", speech=False, target_field="target", metric="bleu")

#: Every recipe by name, in the order the command line lists them.
TASKS: dict[str, RecipeTask] = {task.name: task for task in (ASR, ST, MT)}
