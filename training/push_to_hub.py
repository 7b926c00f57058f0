#!/usr/bin/env python
# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Upload a saved head-selection model folder to the Hugging Face Hub: `headsel-push-to-hub FOLDER REPO_ID [...]`.

    python training/push_to_hub.py outputs/mt me/mt-headsel --dataset_name "Europarl-ST" --heatmap outputs/mt/heads.png

The command: `headsel_recipes.cli.push_to_hub`.
"""

from headsel_recipes.cli.push_to_hub import main

if __name__ == "__main__":
    main()
