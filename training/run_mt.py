#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Text translation (MT) with attention head selection (Gong et al., 2021) on Marian: `headsel-train mt ...`.

    python training/run_mt.py FLAGS...        # the same as: headsel-train mt FLAGS...
    python training/run_mt.py --help          # every flag

The task: `headsel_recipes.tasks`; the command line: `headsel_recipes.cli.train`; the flags: training/README.md.
"""

import sys

from headsel_recipes.cli.train import main

if __name__ == "__main__":
    main(["mt", *sys.argv[1:]])
