"""The facts `hf_headsel/compat.py` writes once about the installed transformers."""

from __future__ import annotations

import inspect

import pytest
from transformers import MarianModel, Speech2TextModel

from hf_headsel.compat import CACHE_KWARG, OLD_CACHE_KWARG


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
