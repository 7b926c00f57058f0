#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Build the offline multilingual, multi-domain corpus: `headsel-build-corpus [...]`.

    python training/build_corpus.py --output_dir data/offline_corpus --speech --max_speech_per_task 100

See `training/offline_corpus/__init__.py` and `python training/build_corpus.py --help`.
"""

from offline_corpus.cli import main

if __name__ == "__main__":
    main()
