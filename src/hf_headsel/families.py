# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The model families this package supports, in one registry: what the rest of the package looks up per family.

Each [`Family`] names its head-selection classes (config, base model, generation model, and the decoder alone where
the stock family has a causal LM); the stock classes they extend, its Auto class, remote-code modules, pipeline and
model-card facts are derived from them or stated once here.
`hf_headsel/__init__.py` registers every family with the Auto classes; `hub`, `model_card`, `model_folder` and
`analysis` look families up with [`family_of`]. To add a family: write its configuration and modeling modules (as
`configuration_headsel_marian.py` / `modeling_headsel_marian.py` do) and add a [`Family`] here.

Not remote code: saved models do not need it (it imports every family).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSpeechSeq2Seq,
    PretrainedConfig,
    PreTrainedModel,
)

from .configuration_headsel_marian import HeadSelMarianConfig
from .configuration_headsel_speech_to_text import HeadSelSpeech2TextConfig
from .conversion import stock_model_class
from .modeling_headsel_marian import HeadSelMarianForCausalLM, HeadSelMarianModel, HeadSelMarianMTModel
from .modeling_headsel_speech_to_text import HeadSelSpeech2TextForConditionalGeneration, HeadSelSpeech2TextModel
from .pipeline_headsel import (
    SPEECH_RECOGNITION,
    TRANSLATION,
    HeadSelSpeechRecognitionPipeline,
    HeadSelTranslationPipeline,
)



@dataclass(frozen=True)
class Family:
    """One model family: its head-selection classes and what publishing, pipelines and analysis need to know."""

    config_class: type[PretrainedConfig]
    base_model_class: type[PreTrainedModel]  # registered with `AutoModel`, like the stock base model
    model_class: type[PreTrainedModel]  # the generation model
    auto_class: type  # the Auto class of the generation model (the stock family's)
    pipeline_tag: str  # the pipeline task of the Hub and of `transformers.pipeline`
    pipeline_class: type  # its implementation, shipped as remote code (`pipeline_headsel.py`)
    pipeline_input: str  # `custom_pipelines` type: "text" or "audio"
    preprocessor_class: str  # the Auto class that loads its tokenizer / processor
    preprocessor_name: str  # how the card's examples call it
    description: str
    #: the decoder alone (registered with `AutoModelForCausalLM`, served by the stock `text-generation` pipeline),
    #: where the stock family has one, and what its model card calls it
    causal_lm_class: type[PreTrainedModel] | None = None
    causal_lm_description: str | None = None

    @property
    def model_type(self) -> str:
        return self.config_class.model_type

    @property
    def stock_model_class(self) -> type[PreTrainedModel]:
        """The stock generation model the head-selection one extends (e.g. `MarianMTModel`); exports are of it."""
        return stock_model_class(self.model_class)

    @property
    def stock_base_model_class(self) -> type[PreTrainedModel]:
        return stock_model_class(self.base_model_class)

    @property
    def stock_config_class(self) -> type[PretrainedConfig]:
        return self.stock_model_class.config_class

    @property
    def stock_model_type(self) -> str:
        """The stock `model_type` (`"marian"`): exported models have it; it also names the Transformers doc page."""
        return self.stock_config_class.model_type

    def holds_causal_lm(self, config: dict | PretrainedConfig) -> bool:
        """Whether a saved config (`config.json` as a dict, or loaded) is of this family's decoder-only causal LM:
        its `architectures` name the class (the decoder alone has no custom pipeline: the stock `text-generation`
        one serves it)."""
        architectures = config.get("architectures") if isinstance(config, dict) else config.architectures
        return self.causal_lm_class is not None and self.causal_lm_class.__name__ in (architectures or ())

    def is_causal_lm(self, model: PreTrainedModel) -> bool:
        """Whether `model` is this family's decoder alone: its head-selection causal LM, or a stock one exported from
        it (a model in memory: its config names no architecture before it is saved, which [`holds_causal_lm`] reads)."""
        return self.causal_lm_class is not None and isinstance(model, stock_model_class(self.causal_lm_class))

    def auto_class_of(self, config: dict | PretrainedConfig) -> type:
        """The Auto class that loads a saved model of this family: `AutoModelForCausalLM` for its causal LM, else
        [`auto_class`] (a generation checkpoint, or a base model's, which it loads as the stock families do)."""
        return AutoModelForCausalLM if self.holds_causal_lm(config) else self.auto_class

    @property
    def modules(self) -> tuple[str, ...]:
        """The family's own remote-code modules (its configuration and modeling files)."""
        return tuple(f"{cls.__module__.rsplit('.', 1)[-1]}.py" for cls in (self.config_class, self.model_class))

    @property
    def custom_pipelines(self) -> dict:
        """The `config.custom_pipelines` entry that makes `pipeline(<pipeline_tag>, model=..., trust_remote_code=True)`
        load this package's pipeline class from the model folder."""
        return {
            self.pipeline_tag: {
                # the flat module name the class has in a model folder
                "impl": f"{self.pipeline_class.__module__.rsplit('.', 1)[-1]}.{self.pipeline_class.__name__}",
                "pt": [self.auto_class.__name__],
                "type": self.pipeline_input,
            }
        }

    def register(self) -> None:
        """Register the family with the Auto classes, and for remote code (what importing `hf_headsel` does)."""
        AutoConfig.register(self.model_type, self.config_class, exist_ok=True)
        AutoModel.register(self.config_class, self.base_model_class, exist_ok=True)
        self.auto_class.register(self.config_class, self.model_class, exist_ok=True)
        self.config_class.register_for_auto_class()
        self.base_model_class.register_for_auto_class("AutoModel")
        self.model_class.register_for_auto_class(self.auto_class.__name__)
        if self.causal_lm_class is not None:
            AutoModelForCausalLM.register(self.config_class, self.causal_lm_class, exist_ok=True)
            self.causal_lm_class.register_for_auto_class("AutoModelForCausalLM")


MARIAN = Family(
    config_class=HeadSelMarianConfig,
    base_model_class=HeadSelMarianModel,
    model_class=HeadSelMarianMTModel,
    auto_class=AutoModelForSeq2SeqLM,
    pipeline_tag=TRANSLATION,
    pipeline_class=HeadSelTranslationPipeline,
    pipeline_input="text",
    preprocessor_class="AutoTokenizer",
    preprocessor_name="tokenizer",
    description="text translation model (Marian)",
    causal_lm_class=HeadSelMarianForCausalLM,
    causal_lm_description="decoder-only language model (the decoder of a Marian translation model)",
)
SPEECH2TEXT = Family(
    config_class=HeadSelSpeech2TextConfig,
    base_model_class=HeadSelSpeech2TextModel,
    model_class=HeadSelSpeech2TextForConditionalGeneration,
    auto_class=AutoModelForSpeechSeq2Seq,
    pipeline_tag=SPEECH_RECOGNITION,
    pipeline_class=HeadSelSpeechRecognitionPipeline,
    pipeline_input="audio",
    preprocessor_class="AutoProcessor",
    preprocessor_name="processor",
    description="speech recognition / speech translation model (Speech2Text)",
)
FAMILIES = (MARIAN, SPEECH2TEXT)
#: The stock pipeline (and Hub pipeline tag) of a family's decoder alone: it has no custom pipeline.
TEXT_GENERATION = "text-generation"
HEADSEL_MODEL_TYPES = tuple(family.model_type for family in FAMILIES)
STOCK_MODEL_TYPES = tuple(family.stock_model_type for family in FAMILIES)


def family_of(model_type: str) -> Family:
    """The [`Family`] of a head-selection `model_type`, or of a stock one (a model exported from the family);
    `ValueError` for any other."""
    for family in FAMILIES:
        if model_type in (family.model_type, family.stock_model_type):
            return family
    raise ValueError(
        f"unsupported model_type {model_type!r}: expected one of {sorted(HEADSEL_MODEL_TYPES + STOCK_MODEL_TYPES)}"
    )


__all__ = ["FAMILIES", "HEADSEL_MODEL_TYPES", "MARIAN", "SPEECH2TEXT", "STOCK_MODEL_TYPES", "TEXT_GENERATION", "Family",
           "family_of"]
