# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What differs between the transformers versions the package supports (5.17 and newer), written once.

Transformers 5.24 renamed the cache keyword and output field `past_key_values` to `cache` (the old keyword is
deprecated until 5.40). The head-selection forwards name it `cache` on every version and hand it to the stock code
under the installed version's name, [`CACHE_KWARG`]. `generate`'s encoder pass changed its name too
([`GENERATION_ENCODER_PASS`]).

Copied next to saved models as remote code; imports only transformers.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import transformers
from transformers import GenerationMixin
from transformers.utils.deprecation import deprecate_kwarg

#: The installed transformers' name for the cache keyword of the stock forwards and for the output field.
CACHE_KWARG = "cache" if tuple(map(int, transformers.__version__.split(".")[:2])) >= (5, 24) else "past_key_values"
OLD_CACHE_KWARG = "past_key_values"
#: The installed transformers' name for the `GenerationMixin` method that runs the encoder before decoding
#: (`_prepare_encoder_decoder_kwargs_for_generation` in 5.17).
GENERATION_ENCODER_PASS = next(
    name for name in ("_prepare_text_encoder_decoder_kwargs_for_generation",
                      "_prepare_encoder_decoder_kwargs_for_generation") if hasattr(GenerationMixin, name))


def takes_stock_cache_name(forward: Callable) -> Callable:
    """Decorates a forward whose cache parameter is `cache`: it also takes the cache as `past_key_values`, as the
    stock forwards of the installed transformers do (their own name before 5.24; deprecated from 5.24 to 5.40,
    with the stock's warning).

    The forward's signature is computed once and kept on the wrapper (`__signature__`, which outer `functools.wraps`
    decorators copy): transformers reads it at every decoding step for models registered for the Auto classes
    (5.24's check for remote code that still takes `cache_position`), and unwrapping the decorators each time costs
    tens of microseconds per step."""
    if CACHE_KWARG == "cache":
        wrapper = deprecate_kwarg(OLD_CACHE_KWARG, "5.40.0", new_name="cache")(forward)
    else:

        @functools.wraps(forward)
        def wrapper(*args, **kwargs):
            if OLD_CACHE_KWARG in kwargs:
                if kwargs.get("cache") is not None:
                    raise ValueError("pass the cache once: as `cache` or as `past_key_values`, not both")
                kwargs["cache"] = kwargs.pop(OLD_CACHE_KWARG)
            return forward(*args, **kwargs)

    wrapper.__signature__ = inspect.signature(forward)
    return wrapper


__all__ = ["CACHE_KWARG", "GENERATION_ENCODER_PASS", "OLD_CACHE_KWARG", "takes_stock_cache_name"]
