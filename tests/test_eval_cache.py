"""The evaluation cache (`hf_headsel/eval_cache.py`): a value is kept while its sources are the same tensors at the
same version, recomputed when one is replaced or changed in place, and dropped when its module moves, is cast or
switches mode. How the attention layers and adapters use it is tested with them (`test_attention.py`,
`test_adapters.py`)."""

import torch
from torch import nn

from hf_headsel.eval_cache import EvalCacheMixin, ParameterDerivedCache


def counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def test_a_value_is_computed_once_while_its_sources_are_unchanged():
    cache, source = ParameterDerivedCache(), torch.zeros(3)
    compute, calls = counting("rows")
    assert cache.get("key", [source], compute) == "rows"
    assert cache.get("key", [source], compute) == "rows"
    assert len(calls) == 1


def test_a_source_changed_in_place_or_replaced_recomputes_the_value():
    cache, source = ParameterDerivedCache(), torch.zeros(3)
    compute, calls = counting("rows")
    cache.get("key", [source], compute)
    source.add_(1.0)  # an optimizer step: the version counter moves
    cache.get("key", [source], compute)
    assert len(calls) == 2
    cache.get("key", [torch.zeros(3)], compute)  # another tensor (load_state_dict(assign=True))
    assert len(calls) == 3


def test_keys_are_kept_apart_and_keep_one_drops_the_others_of_its_kind():
    cache, source = ParameterDerivedCache(), torch.zeros(3)
    for key in [("batched", (0, 1)), ("batched", (1, 2)), "heads"]:
        cache.get(key, [source], lambda key=key: key)
    assert cache.get(("batched", (0, 1)), [source], lambda: "recomputed") == ("batched", (0, 1))
    cache.keep_one(("batched", (1, 2)), lambda key: isinstance(key, tuple))
    assert cache.keys() == [("batched", (1, 2)), "heads"]
    cache.keep_one("heads")  # of every kind
    assert cache.keys() == ["heads"]


def test_keep_one_tolerates_entries_added_and_dropped_meanwhile():
    # what another thread serving the same model may do while this one drops stale entries
    cache, source = ParameterDerivedCache(), torch.zeros(3)
    for key in ["a", "b", "c"]:
        cache.get(key, [source], lambda: key)

    def of_kind(key):
        cache.get(("meanwhile", key), [source], lambda: key)
        cache._entries.pop("c", None)
        return isinstance(key, str)

    cache.keep_one("a", of_kind)
    assert "a" in cache.keys() and "b" not in cache.keys() and "c" not in cache.keys()


def test_the_sources_are_kept_alive_with_their_entry():
    # a source freed while its entry lives could hand its id to a new tensor, which would then match a stale state
    cache = ParameterDerivedCache()
    source = torch.zeros(3)
    cache.get("key", [source], lambda: "rows")
    source_id = id(source)
    del source
    assert any(id(tensor) == source_id for tensor in cache._entries["key"][2])


class Cached(EvalCacheMixin, nn.Linear):
    def __init__(self):
        super().__init__(2, 2)
        self.init_eval_cache()


def test_moving_casting_or_switching_mode_clears_the_module_cache():
    module = Cached()
    for change in (lambda: module.double(), lambda: module.train(), lambda: module.eval(), module.clear_eval_cache):
        module._eval_cache.get("key", [module.weight], lambda: "rows")
        assert module._eval_cache.keys() == ["key"]
        change()
        assert module._eval_cache.keys() == []


def test_a_module_without_its_cache_yet_moves_and_switches_mode():
    class Late(EvalCacheMixin, nn.Linear):
        pass

    Late(2, 2).double().train().eval().clear_eval_cache()  # no cache set up: nothing to clear, no error


def test_a_fused_optimizer_step_or_replaced_storage_recomputes_the_value():
    # a fused optimizer (the Trainer's default `adamw_torch_fused`) writes without a version bump; `param.data = t`
    # (`vector_to_parameters`) keeps the tensor and its version
    cache, parameter = ParameterDerivedCache(), nn.Parameter(torch.ones(3))
    compute, calls = counting("rows")
    cache.get("key", [parameter], compute)
    parameter.grad = torch.ones(3)
    optimizer = torch.optim.AdamW([parameter], lr=0.1, fused=True)
    version = parameter._version
    optimizer.step()
    assert parameter._version == version  # what the version counter cannot see
    cache.get("key", [parameter], compute)
    assert len(calls) == 2
    parameter.data = torch.zeros(3)
    cache.get("key", [parameter], compute)
    assert len(calls) == 3
