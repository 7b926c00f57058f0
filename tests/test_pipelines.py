"""Inference from a saved ("downloaded") model folder: Auto classes with `trust_remote_code=True`, and the
`translation` / `automatic-speech-recognition` pipelines with a task.

The model cards' "How to use" examples run as written on the folder they describe (its path as the model id).

The folders are built here, offline: tiny sentencepiece tokenizers (MarianTokenizer: `source.spm`, `target.spm`,
`vocab.json`; Speech2TextTokenizer: `sentencepiece.bpe.model`, `vocab.json`, with a Speech2TextFeatureExtractor in a
Speech2TextProcessor), a tiny model, and `hf_headsel.hub.prepare_model_folder` (remote code + `custom_pipelines`).
Every routed output is compared with `generate()` on the original model for the same task, and the tasks are chosen
so that their outputs differ (otherwise a pipeline ignoring the task would pass).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from copy import deepcopy
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import sentencepiece as spm
import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoModelForSpeechSeq2Seq,
    MarianForCausalLM,
    MarianTokenizer,
    Speech2TextFeatureExtractor,
    Speech2TextProcessor,
    Speech2TextTokenizer,
    pipeline,
)
from transformers.utils import logging as hf_logging

from hf_headsel import (
    HeadSelMarianConfig,
    HeadSelMarianForCausalLM,
    HeadSelMarianMTModel,
    HeadSelSpeech2TextConfig,
    HeadSelSpeech2TextForConditionalGeneration,
)
from hf_headsel.hub import prepare_model_folder, write_model_card

from conftest import run_without_hf_headsel
from doc_examples import python_blocks, run_blocks

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")  # MarianTokenizer's hint

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["the cat sat on the mat", "le chat est sur le tapis", "il gatto sta sul tappeto", "hello world",
         "bonjour le monde", "ciao mondo"] * 4
SOURCES = ["the cat sat on the mat", "hello world"]
GENERATE = dict(max_new_tokens=6, num_beams=1)
COMMON = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
              encoder_ffn_dim=32, decoder_ffn_dim=32, dropout=0.0, init_std=1.0,
              head_selection_strategy="task_specific",
              head_selection_components=["encoder_self", "decoder_self", "decoder_cross"])


def train_spm(folder: Path, **specials) -> dict[str, int]:
    folder.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS), model_prefix=str(folder / "sp"), vocab_size=40, model_type="unigram",
        hard_vocab_limit=False, minloglevel=2, character_coverage=1.0, **specials,
    )
    processor = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    return vocab


def marian_tokenizer(folder: Path, symbols: tuple[str, ...] = ()) -> MarianTokenizer:
    """`</s>`=0, `<unk>`=1, `<pad>`=2 (Marian's order); one sentencepiece model for both sides; `symbols` (say
    `>>fr<<` target-language tokens) are whole pieces."""
    train_spm(folder, eos_id=0, unk_id=1, pad_id=2, bos_id=-1, user_defined_symbols=list(symbols))
    return MarianTokenizer(str(folder / "sp.model"), str(folder / "sp.model"), str(folder / "vocab.json"))


def speech_processor(folder: Path) -> Speech2TextProcessor:
    """fairseq's ids `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3; 8 mel bins."""
    train_spm(folder, bos_id=0, pad_id=1, eos_id=2, unk_id=3)
    tokenizer = Speech2TextTokenizer(str(folder / "vocab.json"), str(folder / "sp.model"))
    features = Speech2TextFeatureExtractor(feature_size=8, num_mel_bins=8)
    return Speech2TextProcessor(feature_extractor=features, tokenizer=tokenizer)


def marian_folder(root: Path, encoder_tasks: list[str], seed: int):
    """(folder, model, tokenizer): a head-selection Marian model with `encoder_tasks` and the decoder tasks "fr" and
    "it", saved with its tokenizer into `root / "mt-model"` and prepared for remote code."""
    tokenizer = marian_tokenizer(root)
    config = HeadSelMarianConfig(
        **COMMON, vocab_size=len(tokenizer), max_position_embeddings=64, pad_token_id=2, eos_token_id=0,
        decoder_start_token_id=2, forced_eos_token_id=0, encoder_tasks=encoder_tasks, decoder_tasks=["fr", "it"],
    )
    torch.manual_seed(seed)
    model = HeadSelMarianMTModel(config).eval()
    folder = root / "mt-model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    prepare_model_folder(folder)
    return folder, model, tokenizer


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """(folder, model, tokenizer): a head-selection Marian model with one encoder and two decoder tasks."""
    return marian_folder(tmp_path_factory.mktemp("marian"), ["en"], seed=3)


@pytest.fixture(scope="module")
def fr_translator(marian):
    """The `translation` pipeline on the `marian` folder, "fr" by default."""
    folder, _, _ = marian
    return pipeline("translation", model=str(folder), trust_remote_code=True, model_kwargs={"decoder_task": "fr"},
                    **GENERATE)


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """(folder, model, processor, waveform): a head-selection Speech2Text model with two languages on both sides."""
    root = tmp_path_factory.mktemp("speech")
    processor = speech_processor(root)
    config = HeadSelSpeech2TextConfig(
        **COMMON, vocab_size=len(processor.tokenizer), input_feat_per_channel=8, input_channels=1,
        conv_channels=16, conv_kernel_sizes=(5, 5), num_conv_layers=2, max_source_positions=64,
        max_target_positions=32, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
        encoder_tasks=["es", "fr"], decoder_tasks=["es", "fr"],
    )
    torch.manual_seed(0)
    model = HeadSelSpeech2TextForConditionalGeneration(config).eval()
    folder = root / "asr-model"
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    prepare_model_folder(folder)
    waveform = np.random.RandomState(0).randn(3200).astype(np.float32)
    return folder, model, processor, waveform


def translate(model, tokenizer, texts, task: str, encoder_task: str | None = None, truncation: bool = False,
              **generate) -> list[str]:
    """The reference: `generate()` on the original model with the decoder task (and the encoder task, where given)
    by name; `generate` overrides `GENERATE`."""
    inputs = tokenizer(texts, return_tensors="pt", padding=True, truncation=truncation)
    routing = {"decoder_task_ids": task, **({"encoder_task_ids": encoder_task} if encoder_task else {})}
    tokens = model.generate(**inputs, **routing, **{**GENERATE, **generate})
    return tokenizer.batch_decode(tokens, skip_special_tokens=True)


def transcribe(model, processor, waveform, task: str, decoder_task: str | None = None) -> str:
    """The reference: `generate()` with `task` on both sides, or on the encoder only where `decoder_task` is given."""
    inputs = processor(waveform, sampling_rate=16000, return_tensors="pt")
    tokens = model.generate(inputs["input_features"], attention_mask=inputs["attention_mask"], encoder_task_ids=task,
                            decoder_task_ids=decoder_task or task, **GENERATE)
    return processor.batch_decode(tokens, skip_special_tokens=True)[0]


def test_the_tasks_translate_differently(marian):
    _, model, tokenizer = marian
    assert translate(model, tokenizer, SOURCES[:1], "fr") != translate(model, tokenizer, SOURCES[:1], "it")


def test_auto_model_with_remote_code_and_task(marian):
    folder, model, tokenizer = marian
    loaded = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True, task="it")
    assert loaded.config.default_decoder_task == "it"
    inputs = tokenizer(SOURCES, return_tensors="pt", padding=True)
    expected = model.generate(**inputs, decoder_task_ids=torch.tensor([1, 1]), **GENERATE)
    torch.testing.assert_close(loaded.generate(**inputs, **GENERATE), expected)


def test_translation_pipeline_with_task(marian):
    folder, model, tokenizer = marian
    translator = pipeline("translation", model=str(folder), trust_remote_code=True,
                          model_kwargs={"decoder_task": "it"}, **GENERATE)
    assert type(translator).__name__ == "HeadSelTranslationPipeline"
    it, fr = translate(model, tokenizer, SOURCES, "it"), translate(model, tokenizer, SOURCES, "fr")
    assert translator(SOURCES[0]) == [{"translation_text": it[0]}]  # the default set at load time
    assert translator(SOURCES[0], task="fr") == [{"translation_text": fr[0]}]  # one task for this call
    assert translator(SOURCES, decoder_task="fr", batch_size=2) == [{"translation_text": t} for t in fr]
    assert translator(SOURCES, tgt_lang="it") == [{"translation_text": t} for t in it]
    with pytest.raises(ValueError, match="unknown task 'de'"):
        translator(SOURCES[0], task="de")


RESAVE = """
    import json
    from transformers import pipeline

    folder, again, source = sys.argv[1:4]
    translator = pipeline("translation", model=folder, trust_remote_code=True, model_kwargs={"decoder_task": "fr"},
                          max_new_tokens=6, num_beams=1)
    assert type(translator.model).__module__.startswith("transformers_modules")
    translator.model.save_pretrained(again)
    translator.tokenizer.save_pretrained(again)
    reloaded = pipeline("translation", model=again, trust_remote_code=True, max_new_tokens=6, num_beams=1)
    print(json.dumps([type(reloaded).__name__, reloaded(source)[0]["translation_text"]]))
"""


def test_a_remote_code_model_saved_again_keeps_its_pipeline(marian, tmp_path):
    # Transformers caches a folder's model code and its pipeline code apart: a model loaded with remote code and
    # saved again found no pipeline module beside its code and dropped `custom_pipelines`, so `pipeline()` failed
    folder, model, tokenizer = marian
    result = run_without_hf_headsel(RESAVE, [str(folder), str(tmp_path / "again"), SOURCES[0]], tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    pipeline_class, translation = json.loads(result.stdout.strip().splitlines()[-1])
    assert pipeline_class == "HeadSelTranslationPipeline"
    assert translation == translate(model, tokenizer, SOURCES[:1], "fr")[0]  # the default task kept in the config


def test_translation_pipeline_task_at_construction(marian):
    folder, model, tokenizer = marian
    translator = pipeline("translation", model=str(folder), trust_remote_code=True, decoder_task="fr", **GENERATE)
    assert translator(SOURCES[1]) == [{"translation_text": translate(model, tokenizer, SOURCES[1:], "fr")[0]}]


def test_pipeline_model_kwargs_cannot_be_named_task(marian):
    """Transformers' `pipeline()` passes its own `task` to the model loader: `model_kwargs={"task": ...}` collides
    (hence `encoder_task` / `decoder_task` in `model_kwargs`). If this starts passing, the docs can say `task`."""
    folder, _, _ = marian
    with pytest.raises(TypeError, match="multiple values for keyword argument 'task'"):
        pipeline("translation", model=str(folder), trust_remote_code=True, model_kwargs={"task": "fr"})


def test_the_tasks_transcribe_differently(speech):
    _, model, processor, waveform = speech
    assert transcribe(model, processor, waveform, "es") != transcribe(model, processor, waveform, "fr")


def test_auto_speech_model_with_remote_code_and_task(speech):
    folder, model, processor, waveform = speech
    loaded = AutoModelForSpeechSeq2Seq.from_pretrained(folder, trust_remote_code=True, task="fr")
    assert (loaded.config.default_encoder_task, loaded.config.default_decoder_task) == ("fr", "fr")
    inputs = processor(waveform, sampling_rate=16000, return_tensors="pt")
    tokens = loaded.generate(inputs["input_features"], attention_mask=inputs["attention_mask"], **GENERATE)
    assert processor.batch_decode(tokens, skip_special_tokens=True)[0] == transcribe(model, processor, waveform, "fr")


def test_speech_recognition_pipeline_with_task(speech):
    folder, model, processor, waveform = speech
    recognizer = pipeline("automatic-speech-recognition", model=str(folder), trust_remote_code=True,
                          model_kwargs={"encoder_task": "es", "decoder_task": "es"}, **GENERATE)
    assert type(recognizer).__name__ == "HeadSelSpeechRecognitionPipeline"
    assert recognizer.type == "seq2seq"  # the stock pipeline would have taken the custom class for CTC
    assert recognizer(waveform) == {"text": transcribe(model, processor, waveform, "es")}
    assert recognizer({"raw": waveform, "sampling_rate": 16000}, task="fr") == {
        "text": transcribe(model, processor, waveform, "fr")
    }


def test_pipeline_without_hf_headsel_installed(marian, tmp_path):
    """A fresh interpreter where `import hf_headsel` fails: model and pipeline come from the folder's remote code."""
    folder, model, tokenizer = marian
    script = textwrap.dedent(
        f"""
        import importlib.abc, json, sys

        class NoHeadSel(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "hf_headsel" or name.startswith("hf_headsel."):
                    raise ImportError("hf_headsel is not installed here")

        sys.meta_path.insert(0, NoHeadSel())
        from transformers import pipeline

        translator = pipeline("translation", model={str(folder)!r}, trust_remote_code=True,
                              model_kwargs={{"decoder_task": "it"}}, max_new_tokens=6, num_beams=1)
        result = {{
            "it": translator({SOURCES!r}),
            "fr": translator({SOURCES!r}, task="fr"),
            "model_module": type(translator.model).__module__,
            "hf_headsel_imported": any(m.startswith("hf_headsel") for m in sys.modules),
        }}
        print(json.dumps(result))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["model_module"].startswith("transformers_modules.")
    assert not result["hf_headsel_imported"]
    assert result["it"] == [{"translation_text": t} for t in translate(model, tokenizer, SOURCES, "it")]
    assert result["fr"] == [{"translation_text": t} for t in translate(model, tokenizer, SOURCES, "fr")]


# --------------------------------------------------------------------------------------------------------------------
# The model card's examples ("How to use"), run as written on the folder the card describes
# --------------------------------------------------------------------------------------------------------------------

CARD_SENTENCE = "The cat sat on the mat."  # the sentence of the card's text examples
CARD_NEW_TOKENS = 8  # the generation length each folder's generation config sets, as the recipes' folders do


def run_card_examples(folder: Path, model, tmp_path, monkeypatch, capsys, namespace=None, **card) -> list:
    """Copy `folder` as published (its generation config sets `CARD_NEW_TOKENS`, which the small models' positions
    hold; the stock speech pipeline otherwise decodes 256 tokens), write `model`'s card into the copy with the copy's
    path as the model id, run the card's Python examples in order from `tmp_path`, and return what they printed, one
    evaluated line each."""
    published = Path(shutil.copytree(folder, tmp_path / folder.name))
    generation = deepcopy(model.generation_config)
    generation.max_new_tokens = CARD_NEW_TOKENS
    generation.save_pretrained(published)
    text = write_model_card(published, model, repo_id=str(published), **card).read_text(encoding="utf-8")
    blocks = python_blocks(text)
    assert blocks, "the card has no python examples"
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    run_blocks(blocks, dict(namespace or {}), "model card")
    return [ast.literal_eval(line) for line in capsys.readouterr().out.splitlines()]


def card_translation(model, tokenizer, **routing) -> list[str]:
    """The reference for the card's text examples: `generate()` on the original model."""
    inputs = tokenizer([CARD_SENTENCE], return_tensors="pt", padding=True)
    tokens = model.generate(**inputs, max_new_tokens=CARD_NEW_TOKENS, **routing)
    return tokenizer.batch_decode(tokens, skip_special_tokens=True)


def test_model_card_examples_run_on_the_folder(marian, tmp_path, monkeypatch, capsys):
    folder, model, tokenizer = marian
    printed = run_card_examples(folder, model, tmp_path, monkeypatch, capsys)
    fr, it = (card_translation(model, tokenizer, decoder_task_ids=task) for task in ("fr", "it"))
    assert fr != it  # otherwise an example ignoring its task would pass
    # Auto class with task="fr", then "it" for one call; the pipeline with the default, then task="it"
    assert printed == [fr, it, [{"translation_text": fr[0]}], [{"translation_text": it[0]}]]
    assert (tmp_path / "fr-only" / "config.json").is_file()  # the export example's folder


def test_speech_model_card_examples_run_on_the_folder(speech, tmp_path, monkeypatch, capsys):
    folder, model, processor, waveform = speech
    printed = run_card_examples(folder, model, tmp_path, monkeypatch, capsys, namespace={"waveform": waveform})
    inputs = processor(waveform, sampling_rate=16000, return_tensors="pt")

    def transcribed(decoder_task: str, **generate) -> list[str]:
        tokens = model.generate(inputs["input_features"], attention_mask=inputs["attention_mask"],
                                encoder_task_ids="es", decoder_task_ids=decoder_task,
                                max_new_tokens=CARD_NEW_TOKENS, **generate)
        return processor.batch_decode(tokens, skip_special_tokens=True)

    # the default task is the first language ("es", both sides); the other call routes the decoder to "fr"; the
    # stock speech pipeline decodes with 5 beams where the generation config does not say otherwise
    assert transcribed("es") != transcribed("fr")
    assert printed == [transcribed("es"), transcribed("fr"),
                       {"text": transcribed("es", num_beams=5)[0]}, {"text": transcribed("fr", num_beams=5)[0]}]


def test_exported_model_card_example_runs_on_the_folder(marian, tmp_path, monkeypatch, capsys):
    _, model, tokenizer = marian
    exported = model.export_task_model(encoder_task="en", decoder_task="it")
    folder = tmp_path / "source" / "it-only"
    exported.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    printed = run_card_examples(folder, exported, tmp_path, monkeypatch, capsys,
                                exported_tasks={"encoder": "en", "decoder": "it"})
    assert printed == [card_translation(model, tokenizer, decoder_task_ids="it")]


def test_causal_lm_card_examples_run_on_the_folder(tmp_path, monkeypatch, capsys):
    # the decoder alone's card: the Auto class with its default task, then "it" for one call; the stock
    # text-generation pipeline with the default, then decoder_task_ids="it" handed on to generate(); and the card of
    # a task exported from it, a stock MarianForCausalLM
    tokenizer = marian_tokenizer(tmp_path / "tokenizer")
    config = HeadSelMarianConfig(**COMMON, vocab_size=len(tokenizer), max_position_embeddings=64, pad_token_id=2,
                                 eos_token_id=0, decoder_start_token_id=2, decoder_tasks=["fr", "it"],
                                 default_decoder_task="fr")
    torch.manual_seed(3)
    model = HeadSelMarianForCausalLM(config).eval()
    folder = tmp_path / "saved" / "lm"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    printed = run_card_examples(folder, model, tmp_path, monkeypatch, capsys)
    fr, it = (card_translation(model, tokenizer, decoder_task_ids=task) for task in ("fr", "it"))
    assert fr != it  # otherwise an example ignoring its task would pass
    # the pipeline's text is the prompt as given, then what follows the prompt's tokens decoded
    prompt = len(tokenizer.decode(tokenizer(CARD_SENTENCE).input_ids, skip_special_tokens=True))
    assert printed == [fr, it, *([{"generated_text": CARD_SENTENCE + text[0][prompt:]}] for text in (fr, it))]
    assert (tmp_path / "fr-only" / "config.json").is_file()  # the export example's folder

    exported = tmp_path / "source" / "it-only"
    model.export_task_model(decoder_task="it").save_pretrained(exported)
    tokenizer.save_pretrained(exported)
    printed = run_card_examples(exported, MarianForCausalLM.from_pretrained(exported), tmp_path, monkeypatch, capsys,
                                exported_tasks={"decoder": "it"})
    assert printed == [it]


# --------------------------------------------------------------------------------------------------------------------
# The pipelines' call keywords (Transformers 4's `translation` pipeline took the same)
# --------------------------------------------------------------------------------------------------------------------


def test_translation_pipeline_language_aliases_route_their_side(tmp_path):
    # code written for the stock pipeline names languages `src_lang=` / `tgt_lang=`: each must route its own side
    folder, model, tokenizer = marian_folder(tmp_path, ["en", "de"], seed=1)
    translator = pipeline("translation", model=str(folder), trust_remote_code=True,
                          model_kwargs={"encoder_task": "en", "decoder_task": "fr"}, **GENERATE)
    default, de_fr, en_it = (translate(model, tokenizer, SOURCES, decoder, encoder_task=encoder)
                             for encoder, decoder in (("en", "fr"), ("de", "fr"), ("en", "it")))
    assert default != de_fr and default != en_it  # otherwise an ignored alias would pass
    assert translator(SOURCES) == [{"translation_text": t} for t in default]
    assert translator(SOURCES, src_lang="de") == [{"translation_text": t} for t in de_fr]
    assert translator(SOURCES, tgt_lang="it") == [{"translation_text": t} for t in en_it]
    # the documented keyword wins over its alias
    assert translator(SOURCES, src_lang="de", encoder_task="en") == [{"translation_text": t} for t in default]


def test_translation_pipeline_generate_kwargs_dict_reaches_generate(marian, fr_translator):
    # `generate_kwargs={...}` is the documented way to pass generation settings (as the stock pipelines take them)
    _, model, tokenizer = marian
    short = translate(model, tokenizer, SOURCES, "fr", max_new_tokens=2)
    assert short != translate(model, tokenizer, SOURCES, "fr")  # otherwise an ignored dict would pass
    assert fr_translator(SOURCES, generate_kwargs={"max_new_tokens": 2}) == [{"translation_text": t} for t in short]


def test_translation_pipeline_truncation_reaches_the_tokenizer(marian, fr_translator, monkeypatch):
    # `truncation=True` translates an over-long input instead of failing; by default the input is kept whole (stock)
    _, model, _ = marian
    tokenizer = fr_translator.tokenizer
    monkeypatch.setattr(tokenizer, "model_max_length", 6)
    cut, full = (translate(model, tokenizer, SOURCES[:1], "fr", truncation=truncation) for truncation in (True, False))
    assert cut != full  # otherwise an ignored `truncation` would pass
    assert fr_translator(SOURCES[0], truncation=True) == [{"translation_text": cut[0]}]
    assert fr_translator(SOURCES[0]) == [{"translation_text": full[0]}]


def test_translation_pipeline_clean_up_tokenization_spaces_reaches_decode(fr_translator, monkeypatch):
    # a caller asking for the raw text gets it (spied: without punctuation here, the clean-up never shows in a text);
    # by default the tokenizer's own setting decides, as in `batch_decode` and the recipes' scored predictions
    seen = []
    decode = fr_translator.tokenizer.decode

    def spy(*args, **kwargs):
        seen.append(kwargs.get("clean_up_tokenization_spaces"))
        return decode(*args, **kwargs)

    monkeypatch.setattr(fr_translator.tokenizer, "decode", spy)
    fr_translator(SOURCES[0], clean_up_tokenization_spaces=False)
    fr_translator(SOURCES[0], clean_up_tokenization_spaces=True)
    fr_translator(SOURCES[0])
    assert seen == [False, True, None]


def test_translation_pipeline_keeps_every_returned_sequence(marian, fr_translator):
    # `num_return_sequences=2` gives every input both candidates, grouped per input as the stock pipelines do
    _, model, tokenizer = marian
    texts = translate(model, tokenizer, SOURCES, "fr", num_beams=2, num_return_sequences=2)
    expected = [[{"translation_text": t} for t in texts[i:i + 2]] for i in (0, 2)]
    assert fr_translator(SOURCES, num_beams=2, num_return_sequences=2) == expected
    assert fr_translator(SOURCES[0], num_beams=2, num_return_sequences=2) == expected[0]


def test_speech_recognition_pipeline_routes_each_side_by_its_own_keyword(speech):
    # speech translation routes the spoken and the written language apart: each keyword moves its own side only
    folder, model, processor, waveform = speech
    recognizer = pipeline("automatic-speech-recognition", model=str(folder), trust_remote_code=True,
                          model_kwargs={"encoder_task": "es", "decoder_task": "es"}, **GENERATE)
    fr_es, es_fr = (transcribe(model, processor, waveform, *sides) for sides in (("fr", "es"), ("es", "fr")))
    assert fr_es != es_fr  # otherwise swapped sides would pass
    assert recognizer(waveform, encoder_task="fr") == {"text": fr_es}
    assert recognizer(waveform, decoder_task="fr") == {"text": es_fr}


def test_text_generation_pipeline_runs_the_causal_lm_on_its_default_or_given_task(tmp_path):
    # the decoder alone is a stock causal LM's kind: the stock `text-generation` pipeline loads it through
    # AutoModelForCausalLM, routes it by the default task it was loaded with, or by the ids a call passes on to generate
    tokenizer = marian_tokenizer(tmp_path / "tokenizer")
    config = HeadSelMarianConfig(**COMMON, vocab_size=len(tokenizer), max_position_embeddings=64, pad_token_id=2,
                                 eos_token_id=0, decoder_start_token_id=2, decoder_tasks=["fr", "it"])
    torch.manual_seed(3)
    model = HeadSelMarianForCausalLM(config).eval()
    folder = tmp_path / "lm"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    # greedy, as `generate` below (the text-generation pipeline samples unless told otherwise)
    generator = pipeline("text-generation", model=str(folder), model_kwargs={"decoder_task": "it"}, do_sample=False,
                         **GENERATE)
    assert type(generator.model) is HeadSelMarianForCausalLM
    prompt = tokenizer(SOURCES[0], return_tensors="pt").input_ids
    fr, it = (tokenizer.decode(model.generate(prompt, decoder_task_ids=[task], **GENERATE)[0], skip_special_tokens=True)
              for task in ("fr", "it"))
    assert fr != it  # otherwise a task ignored would pass
    assert generator(SOURCES[0]) == [{"generated_text": it}]
    assert generator(SOURCES[0], decoder_task_ids=torch.tensor([0])) == [{"generated_text": fr}]
