# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Pipelines for head-selection models, shipped next to a saved model as remote code.

Transformers 5 removed the `translation` pipeline, and its `automatic-speech-recognition` pipeline recognises
sequence-to-sequence models by their stock class names only. A model folder prepared by `hf_headsel.hub` lists these
classes under `custom_pipelines` in its `config.json` (the entry each family's `hf_headsel.families.Family` makes),
so that

```python
from transformers import pipeline

translator = pipeline("translation", model="my-model", trust_remote_code=True, model_kwargs={"decoder_task": "fr"})
translator("The cat sat on the mat.")                       # the default set at load time, here "fr"
translator("The cat sat on the mat.", task="it")            # or one task for this call

recognizer = pipeline("automatic-speech-recognition", model="my-asr-model", trust_remote_code=True,
                      model_kwargs={"encoder_task": "es", "decoder_task": "es"})
recognizer({"raw": waveform, "sampling_rate": 16000}, task="fr")
```

work as they do for stock models. A call's `task=` (a name, used on every side that has it), `encoder_task=` and
`decoder_task=` route the whole call (they are also accepted when building the pipeline); without them the model's
default tasks apply. `model_kwargs` go to `from_pretrained`, whose `encoder_task=` / `decoder_task=` set those
defaults. Its `task=` keyword cannot be used there: `pipeline()` passes its own `task` to the model loader, and
`model_kwargs={"task": ...}` fails with "got multiple values for keyword argument 'task'" (Transformers 5).

Beside `transformers` it imports only its sibling `routing.py` (relatively, so it travels with the remote code).
"""

from __future__ import annotations

from typing import Any

from transformers import Pipeline
from transformers.pipelines.automatic_speech_recognition import AutomaticSpeechRecognitionPipeline

from .routing import task_names

TRANSLATION = "translation"
SPEECH_RECOGNITION = "automatic-speech-recognition"


def task_generate_kwargs(
    config, task: str | None = None, encoder_task: str | None = None, decoder_task: str | None = None
) -> dict[str, str]:
    """`generate()` keywords that route a whole batch by task name: `{"encoder_task_ids": name, ...}`.

    `task` names the task of every side that has it (a name known on neither side is a `ValueError` listing the
    tasks); `encoder_task` / `decoder_task` set one side and take precedence. Sides left open use the model's default.
    """
    return {f"{side}_task_ids": name for side, name in task_names(config, task, encoder_task, decoder_task).items()}


class HeadSelTranslationPipeline(Pipeline):
    """Text-to-text translation with a head-selection Marian model, one task per call.

    Call with a string or a list of strings; returns `[{"translation_text": ...}]` per input (as the
    `translation` pipeline of Transformers 4 did). Keywords: `task`, `encoder_task`, `decoder_task` (routing),
    `src_lang` / `tgt_lang` (aliases of `encoder_task` / `decoder_task`), `truncation`, `clean_up_tokenization_spaces`
    (default: the tokenizer's own setting, as `batch_decode`), `generate_kwargs` (a dict), any other keyword is passed
    to `generate()` (`max_new_tokens`, `num_beams`, ...).
    """

    _load_processor = False
    _load_image_processor = False
    _load_video_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(
        self,
        task: str | None = None,
        encoder_task: str | None = None,
        decoder_task: str | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
        truncation: bool | None = None,
        clean_up_tokenization_spaces: bool | None = None,
        generate_kwargs: dict | None = None,
        **more_generate_kwargs,
    ):
        preprocess_params = {} if truncation is None else {"truncation": truncation}
        forward_params = {**(generate_kwargs or {}), **more_generate_kwargs}
        forward_params.update(
            task_generate_kwargs(
                self.model.config, task, encoder_task if encoder_task is not None else src_lang,
                decoder_task if decoder_task is not None else tgt_lang,
            )
        )
        postprocess_params = {}
        if clean_up_tokenization_spaces is not None:
            postprocess_params["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess_params, forward_params, postprocess_params

    def __call__(self, inputs: str | list[str], **kwargs: Any):
        """Translate `inputs`: `[{"translation_text": ...}]` for one string, a list of those for a list."""
        result = super().__call__(inputs, **kwargs)
        if isinstance(inputs, list) and all(len(item) == 1 for item in result):
            return [item[0] for item in result]
        return result

    def preprocess(self, text: str, truncation: bool = False):
        if not isinstance(text, str):
            raise ValueError(f"the translation pipeline takes strings, got {type(text).__name__}")
        return self.tokenizer(text, return_tensors="pt", truncation=truncation)

    def _forward(self, model_inputs, **generate_kwargs):
        batch_size = model_inputs["input_ids"].shape[0]
        output_ids = self.model.generate(**model_inputs, **generate_kwargs)
        return {"output_ids": output_ids.reshape(batch_size, -1, output_ids.shape[-1])}

    def postprocess(self, model_outputs, clean_up_tokenization_spaces: bool | None = None):
        # `None`: the tokenizer's own setting, as `tokenizer.batch_decode` (and the recipes' scored predictions) use
        return [
            {
                "translation_text": self.tokenizer.decode(
                    ids, skip_special_tokens=True, clean_up_tokenization_spaces=clean_up_tokenization_spaces
                )
            }
            for ids in model_outputs["output_ids"][0]
        ]


class HeadSelSpeechRecognitionPipeline(AutomaticSpeechRecognitionPipeline):
    """The `automatic-speech-recognition` pipeline for head-selection Speech2Text models (recognition or speech
    translation), with the routing keywords `task`, `encoder_task` and `decoder_task`.

    The stock pipeline takes a model for CTC unless its class name is a stock sequence-to-sequence one; this one
    always decodes with `generate()`.
    """

    def __init__(self, model, *args, **kwargs):
        super().__init__(model, *args, **kwargs)
        self.type = "seq2seq"

    def _sanitize_parameters(
        self, task: str | None = None, encoder_task: str | None = None, decoder_task: str | None = None, **kwargs
    ):
        kwargs.update(task_generate_kwargs(self.model.config, task, encoder_task, decoder_task))
        return super()._sanitize_parameters(**kwargs)


__all__ = [
    "HeadSelSpeechRecognitionPipeline",
    "HeadSelTranslationPipeline",
    "task_generate_kwargs",
]
