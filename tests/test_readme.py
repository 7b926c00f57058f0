"""The README's examples run as written, offline, in a temporary folder, and do what their comments say: the quick
start (build, route a mixed batch, beam search, save, reload with a default task), loading with remote code through
the Auto classes, LoRA through PEFT down to a stock model per task, and the decoder alone as a causal LM.

The README's Hub block is not run: it pushes to and downloads from the Hub. Its parts are tested offline in
`test_hub.py` (push and card), `test_pipelines.py` (pipelines with remote code) and `test_conversion.py` (export and
upcycling).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import MarianForCausalLM, MarianMTModel

from doc_examples import python_blocks, run_blocks

README = Path(__file__).resolve().parents[1] / "README.md"

# One line of each block run here: a block is found by what it says, not by where it stands in the README.
QUICK_START = "model = HeadSelMarianMTModel(config)"
REMOTE_CODE = 'AutoModelForSeq2SeqLM.from_pretrained("my-model", trust_remote_code=True'
PEFT = "get_peft_model(model"
CAUSAL_LM = "lm = HeadSelMarianForCausalLM(config)"


def readme_block(marker: str) -> str:
    blocks = [block for block in python_blocks(README.read_text(encoding="utf-8")) if marker in block]
    assert len(blocks) == 1, f"the README should have one python block holding {marker!r}, found {len(blocks)}"
    return blocks[0]


def run(block: str, namespace: dict) -> dict:
    return run_blocks([block], namespace, str(README))


def test_python_blocks_finds_indented_blocks():
    text = "a\n```python\nx = 1\n```\n- item\n\n  ```python\n  y = 2\n  ```\n```bash\nls\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = 2\n"]


@pytest.fixture
def quick_start(tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    return run(readme_block(QUICK_START), {})


def test_quick_start_runs_as_written(quick_start):
    model = quick_start["model"]
    # "loss = cross-entropy + head_selection_kl_weight * KL" with the example's weight 0
    assert torch.isfinite(quick_start["out"].loss) and quick_start["out"].head_selection_kl.ndim == 0
    assert quick_start["tokens"].shape[0] == 2
    # the comment on selected_heads(): tasks x layers x H per component
    assert {name: tuple(heads.shape) for name, heads in model.selected_heads().items()} == {
        "encoder_self": (2, 6, 4), "decoder_self": (3, 6, 4)}
    # '"fr" becomes the decoder default' (and not the encoder's, which has no "fr")
    assert model.config.default_decoder_task == "fr"
    assert model.config.default_encoder_task is None
    # "also writes the modeling code"
    assert list(Path("my-model").glob("modeling_*.py"))


def test_remote_code_and_peft_blocks_run_as_written(quick_start):
    namespace = run(readme_block(REMOTE_CODE), quick_start)
    assert type(namespace["encoder_decoder"]).__name__ == "HeadSelMarianModel"
    assert namespace["model"].config.default_decoder_task == "fr"

    pytest.importorskip("peft")
    namespace = run(readme_block(PEFT), namespace)
    merged = namespace["merged"]
    # "a HeadSelMarianMTModel again, plain nn.Linear projections"
    assert type(merged).__name__ == "HeadSelMarianMTModel"
    assert all(type(layer.self_attn.q_proj) is torch.nn.Linear for layer in merged.model.decoder.layers)
    # "and on to a stock MarianMTModel per task"
    assert type(namespace["stock_de"]) is MarianMTModel


def test_causal_lm_block_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    namespace = run(readme_block(CAUSAL_LM), {})
    # "one task per example": 2 prompts of 2 tokens, 20 new tokens at most
    assert namespace["lm_tokens"].shape[0] == 2 and namespace["lm_tokens"].shape[1] <= 22
    # "a stock MarianForCausalLM"
    assert type(namespace["lm"].export_task_model("fr")) is MarianForCausalLM
