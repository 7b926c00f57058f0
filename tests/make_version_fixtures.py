"""Writes `tests/fixtures/saved_by_transformers/<installed transformers>/<family>/`: a tiny head-selection model of
each family (every component selecting, mixed tasks) saved by the installed transformers (its config and weights; not
the remote-code modules), with inputs and the outputs the model gives here (`expected.safetensors`).
`test_compat.py` loads every such folder on the installed transformers and expects the same outputs, so that a
model saved on one supported version keeps working on another. Run it in an environment of the version to cover:

    .venv-oldest/bin/python tests/make_version_fixtures.py   # the oldest supported (make test-oldest makes it)
    .venv/bin/python tests/make_version_fixtures.py          # the newest

A release pip cannot resolve here yet (5.25.0 wanted `kernels>=0.19.1`, not on the registry): `make setup
VENV=/tmp/venv-new`, then `pip install --no-deps` the release into it, and run this there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file

from conftest import ALL_COMPONENTS, FAMILIES, MIXED

FIXTURES = Path(__file__).parent / "fixtures" / "saved_by_transformers"
#: What the saved models generate from their inputs (greedy, a fixed length).
GENERATION = dict(do_sample=False, max_new_tokens=5, min_new_tokens=5)


def expected_outputs(model, family) -> dict[str, torch.Tensor]:
    """The inputs (`input.*`) and what `model` computes from them: mixed-task logits and greedy tokens."""
    inputs = {**family.inputs(), **MIXED}
    decoder_input_ids = family.decoder_input_ids()
    with torch.no_grad():
        logits = model(**inputs, decoder_input_ids=decoder_input_ids).logits
    generated = model.generate(**inputs, **GENERATION)
    return {**{f"input.{name}": value for name, value in inputs.items()},
            "input.decoder_input_ids": decoder_input_ids, "logits": logits, "generated": generated}


def main() -> None:
    torch.set_num_threads(1)  # as the tests run
    for name, family in FAMILIES.items():
        folder = FIXTURES / transformers.__version__ / name
        shutil.rmtree(folder, ignore_errors=True)
        model = family.model(head_selection_components=list(ALL_COMPONENTS))
        model.save_pretrained(folder)
        for module in folder.glob("*.py"):  # the remote-code copies: tested by test_remote_code.py
            module.unlink()
        save_file({key: value.contiguous() for key, value in expected_outputs(model, family).items()},
                  folder / "expected.safetensors")
        print(folder)


if __name__ == "__main__":
    main()
