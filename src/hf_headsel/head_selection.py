# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Compatibility module, kept for old imports (`from hf_headsel.head_selection import ...`): the head-selection
core used to live in this one file. It now lives in flat modules, one role each:

* `configuration_head_selection.py`: the config keywords, their validation and the method's vocabulary;
* `selection.py`: `phi`, the choice of heads, the Gumbel-sigmoid draw and the KL;
* `routing.py`: task ids -> routes, passed down to the layers in one `Routing`;
* `attention.py`: the attention layer with `H'` candidate heads;
* `modeling_head_selection.py`: the model mixins and the output class.

New code should import from those modules. This module only re-exports their public names and is not needed by a
saved model's remote code.
"""

from __future__ import annotations

from .attention import MIXED_BATCH_PROJECTIONS, PARTS, HeadSelectionAttentionMixin
from .configuration_head_selection import (
    ADAPTER_KEYS,
    COMPONENTS,
    CROSS_ATTENTION_TASK_KEYS,
    SIDES,
    STRATEGIES,
    TASK_TYPES,
    HeadSelectionConfigMixin,
    component_side,
)
from .modeling_head_selection import HeadSelectionBaseModelMixin, HeadSelectionModelMixin, HeadSelSeq2SeqLMOutput
from .routing import (
    LAYER_KWARGS,
    ROUTING_KWARG,
    TASK_ID_KWARGS,
    Routing,
    TaskRoute,
    first_tensor,
    keyed_route,
    route_from_kwargs,
    task_names,
    task_route,
)
from .selection import LOGIT_INIT_RANGE, ComponentSelectors, HeadDraw, HeadSelector

HeadSelection = ComponentSelectors  # the old name of the selectors' ModuleDict
ROUTE_KWARGS = TASK_ID_KWARGS
# The layers used to get the draws under a keyword of their own; they now come with the routes in one `Routing`, under
# `ROUTING_KWARG`, which `HeadSelectionAttentionMixin._layer_choice` takes.
DRAWS_KWARG = ROUTING_KWARG

__all__ = [
    "ADAPTER_KEYS",
    "COMPONENTS",
    "CROSS_ATTENTION_TASK_KEYS",
    "DRAWS_KWARG",
    "LAYER_KWARGS",
    "LOGIT_INIT_RANGE",
    "MIXED_BATCH_PROJECTIONS",
    "PARTS",
    "ROUTE_KWARGS",
    "ROUTING_KWARG",
    "SIDES",
    "STRATEGIES",
    "TASK_ID_KWARGS",
    "TASK_TYPES",
    "ComponentSelectors",
    "HeadDraw",
    "HeadSelSeq2SeqLMOutput",
    "HeadSelection",
    "HeadSelectionAttentionMixin",
    "HeadSelectionBaseModelMixin",
    "HeadSelectionConfigMixin",
    "HeadSelectionModelMixin",
    "HeadSelector",
    "Routing",
    "TaskRoute",
    "component_side",
    "first_tensor",
    "keyed_route",
    "route_from_kwargs",
    "task_names",
    "task_route",
]
