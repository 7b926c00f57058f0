# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""hf-headsel: attention head selection (Gong et al., 2021) for Hugging Face Transformers.

Importing the package registers the head-selection configs and models with the Auto classes
(`AutoConfig`, `AutoModel`, `AutoModelForSeq2SeqLM`, `AutoModelForSpeechSeq2Seq`) and marks them for remote code, so that
`save_pretrained` writes what `from_pretrained(path, trust_remote_code=True)` needs without this package.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

from .configuration_headsel_marian import HeadSelMarianConfig
from .configuration_headsel_speech_to_text import HeadSelSpeech2TextConfig
from .configuration_head_selection import COMPONENTS, STRATEGIES, HeadSelectionConfigMixin
from .modeling_head_selection import HeadSelSeq2SeqLMOutput
from .routing import TaskRoute
from .selection import HeadDraw, HeadSelector
from .modeling_headsel_marian import HeadSelMarianModel, HeadSelMarianMTModel
from .modeling_headsel_speech_to_text import HeadSelSpeech2TextForConditionalGeneration, HeadSelSpeech2TextModel

__version__ = "0.1.0"

AutoConfig.register(HeadSelMarianConfig.model_type, HeadSelMarianConfig, exist_ok=True)
AutoConfig.register(HeadSelSpeech2TextConfig.model_type, HeadSelSpeech2TextConfig, exist_ok=True)
AutoModel.register(HeadSelMarianConfig, HeadSelMarianModel, exist_ok=True)
AutoModel.register(HeadSelSpeech2TextConfig, HeadSelSpeech2TextModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(HeadSelMarianConfig, HeadSelMarianMTModel, exist_ok=True)
AutoModelForSpeechSeq2Seq.register(HeadSelSpeech2TextConfig, HeadSelSpeech2TextForConditionalGeneration, exist_ok=True)
HeadSelMarianConfig.register_for_auto_class()
HeadSelSpeech2TextConfig.register_for_auto_class()
HeadSelMarianModel.register_for_auto_class("AutoModel")
HeadSelSpeech2TextModel.register_for_auto_class("AutoModel")
HeadSelMarianMTModel.register_for_auto_class("AutoModelForSeq2SeqLM")
HeadSelSpeech2TextForConditionalGeneration.register_for_auto_class("AutoModelForSpeechSeq2Seq")

__all__ = [
    "COMPONENTS",
    "STRATEGIES",
    "HeadDraw",
    "HeadSelMarianConfig",
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
