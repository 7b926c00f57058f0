#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Export the tasks of a head-selection model as stock Transformers models: `headsel-export-tasks MODEL OUT [...]`.

    python training/export_task_models.py outputs/mt outputs/mt-exported
    python training/export_task_models.py outputs/st outputs/st-exported --directions en-de en-fr

The command: `headsel_recipes.cli.export_task_models`.
"""

from headsel_recipes.cli.export_task_models import export_targets, main  # noqa: F401  (export_targets: for importers)

if __name__ == "__main__":
    main()
