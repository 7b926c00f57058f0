#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""`make demo`: head selection against the shared model on one-to-many translation: `headsel-demo [...]`.

    python training/demo.py --output_dir outputs/demo
    python training/demo.py --make_checkpoint        # retrain the shipped checkpoint (about 2 h 15 min on 2 cores)

The demo: `headsel_recipes.demo`; the command line: `headsel_recipes.cli.demo`.
"""

from headsel_recipes.cli.demo import main

if __name__ == "__main__":
    main()
