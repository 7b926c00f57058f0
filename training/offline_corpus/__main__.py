# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`python -m offline_corpus ...`: the corpus builder's command line (also `headsel-build-corpus`)."""

from .cli import main

main()
