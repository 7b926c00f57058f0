#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Train and score a table of systems x seeds with one recipe: `headsel-experiment EXPERIMENT.yaml [...]`.

    python training/run_experiment.py training/experiments/offline/table2_asr.yaml [--tables_only | --dry_run]

The command line: `headsel_recipes.cli.experiment`; the file format: `headsel_recipes.experiment.spec`.
"""

from headsel_recipes.cli.experiment import main

if __name__ == "__main__":
    main()
