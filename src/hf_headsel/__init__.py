# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""hf-headsel: attention head selection (Gong et al., 2021) for Hugging Face Transformers.

Importing the package registers every family of `families.py` with the Auto classes (`AutoConfig`, `AutoModel`,
`AutoModelForSeq2SeqLM`, `AutoModelForSpeechSeq2Seq`, `AutoModelForCausalLM`) and marks them for remote code, so that
`save_pretrained` writes what `from_pretrained(path, trust_remote_code=True)` needs without this package.
"""

from .configuration_head_selection import COMPONENTS, STRATEGIES, HeadSelectionConfigMixin
from .configuration_headsel_marian import HeadSelMarianConfig
from .configuration_headsel_speech_to_text import HeadSelSpeech2TextConfig
from .families import FAMILIES
from .modeling_head_selection import HeadSelSeq2SeqLMOutput
from .modeling_head_selection_causal_lm import HeadSelCausalLMOutput
from .modeling_headsel_marian import HeadSelMarianForCausalLM, HeadSelMarianModel, HeadSelMarianMTModel
from .modeling_headsel_speech_to_text import HeadSelSpeech2TextForConditionalGeneration, HeadSelSpeech2TextModel
from .routing import TaskRoute
from .selection import HeadDraw, HeadSelector

__version__ = "0.1.0"

for _family in FAMILIES:
    _family.register()

__all__ = [
    "COMPONENTS",
    "STRATEGIES",
    "HeadDraw",
    "HeadSelCausalLMOutput",
    "HeadSelMarianConfig",
    "HeadSelMarianForCausalLM",
    "HeadSelMarianMTModel",
    "HeadSelMarianModel",
    "HeadSelSeq2SeqLMOutput",
    "HeadSelSpeech2TextConfig",
    "HeadSelSpeech2TextForConditionalGeneration",
    "HeadSelSpeech2TextModel",
    "HeadSelectionConfigMixin",
    "HeadSelector",
    "TaskRoute",
    "__version__",
]
