"""The facts `hf_headsel/compat.py` writes once about the installed transformers."""

from __future__ import annotations

import inspect

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, MarianModel, Speech2TextModel

from hf_headsel.compat import CACHE_KWARG, OLD_CACHE_KWARG

from conftest import FAMILIES
from make_version_fixtures import FIXTURES, GENERATION

SAVED = sorted(FIXTURES.glob("*/*"))


@pytest.mark.parametrize("stock", [MarianModel, Speech2TextModel])
def test_cache_kwarg_is_the_installed_stock_forwards_name(stock):
    parameters = inspect.signature(stock.forward).parameters
    assert CACHE_KWARG in parameters
    # from 5.24 the old name is only taken through the stock's deprecation wrapper, not as a parameter
    assert (OLD_CACHE_KWARG in parameters) == (CACHE_KWARG == OLD_CACHE_KWARG)


def test_decorated_forwards_keep_their_signature_computed_once():
    """`takes_stock_cache_name` keeps the forward's signature on the wrapper (transformers reads a registered
    model's forward signature at every decoding step); outer `functools.wraps` decorators carry it along."""
    from transformers.utils import can_return_tuple

    from hf_headsel.compat import takes_stock_cache_name

    def forward(self, input_ids=None, cache=None, **kwargs):
        return cache

    decorated = can_return_tuple(takes_stock_cache_name(forward))
    assert decorated.__signature__ == inspect.signature(forward)
    assert decorated(None, **{OLD_CACHE_KWARG: "the cache"}) == "the cache"


def test_models_are_saved_by_the_oldest_and_the_newest_version_tested():
    versions = {folder.parent.name for folder in SAVED}
    assert {"5.17.0", "5.24.0"} <= versions and {folder.name for folder in SAVED} == set(FAMILIES)


@pytest.mark.parametrize("folder", SAVED, ids=[f"{f.parent.name}-{f.name}" for f in SAVED])
def test_a_model_saved_by_another_transformers_computes_what_it_computed_there(folder):
    """A model saved on one supported transformers (`tests/make_version_fixtures.py`) loads on the installed one,
    through its class and `AutoModel`, with its selection, and gives the logits and greedy tokens it gave there (the
    logits up to rounding: another version may order the same arithmetic differently)."""
    family, saved = FAMILIES[folder.name], load_file(folder / "expected.safetensors")
    inputs = {name.removeprefix("input."): value for name, value in saved.items() if name.startswith("input.")}
    decoder_input_ids = inputs.pop("decoder_input_ids")
    model = family.model_class.from_pretrained(folder).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs, decoder_input_ids=decoder_input_ids).logits, saved["logits"])
        base = AutoModel.from_pretrained(folder).eval()
        torch.testing.assert_close(base(**inputs, decoder_input_ids=decoder_input_ids).last_hidden_state,
                                   model.model(**inputs, decoder_input_ids=decoder_input_ids).last_hidden_state)
    assert torch.equal(model.generate(**inputs, **GENERATION), saved["generated"])
