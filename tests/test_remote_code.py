"""`save_pretrained` writes what `from_pretrained(path, trust_remote_code=True)` needs on a machine without
`hf_headsel` (DESIGN.md §4): flat sibling modules importing only torch, transformers and each other.

The loading side runs in a subprocess started with `python -I` (no user site, no PYTHONPATH, no script directory on
the path) and a meta-path finder that refuses `hf_headsel`, because the package is installed (editable) in the
environment running the tests."""

from __future__ import annotations

import ast
import json
import os
import sys

import pytest
import torch

from conftest import ALL_COMPONENTS, CORE_FILES, randomize_selector_logits, run_without_hf_headsel

ALLOWED_ABSOLUTE_IMPORTS = {"torch", "transformers", "huggingface_hub"}  # huggingface_hub: a transformers dependency

ENCODER_IDS = torch.tensor([0, 1, 1, 0])
DECODER_IDS = torch.tensor([0, 2, 1, 2])


def build_saved_model(family, path):
    model = family.model(head_selection_strategy="subset", head_selection_components=ALL_COMPONENTS)
    randomize_selector_logits(model)
    model.save_pretrained(path)
    return model


@pytest.fixture
def saved(family, tmp_path):
    path = tmp_path / "model"
    return build_saved_model(family, path), path


def test_save_pretrained_writes_flat_modules_and_auto_map(family, saved):
    _, path = saved
    for name in (*CORE_FILES, *family.files):
        assert (path / name).is_file(), name
    config = json.loads((path / "config.json").read_text())
    config_module, model_module = family.files[1][:-3], family.files[2][:-3]
    assert config["auto_map"] == {
        "AutoConfig": f"{config_module}.{family.config_class.__name__}",
        "AutoModel": f"{model_module}.{family.base_model_class.__name__}",  # as the stock family registers it
        family.auto_model_class.__name__: f"{model_module}.{family.model_class.__name__}",
        # the decoder alone, where the stock family has a causal LM (Marian)
        **({} if family.causal_lm_class is None else
           {"AutoModelForCausalLM": f"{model_module}.{family.causal_lm_class.__name__}"}),
    }
    assert config["model_type"] == family.config_class.model_type
    assert config["architectures"] == [family.model_class.__name__]


def test_saved_modules_import_only_torch_transformers_and_each_other(family, saved):
    _, path = saved
    siblings = {name[:-3] for name in os.listdir(path) if name.endswith(".py")}
    assert set(family.files) | set(CORE_FILES) <= {f"{name}.py" for name in siblings}
    for name in sorted(f"{name}.py" for name in siblings):  # every module written, not only the family's
        tree = ast.parse((path / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    assert top in sys.stdlib_module_names or top in ALLOWED_ABSOLUTE_IMPORTS, (name, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.level == 1, (name, node.module)  # single-dot relative imports only
                    assert node.module in siblings, (name, node.module)
                else:
                    top = node.module.split(".")[0]
                    assert top in sys.stdlib_module_names or top in ALLOWED_ABSOLUTE_IMPORTS, (name, node.module)
                    assert top != "hf_headsel", name


CHILD = """
    import torch
    import transformers

    torch.set_num_threads(1)  # as the tests' process (conftest): the same arithmetic, so the same bits

    model_dir, data_path, out_path, auto_name = sys.argv[1:5]
    data = torch.load(data_path)
    auto_class = getattr(transformers, auto_name)
    config = transformers.AutoConfig.from_pretrained(model_dir, trust_remote_code=True)
    model = auto_class.from_pretrained(model_dir, trust_remote_code=True, task="fr").eval()
    with torch.no_grad():
        mixed = model(
            **data["inputs"], decoder_input_ids=data["decoder_input_ids"],
            encoder_task_ids=data["encoder_task_ids"], decoder_task_ids=data["decoder_task_ids"],
        ).logits
        default_decoder = model(
            **data["inputs"], decoder_input_ids=data["decoder_input_ids"], encoder_task_ids=data["encoder_task_ids"],
        ).logits
    generated = model.generate(
        **data["inputs"], encoder_task_ids=data["encoder_task_ids"], decoder_task_ids=data["decoder_task_ids"],
        num_beams=3, max_new_tokens=6,
    )
    # the base model, through AutoModel, from the same (generation-model) checkpoint
    base = transformers.AutoModel.from_pretrained(model_dir, trust_remote_code=True).eval()
    with torch.no_grad():
        base_hidden = base(
            **data["inputs"], decoder_input_ids=data["decoder_input_ids"],
            encoder_task_ids=data["encoder_task_ids"], decoder_task_ids=data["decoder_task_ids"],
        ).last_hidden_state
    assert "hf_headsel" not in sys.modules
    torch.save(
        {
            "mixed": mixed,
            "default_decoder": default_decoder,
            "generated": generated,
            "model_module": type(model).__module__,
            "config_module": type(config).__module__,
            "model_class": type(model).__name__,
            "defaults": (model.config.default_encoder_task, model.config.default_decoder_task),
            "selected_heads": model.selected_heads(),
            "base_class": type(base).__name__,
            "base_module": type(base).__module__,
            "base_hidden": base_hidden,
            "base_selected_heads": base.selected_heads(),
        },
        out_path,
    )
"""


def test_trust_remote_code_loads_without_hf_headsel(family, saved, tmp_path):
    model, path = saved
    inputs, decoder_input_ids = family.inputs(), family.decoder_input_ids()
    ids = dict(encoder_task_ids=ENCODER_IDS, decoder_task_ids=DECODER_IDS)
    with torch.no_grad():
        expected_mixed = model(**inputs, decoder_input_ids=decoder_input_ids, **ids).logits
        expected_hidden = model(
            **inputs, decoder_input_ids=decoder_input_ids, **ids, output_hidden_states=True
        ).decoder_hidden_states[-1]
        expected_default = model(
            **inputs, decoder_input_ids=decoder_input_ids, encoder_task_ids=ENCODER_IDS,
            decoder_task_ids=torch.full((4,), 1),  # "fr"
        ).logits
    expected_generated = model.generate(**inputs, **ids, num_beams=3, max_new_tokens=6)
    data_path, out_path = tmp_path / "data.pt", tmp_path / "out.pt"
    torch.save(dict(inputs=inputs, decoder_input_ids=decoder_input_ids, **ids), data_path)

    result = run_without_hf_headsel(CHILD, [str(path), str(data_path), str(out_path), family.auto_model_class.__name__],
                                    tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    out = torch.load(out_path)
    assert out["model_module"].startswith("transformers_modules"), out["model_module"]
    assert out["config_module"].startswith("transformers_modules"), out["config_module"]
    assert out["model_class"] == family.model_class.__name__
    assert out["defaults"] == (None, "fr")
    # the same code run from the copied modules: equal to the last bit
    for component, heads in model.selected_heads().items():
        assert torch.equal(out["selected_heads"][component], heads), component
    assert torch.equal(out["mixed"], expected_mixed)
    assert torch.equal(out["default_decoder"], expected_default)
    assert torch.equal(out["generated"], expected_generated)
    assert out["base_class"] == family.base_model_class.__name__
    assert out["base_module"].startswith("transformers_modules"), out["base_module"]
    for component, heads in model.selected_heads().items():  # the selectors loaded into the base model too
        assert torch.equal(out["base_selected_heads"][component], heads), component
    assert torch.equal(out["base_hidden"], expected_hidden)
    assert (tmp_path / "modules").is_dir()  # the remote modules were copied into the fresh cache


REFUSALS_CHILD = """
    import transformers

    transformers.logging.set_verbosity_error()
    model_dir, auto_name = sys.argv[1:3]
    auto_class = getattr(transformers, auto_name)
    config = transformers.AutoConfig.from_pretrained(model_dir, trust_remote_code=True, head_selection_strategy="group")
    for how, keywords in (("strategy", dict(head_selection_strategy="group")), ("adapters", dict(task_adapter_dim=4)),
                          ("config=", dict(config=config))):
        try:
            auto_class.from_pretrained(model_dir, trust_remote_code=True, **keywords)
        except ValueError as error:
            print(how, "refused:", str(error).replace("\\n", " "))
        except Exception as error:  # the stock loading's size-mismatch RuntimeError, say
            print(how, "failed otherwise:", type(error).__name__)
        else:
            print(how, "loaded")
    assert "hf_headsel" not in sys.modules
"""


def test_trust_remote_code_refuses_a_change_of_the_trained_structure(family, tmp_path):
    """Remote code imports the configuration module twice (once for AutoConfig, once for the model classes), as two
    modules: the refusal of a changed strategy or adapter size, through an Auto class's keywords or its `config=`,
    checked the config with `isinstance` against the other copy's class and let the model load."""
    path = tmp_path / "model"
    family.model(head_selection_strategy="subset", task_adapter_dim=2).save_pretrained(path)
    result = run_without_hf_headsel(REFUSALS_CHILD, [str(path), family.auto_model_class.__name__], tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["strategy", "adapters", "config="], result.stdout
    for line in lines:
        assert " refused: " in line and "would change the trained model" in line, line
