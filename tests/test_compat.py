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
