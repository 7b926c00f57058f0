# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Saved model folders: what makes a head-selection folder self-contained for `trust_remote_code=True` loading.

* [`remote_code_files`]: the flat modules a folder needs (found through their single-dot relative imports, as
  Transformers finds them).
* [`prepare_model_folder`]: copies those modules (the family's configuration and modeling, the shared core they
  import, `conversion.py`, `pipeline_headsel.py`) and sets the `custom_pipelines` entry of `config.json` that makes
  `pipeline("translation" | "automatic-speech-recognition", model=..., trust_remote_code=True)` work.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from .families import HEADSEL_MODEL_TYPES, family_of

PACKAGE_DIR = Path(__file__).resolve().parent
# Remote-code modules every head-selection folder carries, on top of its family's configuration and modeling modules
# (and what they import).
SHARED_REMOTE_CODE = ("conversion.py", "pipeline_headsel.py")
_RELATIVE_IMPORT = re.compile(r"^\s*from\s+\.(\w+)\s+import", flags=re.MULTILINE)


def read_config(folder: str | Path) -> dict:
    """The `config.json` of a model folder; `ValueError` if there is none."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise ValueError(f"{str(folder)!r} is not a saved model folder: it has no config.json")
    return json.loads(path.read_text(encoding="utf-8"))


def remote_code_files(modules: tuple[str, ...]) -> list[str]:
    """`modules` and every package module they import with single-dot relative imports, recursively (the files
    Transformers needs next to the model, found the way `transformers.dynamic_module_utils` finds them)."""
    found, todo = [], list(modules)
    while todo:
        name = todo.pop(0)
        if name in found:
            continue
        found.append(name)
        source = (PACKAGE_DIR / name).read_text(encoding="utf-8")
        todo += [f"{module}.py" for module in _RELATIVE_IMPORT.findall(source)]
    return found


def prepare_model_folder(folder: str | Path) -> list[str]:
    """Make a saved head-selection folder complete for `trust_remote_code=True` loading and pipelines.

    Copies the remote-code modules it lacks (the family's configuration and modeling modules, `conversion.py`,
    `pipeline_headsel.py` and the modules they import, such as `modeling_head_selection.py`) from this package, and
    sets `custom_pipelines` in `config.json` (the
    `translation` pipeline for Marian, `automatic-speech-recognition` for Speech2Text; none for a decoder-only causal
    LM, which the stock `text-generation` pipeline serves). A stock folder (an exported model) is left as it is.
    Returns the names of the files it wrote.
    """
    folder = Path(folder)
    config = read_config(folder)
    model_type = config.get("model_type")
    if model_type not in HEADSEL_MODEL_TYPES:
        return []
    family = family_of(model_type)
    written = []
    for name in remote_code_files((*family.modules, *SHARED_REMOTE_CODE)):
        if not (folder / name).is_file():
            shutil.copyfile(PACKAGE_DIR / name, folder / name)
            written.append(name)
    pipelines = {} if family.holds_causal_lm(config) else family.custom_pipelines
    if (config.get("custom_pipelines") or {}) != pipelines:
        if pipelines:
            config["custom_pipelines"] = pipelines
        else:  # a translation folder's entry a causal LM's config carried over
            config.pop("custom_pipelines")
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append("config.json")
    return written

__all__ = ["SHARED_REMOTE_CODE", "prepare_model_folder", "read_config", "remote_code_files"]
