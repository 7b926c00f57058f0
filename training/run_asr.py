#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Speech recognition (ASR) with attention head selection (Gong et al., 2021) on Speech2Text: `headsel-train asr ...`.

    python training/run_asr.py FLAGS...        # the same as: headsel-train asr FLAGS...
    python training/run_asr.py --help          # every flag

The task: `headsel_recipes.tasks`; the command line: `headsel_recipes.cli.train`; the flags: training/README.md.
"""

import sys

from headsel_recipes.cli.train import main

if __name__ == "__main__":
    main(["asr", *sys.argv[1:]])
