"""Shared fixtures: tiny configs and models of both head-selection families (Marian and Speech2Text).

Most behaviour tests take the `family` fixture, which runs them once per family. A `Family` knows its config and
model classes (head-selection and stock), its Auto class, and how to build a small batch of inputs (with padding in
the last example), decoder inputs and labels.
"""

from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Transformers 5.25+ kernelizes every `from_pretrained` with kernels fetched from the Hub: never in the tests.
os.environ.setdefault("USE_HUB_KERNELS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoModelForSpeechSeq2Seq,
    CompileConfig,
    MarianConfig,
    MarianModel,
    MarianMTModel,
    Speech2TextConfig,
    Speech2TextForConditionalGeneration,
    Speech2TextModel,
)
from transformers.cache_utils import Cache
from transformers.utils import ModelOutput
from transformers.utils import logging as hf_logging

from hf_headsel import (
    HeadSelMarianConfig,
    HeadSelMarianForCausalLM,
    HeadSelMarianModel,
    HeadSelMarianMTModel,
    HeadSelSpeech2TextConfig,
    HeadSelSpeech2TextForConditionalGeneration,
    HeadSelSpeech2TextModel,
)
from hf_headsel.attention import PROJECTIONS

hf_logging.disable_progress_bar()
torch.set_num_threads(1)

SEED = 1234
ENCODER_TASKS = ["en", "de"]
DECODER_TASKS = ["de", "fr", "it"]
HEADS = 4
LAYERS = 2
D_MODEL = 16
HEAD_DIM = D_MODEL // HEADS
VOCAB = 40

# Stock keywords shared by both families: tiny, no dropout (training-mode tests see only the Gumbel noise), and a
# large init so that random models produce varied tokens when generating.
COMMON_KWARGS = dict(
    vocab_size=VOCAB,
    d_model=D_MODEL,
    encoder_layers=LAYERS,
    decoder_layers=LAYERS,
    encoder_attention_heads=HEADS,
    decoder_attention_heads=HEADS,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    dropout=0.0,
    attention_dropout=0.0,
    activation_dropout=0.0,
    encoder_layerdrop=0.0,
    decoder_layerdrop=0.0,
    init_std=0.3,
)

MARIAN_KWARGS = dict(
    COMMON_KWARGS,
    max_position_embeddings=64,
    pad_token_id=VOCAB - 1,
    eos_token_id=0,
    forced_eos_token_id=0,
    decoder_start_token_id=VOCAB - 1,
)

SPEECH_KWARGS = dict(
    COMMON_KWARGS,
    input_feat_per_channel=8,
    input_channels=1,
    conv_channels=16,
    conv_kernel_sizes=(5, 5),
    num_conv_layers=2,
    max_source_positions=32,
    max_target_positions=32,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
)

# Head-selection keywords every test config starts from (a test overrides what it needs).
HEADSEL_DEFAULTS = dict(encoder_tasks=ENCODER_TASKS, decoder_tasks=DECODER_TASKS)

ALL_COMPONENTS = ["encoder_self", "decoder_self", "decoder_cross"]


def seed_everything(seed: int = SEED) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class Family:
    """One model family: its classes and how to build tiny configs, models and inputs."""

    name: str
    config_class: type
    model_class: type
    stock_config_class: type
    stock_model_class: type
    auto_model_class: type
    base_model_class: type  # the head-selection base model (no LM head), registered with AutoModel
    stock_base_model_class: type
    base_kwargs: dict
    main_input_name: str
    files: tuple = field(default=())  # the flat modules save_pretrained must write
    causal_lm_class: type | None = None  # the decoder alone (`AutoModelForCausalLM`), where the stock family has one

    # ---- configs and models -----------------------------------------------------------------------------------

    def config(self, **overrides):
        """A head-selection config: tiny stock keywords, two encoder and three decoder tasks, then `overrides`."""
        return self.config_class(**{**self.base_kwargs, **HEADSEL_DEFAULTS, **overrides})

    def stock_config(self, **overrides):
        return self.stock_config_class(**{**self.base_kwargs, **overrides})

    def model(self, seed: int = SEED, config=None, **overrides):
        """A seeded head-selection model in eval mode."""
        config = self.config(**overrides) if config is None else config
        seed_everything(seed)
        return self.model_class(config).eval()

    def stock_model(self, seed: int = SEED, **overrides):
        seed_everything(seed)
        return self.stock_model_class(self.stock_config(**overrides)).eval()

    # ---- inputs -----------------------------------------------------------------------------------------------

    @property
    def pad_token_id(self) -> int:
        return self.base_kwargs["pad_token_id"]

    @property
    def decoder_start_token_id(self) -> int:
        return self.base_kwargs["decoder_start_token_id"]

    def special_ids(self) -> set[int]:
        kw = self.base_kwargs
        return {kw["pad_token_id"], kw["eos_token_id"], kw["decoder_start_token_id"], kw.get("bos_token_id", -1)}

    def random_tokens(self, generator: torch.Generator, shape) -> torch.LongTensor:
        """Ordinary tokens (never pad / eos / bos / start)."""
        ordinary = torch.tensor(sorted(set(range(VOCAB)) - self.special_ids()))
        return ordinary[torch.randint(len(ordinary), shape, generator=generator)]

    def inputs(self, batch_size: int = 4, seed: int = SEED) -> dict:
        """Encoder inputs and their attention mask; the last example is padded."""
        generator = torch.Generator().manual_seed(seed)
        if self.main_input_name == "input_ids":
            length = 7
            input_ids = self.random_tokens(generator, (batch_size, length))
            input_ids[:, -1] = self.base_kwargs["eos_token_id"]
            attention_mask = torch.ones(batch_size, length, dtype=torch.long)
            # last example: 4 tokens then eos then padding
            input_ids[-1, 4] = self.base_kwargs["eos_token_id"]
            input_ids[-1, 5:] = self.pad_token_id
            attention_mask[-1, 5:] = 0
            return {"input_ids": input_ids, "attention_mask": attention_mask}
        frames, features = 24, self.base_kwargs["input_feat_per_channel"]
        input_features = torch.randn(batch_size, frames, features, generator=generator)
        attention_mask = torch.ones(batch_size, frames, dtype=torch.long)
        input_features[-1, 14:] = 0.0
        attention_mask[-1, 14:] = 0
        return {"input_features": input_features, "attention_mask": attention_mask}

    def decoder_input_ids(self, batch_size: int = 4, length: int = 5, seed: int = SEED + 1) -> torch.LongTensor:
        generator = torch.Generator().manual_seed(seed)
        ids = self.random_tokens(generator, (batch_size, length))
        ids[:, 0] = self.decoder_start_token_id
        return ids

    def labels(self, batch_size: int = 4, length: int = 5, seed: int = SEED + 2, pad_last: int = 2) -> torch.LongTensor:
        """Target tokens; the last example's final `pad_last` positions are -100 (ignored)."""
        generator = torch.Generator().manual_seed(seed)
        labels = self.random_tokens(generator, (batch_size, length))
        if pad_last:
            labels[-1, -pad_last:] = -100
        return labels


# The shared head-selection modules every saved model carries next to its family's configuration and modeling.
CORE_FILES = (
    "adapters.py",
    "attention.py",
    "configuration_head_selection.py",
    "conversion.py",
    "modeling_head_selection.py",
    "routing.py",
    "selection.py",
)

MARIAN = Family(
    name="marian",
    config_class=HeadSelMarianConfig,
    model_class=HeadSelMarianMTModel,
    stock_config_class=MarianConfig,
    stock_model_class=MarianMTModel,
    auto_model_class=AutoModelForSeq2SeqLM,
    base_model_class=HeadSelMarianModel,
    stock_base_model_class=MarianModel,
    base_kwargs=MARIAN_KWARGS,
    main_input_name="input_ids",
    files=("modeling_head_selection.py", "configuration_headsel_marian.py", "modeling_headsel_marian.py",
           "modeling_head_selection_causal_lm.py"),
    causal_lm_class=HeadSelMarianForCausalLM,
)

SPEECH2TEXT = Family(
    name="speech_to_text",
    config_class=HeadSelSpeech2TextConfig,
    model_class=HeadSelSpeech2TextForConditionalGeneration,
    stock_config_class=Speech2TextConfig,
    stock_model_class=Speech2TextForConditionalGeneration,
    auto_model_class=AutoModelForSpeechSeq2Seq,
    base_model_class=HeadSelSpeech2TextModel,
    stock_base_model_class=Speech2TextModel,
    base_kwargs=SPEECH_KWARGS,
    main_input_name="input_features",
    files=(
        "modeling_head_selection.py",
        "configuration_headsel_speech_to_text.py",
        "modeling_headsel_speech_to_text.py",
    ),
)

FAMILIES = {family.name: family for family in (MARIAN, SPEECH2TEXT)}


@pytest.fixture(params=list(FAMILIES), ids=list(FAMILIES))
def family(request) -> Family:
    return FAMILIES[request.param]


@pytest.fixture
def marian() -> Family:
    return MARIAN


@pytest.fixture
def speech2text() -> Family:
    return SPEECH2TEXT


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same random state."""
    seed_everything()
    yield


# ---- helpers shared by the test modules -------------------------------------------------------------------------


def randomize_selector_logits(model, seed: int = SEED, scale: float = 3.0) -> None:
    """Spread `phi` (randn * scale) so that different tasks almost surely select different heads."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for selector in model.head_selection.values():
            if selector.logits is not None:
                selector.logits.copy_(torch.randn(selector.logits.shape, generator=generator) * scale)


def selecting_attentions(model):
    """`(component, layer index, attention module)` of every head-selection attention layer of a model."""
    found = []
    for component in model.head_selection:
        layers = model.model.encoder.layers if component == "encoder_self" else model.model.decoder.layers
        name = "encoder_attn" if component == "decoder_cross" else "self_attn"
        for index, layer in enumerate(layers):
            found.append((component, index, getattr(layer, name)))
    return found


def component_task(config, component: str, encoder_task: int, decoder_task: int) -> int:
    """The row of `phi` (the task) that keys `component` for an example, computed from the documented rules."""
    if component == "encoder_self":
        return encoder_task
    if component == "decoder_self":
        return decoder_task
    key = config.cross_attention_task_key
    if key == "decoder":
        return decoder_task
    if key == "encoder":
        return encoder_task
    return encoder_task * len(config.decoder_tasks) + decoder_task


def extract_stock_model(family: Family, model, encoder_task: int, decoder_task: int):
    """The stock model (H heads everywhere) that the head-selection model is for one (encoder, decoder) task pair:
    the query/key/value rows of every selecting layer are those of `model.selected_heads()`, slot by slot."""
    stock = family.stock_model_class(family.stock_config(attn_implementation="eager")).eval()
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("head_selection.")}
    selected = model.selected_heads()
    for component, layer, _ in selecting_attentions(model):
        heads = selected[component][component_task(model.config, component, encoder_task, decoder_task), layer]
        rows = (heads[:, None] * HEAD_DIM + torch.arange(HEAD_DIM)).flatten()
        side = "encoder" if component == "encoder_self" else "decoder"
        name = "encoder_attn" if component == "decoder_cross" else "self_attn"
        prefix = f"model.{side}.layers.{layer}.{name}"
        for proj in PROJECTIONS:
            for kind in ("weight", "bias"):
                key = f"{prefix}.{proj}.{kind}"
                if key in state:
                    state[key] = state[key].index_select(0, rows)
    stock.load_state_dict(state, strict=True)
    return stock


def forward_logits(model, inputs: dict, decoder_input_ids, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs, decoder_input_ids=decoder_input_ids, **kwargs).logits


def take(inputs: dict, index) -> dict:
    """Examples `index` (an int or a slice) of a batch of inputs, keeping the batch dimension."""
    if isinstance(index, int):
        index = slice(index, index + 1)
    return {key: value[index] for key, value in inputs.items()}


#: The start of a script run by [`run_without_hf_headsel`]: the package cannot be imported (it is installed, editable,
#: in the environment running the tests), so what loads runs from the remote-code modules only.
WITHOUT_HF_HEADSEL = textwrap.dedent(
    """
    import importlib.abc
    import sys


    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_headsel" or name.startswith("hf_headsel."):
                raise ImportError(f"{name} is blocked in this test")
            return None


    sys.meta_path.insert(0, Blocker())
    try:
        import hf_headsel  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("hf_headsel is importable: the test would prove nothing")
    """
)


def run_without_hf_headsel(script: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `script` after [`WITHOUT_HF_HEADSEL`] in `python -I` (no user site, no PYTHONPATH, no script directory on
    the path), offline, with a fresh remote-code modules cache under `tmp_path`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HOME=str(tmp_path / "hf_home"),
               TOKENIZERS_PARALLELISM="false")
    return subprocess.run([sys.executable, "-I", "-c", WITHOUT_HF_HEADSEL + textwrap.dedent(script), *args], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.fixture
def hub(monkeypatch):
    """The recording Hub (`recording_hub.py`), with huggingface_hub allowed to reach it (offline mode off, Xet off)."""
    from huggingface_hub import constants as hub_constants
    from recording_hub import RecordingHub

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "HF_HUB_DISABLE_XET", True)
    with RecordingHub() as server:
        yield server


@pytest.fixture
def hub_cache(tmp_path) -> Callable:
    """`save(model, repo_id)`: `model` saved into a cache folder of its own as the Hub client lays out a downloaded
    repository; returns that folder, for `cache_dir=` (read offline: nothing is downloaded)."""
    cache = tmp_path / "hub_cache"

    def save(model, repo_id: str) -> Path:
        repo = cache / f"models--{repo_id.replace('/', '--')}"
        model.save_pretrained(repo / "snapshots" / ("0" * 40))
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
        return cache

    return save


# ---------------------------------------------------------------------------------------------------------------
# Mixed-task batches: shared by the modeling, attention and routing tests
# ---------------------------------------------------------------------------------------------------------------

ENCODER_IDS = torch.tensor([0, 1, 1, 0])
DECODER_IDS = torch.tensor([0, 2, 1, 2])
MIXED = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
#: One encoder task and one decoder task for the whole batch
SINGLE_TASK = dict(encoder_task_ids=torch.tensor([1, 1, 1, 1]), decoder_task_ids=torch.tensor([2, 2, 2, 2]))

# Every strategy with selection in all three components (task_specific: the cross-attention is keyed by the decoder
# task, like decoder_self, so both decoder components need the same H' = T_dec * H).
STRATEGY_CONFIGS = {
    "group": dict(head_selection_strategy="group", head_selection_components=ALL_COMPONENTS),
    "subset": dict(
        head_selection_strategy="subset",
        head_selection_components=ALL_COMPONENTS,
        total_encoder_attention_heads=7,
        total_decoder_attention_heads=10,
    ),
    "task_specific": dict(head_selection_strategy="task_specific", head_selection_components=ALL_COMPONENTS),
}


def projections_used(call) -> set[tuple[str, int]]:
    """`{(projection, time)}`: how the head-selection layers projected during `call()` (grouped, gathered or batched)
    and the length of what they projected. Only the spies are undone afterwards, not the test's own patches."""
    from hf_headsel.attention import HeadSelectionAttentionMixin

    used = set()
    with pytest.MonkeyPatch.context() as patch:
        for name in ("grouped", "gathered", "batched"):
            original = getattr(HeadSelectionAttentionMixin, f"_project_{name}")

            def spy(self, x, *args, _original=original, _name=name, **kwargs):
                used.add((_name, x.shape[1]))
                return _original(self, x, *args, **kwargs)

            patch.setattr(HeadSelectionAttentionMixin, f"_project_{name}", spy)
        call()
    return used


def mixed_model(family, strategy: str = "group", **overrides):
    """A model selecting in all three components, with `phi` spread so that tasks select different heads."""
    model = family.model(**{**STRATEGY_CONFIGS[strategy], **overrides})
    randomize_selector_logits(model)
    return model


@pytest.fixture
def projection_mode(monkeypatch):
    """Set `mixed_batch_projection` on every head-selection attention class for one test."""
    from hf_headsel.attention import HeadSelectionAttentionMixin

    def set_mode(mode: str) -> None:
        monkeypatch.setattr(HeadSelectionAttentionMixin, "mixed_batch_projection", mode)

    return set_mode


def assert_same(actual, expected, path: str = "output") -> None:
    """Equal structure and values: tensors, tuples, model outputs and caches (their keys and values)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), path
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, Cache):
        assert type(actual) is type(expected), path
        if hasattr(expected, "self_attention_cache"):
            assert_same(actual.self_attention_cache, expected.self_attention_cache, f"{path}.self")
            assert_same(actual.cross_attention_cache, expected.cross_attention_cache, f"{path}.cross")
        else:
            assert len(actual.layers) == len(expected.layers), path
            for index, (a, e) in enumerate(zip(actual.layers, expected.layers)):
                assert_same(a.keys, e.keys, f"{path}.layers[{index}].keys")
                assert_same(a.values, e.values, f"{path}.layers[{index}].values")
    elif isinstance(expected, (ModelOutput, dict)):
        assert list(actual.keys()) == list(expected.keys()), path
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), path
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{index}]")
    else:
        assert actual == expected, path


@pytest.fixture
def fresh_dynamo():
    """Compile tests start from an empty dynamo cache: every test builds new models, and the shared `forward` code
    objects would otherwise reach dynamo's recompilation limit."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compile_config() -> CompileConfig:
    """What `generate` compiles its decoding step with in the tests: the `eager` dynamo backend (what fails is
    dynamo's tracing, and it keeps the tests fast), on the CPU too."""
    config = CompileConfig(fullgraph=True, backend="eager", mode=None)
    config._compile_all_devices = True  # generate compiles on accelerators only unless told (testing flag)
    return config


def perturb_adapters(model, seed: int = 7) -> None:
    """Random offsets on every task adapter's parameters: fresh adapters (up-projections at zero) change nothing,
    which would let a test of them pass vacuously."""
    from hf_headsel.adapters import TaskAdapters

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, TaskAdapters):
                for parameter in module.parameters():
                    parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.5)


def step_scores(model, family, encoder_ids, decoder_ids) -> torch.Tensor:
    """The scores of every greedy step of a `generate` call (4 steps), stacked."""
    out = model.generate(**family.inputs(), encoder_task_ids=encoder_ids, decoder_task_ids=decoder_ids,
                         max_new_tokens=4, min_new_tokens=4, output_scores=True, return_dict_in_generate=True)
    return torch.stack(out.scores)


def alone(ids: dict, index: int) -> dict:
    return {key: value[index : index + 1] for key, value in ids.items()}


def fresh_copy(family, model):
    """A new model with the same config and parameters (hence an empty eval weight cache)."""
    clone = family.model(config=copy.deepcopy(model.config))
    clone.load_state_dict(model.state_dict())
    return clone.to(model.dtype).eval()


def pad_to(sequences: torch.LongTensor, length: int, pad: int) -> torch.LongTensor:
    return torch.nn.functional.pad(sequences, (0, length - sequences.shape[-1]), value=pad)


def eval_logits(model, family):
    return forward_logits(model, family.inputs(), family.decoder_input_ids(), **MIXED)


def direct_task_kl(logits: torch.Tensor, heads: int, total_heads: int) -> torch.Tensor:
    """KL(Bernoulli(q) || Bernoulli(pi)) = q log(q/pi) + (1-q) log((1-q)/(1-pi)), mean over layers and candidates."""
    q = torch.sigmoid(logits.detach().double())
    pi = heads / total_heads
    kl = q * torch.log(q / pi) + (1 - q) * torch.log((1 - q) / (1 - pi))
    return kl.mean(dim=(1, 2))
