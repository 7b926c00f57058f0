"""The families registry (`hf_headsel/families.py`) and the layout of the package: one registry entry per family,
flat modules without import cycles, and the compatibility module `head_selection.py`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

import hf_headsel
from conftest import ALL_COMPONENTS, FAMILIES as TEST_FAMILIES
from hf_headsel.families import FAMILIES, HEADSEL_MODEL_TYPES, family_of

PACKAGE_DIR = Path(hf_headsel.__file__).parent


@pytest.fixture
def registered(family):
    return family_of(family.config_class.model_type)


def test_registry_names_every_class_of_a_family(family, registered):
    assert registered.config_class is family.config_class
    assert registered.model_class is family.model_class
    assert registered.base_model_class is family.base_model_class
    assert registered.auto_class is family.auto_model_class
    assert registered.stock_model_class is family.stock_model_class
    assert registered.stock_base_model_class is family.stock_base_model_class
    assert registered.stock_config_class is family.stock_config_class
    assert family_of(family.stock_config_class.model_type) is registered  # exported models
    assert registered.modules == family.files[1:3]  # its configuration and modeling modules
    assert registered.causal_lm_class is family.causal_lm_class
    assert set(HEADSEL_MODEL_TYPES) == {f.config_class.model_type for f in TEST_FAMILIES.values()}
    assert len(FAMILIES) == len(TEST_FAMILIES)


def test_registry_registers_the_auto_classes(family, registered):
    config = family.config()
    assert type(AutoConfig.for_model(registered.model_type)) is family.config_class
    assert type(AutoModel.from_config(config)) is family.base_model_class
    assert type(registered.auto_class.from_config(config)) is family.model_class
    assert registered.auto_class_of(config) is registered.auto_class  # an encoder-decoder checkpoint
    if family.causal_lm_class is None:  # as the stock family: no causal LM
        with pytest.raises(ValueError, match="Unrecognized configuration class"):
            AutoModelForCausalLM.from_config(config)
    else:
        assert type(AutoModelForCausalLM.from_config(config)) is family.causal_lm_class
        saved = {**config.to_dict(), "architectures": [family.causal_lm_class.__name__]}  # as it saves itself
        assert registered.holds_causal_lm(saved) and registered.auto_class_of(saved) is AutoModelForCausalLM


def test_custom_pipelines_entry_names_the_flat_pipeline_module(registered):
    ((tag, entry),) = registered.custom_pipelines.items()
    assert tag == registered.pipeline_tag
    assert entry["impl"] == f"pipeline_headsel.{registered.pipeline_class.__name__}"
    assert entry["pt"] == [registered.auto_class.__name__]


def test_unknown_model_type_is_rejected():
    with pytest.raises(ValueError, match="unsupported model_type 'bert'"):
        family_of("bert")


def relative_imports(path: Path) -> set[str]:
    imports = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            imports.add(node.module)
    return imports


def test_modules_have_one_role_and_no_import_cycles():
    graph = {path.stem: relative_imports(path) for path in PACKAGE_DIR.glob("*.py")}
    for path in PACKAGE_DIR.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 600, path.name

    def visit(module, stack):
        assert module not in stack, " -> ".join([*stack, module])
        for dependency in graph.get(module, ()):
            visit(dependency, [*stack, module])

    for module in graph:
        visit(module, [])
    assert "head_selection" not in set().union(*graph.values())  # the compatibility module is imported by nobody


def test_each_core_module_imports_alone(tmp_path):
    """The modules that used to import each other import alone, in a fresh interpreter, as part of a bare package (no
    `__init__` side effects to hide an import cycle; the static check above covers every module)."""
    core = ["conversion", "modeling_head_selection"]  # the pair that used to import each other
    package = tmp_path / "flat"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for path in PACKAGE_DIR.glob("*.py"):
        if path.name != "__init__.py":
            (package / path.name).write_text(path.read_text())
    for module in core:
        result = subprocess.run([sys.executable, "-c", f"import flat.{module}"], cwd=tmp_path, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, (module, result.stderr[-2000:])


def test_compatibility_module_reexports_the_old_names(family):
    from hf_headsel import attention, configuration_head_selection, head_selection, modeling_head_selection, routing
    from hf_headsel import selection

    assert head_selection.HeadSelection is selection.ComponentSelectors
    assert head_selection.HeadSelectionConfigMixin is configuration_head_selection.HeadSelectionConfigMixin
    assert head_selection.HeadSelectionAttentionMixin is attention.HeadSelectionAttentionMixin
    assert head_selection.HeadSelectionModelMixin is modeling_head_selection.HeadSelectionModelMixin
    assert head_selection.TaskRoute is routing.TaskRoute
    model = family.model(head_selection_components=ALL_COMPONENTS)
    assert isinstance(model.head_selection, head_selection.HeadSelection)
    assert {key for key in model.state_dict() if key.startswith("head_selection.")} == {
        f"head_selection.{component}.logits" for component in ALL_COMPONENTS}
