# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`python -m offline_corpus ...` (from `training/`): the corpus builder's command line."""

from .cli import main

main()
