"""Model cards, model folders and Hub uploads (to the recording Hub of `recording_hub.py`, on 127.0.0.1)."""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from huggingface_hub import ModelCard
from huggingface_hub import constants as hub_constants
from transformers import AutoConfig, TrainingArguments
from transformers.utils import logging as hf_logging

from hf_headsel import (
    HeadSelMarianConfig,
    HeadSelMarianForCausalLM,
    HeadSelMarianMTModel,
    HeadSelSpeech2TextConfig,
    HeadSelSpeech2TextForConditionalGeneration,
)
from hf_headsel.conversion import export_task_model
from hf_headsel.families import MARIAN
from hf_headsel.hub import (
    DEFAULT_IGNORE_PATTERNS,
    MetricRecord,
    check_upload,
    collect_metrics,
    create_hub_repo,
    hub_repo_id,
    eval_results,
    prepare_model_folder,
    push_to_hub,
    reads_target_lang_token,
    remote_code_files,
    results_table,
    write_model_card,
)
from hf_headsel.model_card import language_token
from hf_headsel.model_folder import SHARED_REMOTE_CODE

from conftest import CORE_FILES  # noqa: E402
from recording_hub import RecordingHub  # noqa: E402
from test_pipelines import COMMON, card_translation, marian_tokenizer, run_card_examples  # noqa: E402

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()

ROOT = Path(__file__).resolve().parents[1]
REMOTE_CODE = {*CORE_FILES, "pipeline_headsel.py", "configuration_headsel_marian.py", "modeling_headsel_marian.py"}
TINY = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=40)


def marian_model(seed: int = 0, **overrides) -> HeadSelMarianMTModel:
    torch.manual_seed(seed)
    config = HeadSelMarianConfig(**{**TINY, "max_position_embeddings": 32, "pad_token_id": 39,
                                    "decoder_start_token_id": 39, "encoder_tasks": ["en", "de"],
                                    "decoder_tasks": ["fr", "it", "es"], **overrides})
    model = HeadSelMarianMTModel(config).eval()
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.normal_(std=3.0)
    return model


def shared_heads(heads: torch.Tensor, i: int, j: int) -> float:
    """The fraction of their selected heads tasks `i` and `j` share (a card's sharing-table cell), over the layers of
    `heads` (`selected_heads()[component]`, [tasks, layers, heads])."""
    return sum(len(set(heads[i, layer].tolist()) & set(heads[j, layer].tolist()))
               for layer in range(heads.shape[1])) / heads[0].numel()


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x80")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


# --------------------------------------------------------------------------------------------------------------------
# Metrics and model cards
# --------------------------------------------------------------------------------------------------------------------


def test_collect_metrics_reads_trainer_and_nested_metrics():
    flat = {"eval_bleu": 20.0, "eval_bleu_en-fr": 21.5, "eval_bleu_pooled": 19.0, "eval_loss": 2.0,
            "predict_wer_es": 12.0, "epoch": 3.0, "bleu": 1.0, "eval_bleu_en-fr_ci_low": 20.1,
            "eval_bleu_ci_high": 22.0}
    assert collect_metrics(flat) == [
        MetricRecord("validation", "bleu", None, 20.0),
        MetricRecord("validation", "bleu", "en-fr", 21.5),
        MetricRecord("validation", "bleu", "pooled", 19.0),
        MetricRecord("test", "wer", "es", 12.0),
        MetricRecord("validation", "bleu", None, 1.0),
    ]
    nested = {"eval": {"eval_wer": 10.0, "eval_wer_es": 9.0}, "predict": {"predict_wer_fr": 11.0}}
    assert collect_metrics(nested) == [MetricRecord("validation", "wer", None, 10.0),
                                       MetricRecord("validation", "wer", "es", 9.0),
                                       MetricRecord("test", "wer", "fr", 11.0)]
    assert collect_metrics({"fr": {"bleu": 30.0}, "it": {"chrf": 50.0}}) == [
        MetricRecord("validation", "bleu", "fr", 30.0), MetricRecord("validation", "chrf", "it", 50.0)]
    assert collect_metrics(None) == []


def test_model_card_metadata_and_sections(tmp_path):
    model = marian_model(default_decoder_task="fr")
    heatmap = tmp_path / "plots" / "sharing.png"
    heatmap.parent.mkdir()
    heatmap.write_bytes(tiny_png())
    metrics = {"eval_bleu": 20.0, "eval_bleu_en-fr": 21.5, "eval_bleu_de-it": 18.25, "eval_loss": 2.0}
    repo_id = "me/mt-headsel"  # only written into the card's usage snippets: nothing is uploaded or downloaded
    path = write_model_card(
        tmp_path / "model", model, metrics, repo_id=repo_id, dataset_name="Europarl-ST",
        dataset_id="europarl_st", base_model="Helsinki-NLP/opus-mt-en-de", heatmap_path=heatmap,
        training_args={"learning_rate": 5e-4, "max_steps": 1000, "callbacks": object()},
    )
    card = ModelCard.load(path)
    data = card.data
    assert data.language == ["en", "de", "fr", "it", "es"]
    assert data.license == "apache-2.0" and data.library_name == "transformers"
    assert data.pipeline_tag == "translation" and data.base_model == "Helsinki-NLP/opus-mt-en-de"
    assert data.datasets == ["europarl_st"]
    assert {"head-selection", "marian", "multilingual", "custom_code"} <= set(data.tags)
    results = {(r.dataset_config, r.metric_type): r.metric_value for r in data.eval_results}
    assert results == {(None, "bleu"): 20.0, ("en-fr", "bleu"): 21.5, ("de-it", "bleu"): 18.25}
    assert all(r.dataset_name == "Europarl-ST" and r.task_type == "translation" for r in data.eval_results)

    text = card.text
    # the scored direction with the decoder default; the encoder, of two tasks without a default, is named too
    load = f'from_pretrained("{repo_id}", trust_remote_code=True, encoder_task="en", decoder_task="fr")'
    assert f"AutoModelForSeq2SeqLM.{load}" in text
    # the tokenizer reads the model's config too: without the flag, Transformers asks on the terminal
    loads = [line for line in text.splitlines() if f'from_pretrained("{repo_id}"' in line]
    assert len(loads) == 2 and all("trust_remote_code=True" in line for line in loads)
    assert f'pipeline("translation", model="{repo_id}"' in text
    assert '{"encoder_task": "en", "decoder_task": "fr"}' in text
    assert "| validation | en-fr | 21.50 |" in text
    assert "![Heads shared between tasks](head_sharing.png)" in text
    assert (tmp_path / "model" / "head_sharing.png").read_bytes() == heatmap.read_bytes()
    assert "| `learning_rate` | 0.0005 |" in text and "| `max_steps` | 1000 |" in text and "callbacks" not in text
    assert "| `head_selection_strategy` | `group` |" in text
    # the sharing table: the fraction of the 4 heads "fr" and "it" share, averaged over the 2 layers
    assert f"| fr | 1.00 | {shared_heads(model.selected_heads()['decoder_self'], 0, 1):.2f} |" in text


def test_a_local_base_model_stays_out_of_the_metadata(tmp_path):
    # the Hub's metadata check refuses a base_model that names no Hub model (a push would fail after training)
    card = ModelCard.load(write_model_card(tmp_path / "model", marian_model(), base_model=str(tmp_path)))
    assert card.data.base_model is None


def test_the_card_leaves_hub_tokens_out(tmp_path):
    # a dict of flags (as the demo passes) lists every scalar, but a card is public: TrainingArguments.to_dict masks
    # the same keys
    flags = {"learning_rate": 5e-4, "push_to_hub": True, "hub_token": "hf_SECRET_TOKEN", "token": "hf_OTHER"}
    text = write_model_card(tmp_path / "model", marian_model(), training_args=flags).read_text()
    assert "| `push_to_hub` | True |" in text
    assert "hf_SECRET_TOKEN" not in text and "hf_OTHER" not in text and "hub_token" not in text


def test_card_languages_are_codes_and_tags(tmp_path, caplog):
    card = ModelCard.load(write_model_card(tmp_path / "a", marian_model(), languages="en"))  # one language
    assert card.data.language == ["en"] and card.data.to_dict().get("language_bcp47") is None
    # the Hub takes ISO 639 codes in `language`; a region or script goes in `language_bcp47`
    model = marian_model(encoder_tasks=["en"], decoder_tasks=["zh-CN", "pt_BR", "sv-SE", "pt"])
    data = ModelCard.load(write_model_card(tmp_path / "b", model)).data.to_dict()
    assert data["language"] == ["en", "zh", "pt", "sv"]
    assert data["language_bcp47"] == ["en", "zh-CN", "pt-BR", "sv-SE", "pt"]
    with pytest.raises(ValueError, match="'english' is not a language tag: .* ISO 639 codes .* BCP 47 tags"):
        write_model_card(tmp_path / "c", model, languages=["en", "english"])
    # task names are the user's: the card a training run writes at its end leaves a non-tag out, with a warning
    with caplog.at_level(logging.WARNING, logger="hf_headsel.model_card"):
        data = ModelCard.load(write_model_card(tmp_path / "d", marian_model(encoder_tasks=["source"]))).data
    assert "leave out the task names ['source']" in caplog.text and "source" not in data.language


def test_model_card_for_speech_and_exported_models(tmp_path):
    torch.manual_seed(0)
    config = HeadSelSpeech2TextConfig(**TINY, input_feat_per_channel=8, encoder_tasks=["tedx", "covost"],
                                      decoder_tasks=["tedx", "covost"], task_type="domain",
                                      head_selection_strategy="subset")
    model = HeadSelSpeech2TextForConditionalGeneration(config).eval()
    card = ModelCard.load(write_model_card(tmp_path / "asr", model, {"eval_wer_tedx": 12.0}))
    assert card.data.pipeline_tag == "automatic-speech-recognition" and card.data.language is None
    assert "multi-domain" in card.data.tags and "Tasks are **domains**" in card.text
    assert card.data.eval_results[0].task_type == "automatic-speech-recognition"
    assert 'model_kwargs={"encoder_task": "tedx", "decoder_task": "tedx"}' in card.text

    exported = export_task_model(marian_model(), encoder_task="de", decoder_task="it")
    card = ModelCard.load(write_model_card(tmp_path / "de-it", exported, {"bleu": 18.0},
                                           exported_tasks={"encoder": "de", "decoder": "it"},
                                           source_model="me/mt-headsel", languages=["de", "it"]))
    assert card.data.language == ["de", "it"] and "custom_code" not in card.data.tags
    assert [(r.dataset_config, r.metric_value) for r in card.data.eval_results] == [("de-it", 18.0)]
    assert "encoder task `de`, decoder task `it`" in card.text and "`me/mt-headsel`" in card.text
    assert "MarianMTModel.from_pretrained" in card.text and "trust_remote_code" not in card.text
    with pytest.raises(ValueError, match="exported_tasks"):
        write_model_card(tmp_path / "x", exported)
    with pytest.raises(ValueError, match="exported_tasks"):
        write_model_card(tmp_path / "x", model, exported_tasks={"decoder": "tedx"})


# The examples of a card run a direction the model was trained for, with every side that has a choice named:
# (config, metrics) -> (the direction of the examples, the other call's, the export example's folder)
CARD_LAYOUTS = {
    "many-to-one": (dict(encoder_tasks=["de", "fr"], decoder_tasks=["en"]), None,
                    ("de", "en"), ("fr", "en"), "de-only"),
    "sources without a default": (dict(encoder_tasks=["en", "de"], decoder_tasks=["fr", "it"],
                                       default_decoder_task="it"), None, ("en", "it"), ("en", "fr"), "en-it-only"),
    "many-to-many, scored": (dict(encoder_tasks=["de", "en"], decoder_tasks=["de", "en", "fr"]),
                             {"eval_bleu_de-en": 1.0, "eval_bleu_en-fr": 2.0}, ("en", "fr"), ("en", "de"),
                             "en-fr-only"),
}


@pytest.fixture(scope="module")
def card_tokenizer(tmp_path_factory):
    return marian_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.mark.parametrize("layout", CARD_LAYOUTS)
def test_card_examples_run_a_trained_direction(layout, card_tokenizer, tmp_path, monkeypatch, capsys):
    tasks, metrics, direction, other, export_folder = CARD_LAYOUTS[layout]
    config = HeadSelMarianConfig(**COMMON, vocab_size=len(card_tokenizer), max_position_embeddings=64, pad_token_id=2,
                                 eos_token_id=0, decoder_start_token_id=2, forced_eos_token_id=0, **tasks)
    # the first seed whose model translates the two directions differently (otherwise an example ignoring its task
    # would pass); which seed that is depends on the torch and Transformers versions' initialisation
    for seed in range(3, 13):
        torch.manual_seed(seed)
        model = HeadSelMarianMTModel(config).eval()
        expected, routed = (card_translation(model, card_tokenizer, encoder_task_ids=encoder, decoder_task_ids=decoder)
                            for encoder, decoder in (direction, other))
        if expected != routed:
            break
    assert expected != routed, "no seed of 3-12 gives the two directions different translations"
    folder = tmp_path / "saved" / "model"
    model.save_pretrained(folder)
    card_tokenizer.save_pretrained(folder)
    printed = run_card_examples(folder, model, tmp_path, monkeypatch, capsys, metrics=metrics)

    assert printed == [expected, routed, [{"translation_text": expected[0]}], [{"translation_text": routed[0]}]]
    assert (tmp_path / export_folder / "config.json").is_file()


def test_card_examples_carry_the_target_language_token_the_model_was_trained_with(tmp_path):
    # trained with --target_lang_token, a one-to-many model reads its target language from the source: without the
    # token the card's examples translated every language into whatever the model guessed (German in the demo)
    model = marian_model(encoder_tasks=["en"], decoder_tasks=["fr", "it"])
    text = write_model_card(tmp_path / "a", model, target_lang_token=True).read_text()
    assert 'tokenizer([">>fr<< The cat sat on the mat."]' in text and 'pipe(">>fr<< The cat sat on the mat.")' in text
    assert 'tokenizer([">>it<< The cat sat on the mat."]' in text  # the call routed to the other language
    assert 'pipe(">>it<< The cat sat on the mat.", decoder_task="it")' in text
    assert ">>" not in write_model_card(tmp_path / "b", model).read_text()  # trained without: no token
    domains = marian_model(encoder_tasks=["news", "web"], decoder_tasks=["news", "web"], task_type="domain")
    text = write_model_card(tmp_path / "c", domains, target_lang_token=True).read_text()
    assert "start each source with '>>xx<<' (its language code)" in text and '">>' not in text


def test_an_exported_cards_examples_carry_its_target_language_token(tmp_path, card_tokenizer):
    # the exported stock config has no task type: the source's, given, says the decoder task is the language
    exported = export_task_model(marian_model(encoder_tasks=["en"], decoder_tasks=["fr", "it"]), encoder_task="en",
                                 decoder_task="it")
    tasks = {"encoder": "en", "decoder": "it"}
    text = write_model_card(tmp_path / "a", exported, exported_tasks=tasks, target_lang_token=True,
                            task_type="lang").read_text()
    assert 'tokenizer([">>it<< The cat sat on the mat."]' in text
    for task_type in ("domain", None):  # the language is the user's to give
        text = write_model_card(tmp_path / "b", exported, exported_tasks=tasks, target_lang_token=True,
                                task_type=task_type).read_text()
        assert "start each source with '>>xx<<' (its language code)" in text and '">>' not in text
    with pytest.raises(ValueError, match="task_type describes the source of an exported model"):
        write_model_card(tmp_path / "c", marian_model(), task_type="lang")
    # what headsel-export-tasks reads from the source's tokenizer
    assert not reads_target_lang_token(card_tokenizer)
    assert reads_target_lang_token(marian_tokenizer(tmp_path / "spm", symbols=(">>fr<<",)))
    # the recipes' own token (written once, in the core), region subtags included
    assert language_token("zh-CN") == ">>zh-CN<<"
    assert reads_target_lang_token(marian_tokenizer(tmp_path / "spm_zh", symbols=(language_token("zh-CN"),)))


def test_card_describes_the_heads_of_a_side_that_does_not_select(tmp_path):
    # the demo's encoder selects nothing: the card said "4 used per task, out of 8 candidates" of it
    text = write_model_card(tmp_path, marian_model(head_selection_components=["decoder_self"])).read_text()
    assert "| encoder heads | 4, the same for every task (no encoder component selects) |" in text
    assert "| decoder heads | 4 used per task, out of 8 candidates |" in text


def test_prepare_model_folder(tmp_path):
    model = marian_model()
    model.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "conversion.py").unlink(missing_ok=True)
    assert (tmp_path / "model" / "pipeline_headsel.py").is_file()  # the model code names it (remote-code re-saves)
    written = prepare_model_folder(tmp_path / "model")
    assert {"conversion.py", "config.json"} <= set(written)
    needed = set(remote_code_files((*MARIAN.modules, *SHARED_REMOTE_CODE)))  # with what they import
    assert REMOTE_CODE <= needed <= {p.name for p in (tmp_path / "model").glob("*.py")}
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_headsel.HeadSelTranslationPipeline"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_headsel_marian.HeadSelMarianMTModel"
    assert AutoConfig.from_pretrained(tmp_path / "model").custom_pipelines == config["custom_pipelines"]
    assert prepare_model_folder(tmp_path / "model") == []  # idempotent
    # an exported (stock) folder stays stock
    export_task_model(model, encoder_task="en", decoder_task="fr").save_pretrained(tmp_path / "stock")
    before = (tmp_path / "stock" / "config.json").read_text()
    assert prepare_model_folder(tmp_path / "stock") == []
    assert (tmp_path / "stock" / "config.json").read_text() == before
    with pytest.raises(ValueError, match="no config.json"):
        prepare_model_folder(tmp_path)
    # writing the card into a saved folder completes it too (the card advertises the pipelines)
    (tmp_path / "model" / "pipeline_headsel.py").unlink()
    write_model_card(tmp_path / "model", model)
    assert (tmp_path / "model" / "pipeline_headsel.py").is_file()


def test_a_causal_lm_folder_gets_remote_code_no_custom_pipeline_and_a_text_generation_card(tmp_path, hub,
                                                                                          monkeypatch):
    # the stock text-generation pipeline serves the decoder alone: its folder gets no custom pipeline, and its card
    # (written by the library, or by the push tool, which loads it with its own class) shows that pipeline's usage
    from headsel_recipes.cli.push_to_hub import main as push_cli

    translation_config = marian_model().config.to_dict()
    translation_config["custom_pipelines"] = MARIAN.custom_pipelines  # as a translation folder's config carries it
    model = HeadSelMarianForCausalLM(HeadSelMarianConfig.from_dict(translation_config)).eval()
    folder = tmp_path / "lm"
    model.save_pretrained(folder)
    written = prepare_model_folder(folder)
    assert "config.json" in written and "modeling_head_selection_causal_lm.py" in {
        p.name for p in folder.glob("*.py")}
    config = json.loads((folder / "config.json").read_text())
    assert "custom_pipelines" not in config and config["architectures"] == ["HeadSelMarianForCausalLM"]
    assert prepare_model_folder(folder) == []  # idempotent

    card = ModelCard.load(write_model_card(folder, model, repo_id="me/lm"))
    assert card.data.pipeline_tag == "text-generation" and "translation" not in card.data.tags
    assert card.data.language == ["fr", "it", "es"]  # the decoder's tasks: it reads no source task
    assert "custom_code" in card.data.tags and "decoder-only language model" in card.text
    assert 'AutoModelForCausalLM.from_pretrained("me/lm", trust_remote_code=True, decoder_task="fr")' in card.text
    assert 'pipeline("text-generation", model="me/lm"' in card.text
    assert 'pipe("The cat sat on the mat.", decoder_task_ids="it")' in card.text  # handed on to generate()
    # no encoder: neither its tasks, nor its heads, nor its settings
    assert "| decoder | `fr`, `it`, `es` | - |" in card.text and "| encoder |" not in card.text
    assert "encoder heads" not in card.text and "`encoder_layers`" not in card.text
    assert "cross-attention keyed by" not in card.text  # no cross-attention selects
    assert "**decoder_self**" in card.text and "| `total_decoder_attention_heads` | 8 |" in card.text

    (folder / "README.md").unlink()
    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    push_cli([str(folder), "me/lm", "--token", "hf_fake"])
    assert hub.errors == [] and ModelCard(hub.files()["README.md"].decode()).data.pipeline_tag == "text-generation"
    assert "custom_pipelines" not in json.loads(hub.files()["config.json"])


def test_the_card_of_a_causal_lm_reading_the_source_task(tmp_path):
    # a pair-keyed cross-attention reads the source task of the encoder states it is given: the card lists the
    # encoder's tasks and keyword; its examples, which give no encoder states, route the decoder task
    config = marian_model(head_selection_components=["decoder_self", "decoder_cross"],
                          cross_attention_task_key="pair").config
    text = write_model_card(tmp_path, HeadSelMarianForCausalLM(config).eval(), repo_id="me/lm").read_text()
    assert "| encoder | `en`, `de` | - |" in text and "`encoder_task_ids` / `decoder_task_ids`" in text
    assert "| cross-attention keyed by | the (encoder, decoder) pair" in text and "`encoder_layers`" not in text
    assert 'trust_remote_code=True, encoder_task="en", decoder_task="fr")' in text
    assert 'model.generate(**inputs, decoder_task_ids="it")' in text and 'encoder_task_ids="' not in text


def saved_folder(tmp_path: Path) -> tuple[Path, HeadSelMarianMTModel]:
    """A training output folder: model, card, a plot, and things that must not be uploaded."""
    model = marian_model()
    folder = tmp_path / "output"
    model.save_pretrained(folder)
    (folder / "head_sharing.png").write_bytes(tiny_png())
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "model.safetensors").write_bytes(b"old")
    (folder / "runs").mkdir()
    (folder / "runs" / "events.out").write_bytes(b"log")
    (folder / "optimizer.pt").write_bytes(b"state")
    return folder, model


def test_a_missing_heatmap_is_refused_before_the_card_is_written(tmp_path):
    folder, model = saved_folder(tmp_path)
    missing = folder / "head_sharing_decoder_self.png"
    with pytest.raises(ValueError, match=f"heatmap_path '{re.escape(str(missing))}' is not a file"):
        write_model_card(folder, model, {"eval_bleu_en-fr": 21.5}, heatmap_path=missing)
    assert not (folder / "README.md").exists()


def test_push_to_hub_uploads_the_folder(tmp_path, hub, monkeypatch, caplog):
    folder, model = saved_folder(tmp_path)
    write_model_card(folder, model, {"eval_bleu_en-fr": 21.5}, repo_id="me/tiny",
                     heatmap_path=folder / "head_sharing.png")
    monkeypatch.setenv("HF_TOKEN", "hf_logged_in")  # the token passed wins over the logged-in one
    with caplog.at_level(logging.WARNING, logger="hf_headsel.hub"):
        info = push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake", private=True,
                           commit_message="first upload")

    assert hub.errors == [] and "README.md" not in caplog.text  # a card: no warning about one
    assert hub.commits[-1]["token"] == "hf_fake"
    assert hub.created == [{"name": "tiny", "organization": "me", "visibility": "private", "type": "model"}]
    commit = hub.commits[-1]
    assert (commit["repo_id"], commit["revision"], commit["summary"]) == ("me/tiny", "main", "first upload")
    expected = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    expected -= {"checkpoint-10/model.safetensors", "runs/events.out", "optimizer.pt"}
    assert set(hub.files()) == expected
    assert REMOTE_CODE | {"README.md", "config.json", "model.safetensors", "head_sharing.png"} <= expected
    for name, content in hub.files().items():
        assert content == (folder / name).read_bytes(), name
    assert set(commit["lfs"]) == {"model.safetensors", "head_sharing.png"}  # went through the LFS transfer
    assert json.loads(hub.files()["config.json"])["custom_pipelines"]["translation"]
    assert ModelCard(hub.files()["README.md"].decode()).data.eval_results[0].metric_value == 21.5
    assert [r for r in hub.requests if r[1] == "/api/validate-yaml"]
    assert info.commit_url.startswith(f"{hub.url}/me/tiny/commit/")


def test_push_to_hub_with_a_bare_name_and_a_new_branch(tmp_path, hub):
    # the Hub creates a bare name under the token's user and commits only to branches that exist
    folder, _ = saved_folder(tmp_path)
    assert create_hub_repo("tiny", endpoint=hub.url, token="hf_fake") == "me/tiny"
    # to a repository that exists: the Hub answers the upload's create with 409, and the upload goes on
    info = push_to_hub(folder, "tiny", endpoint=hub.url, token="hf_fake", revision="v2")
    assert hub.errors == []
    assert (hub.commits[-1]["repo_id"], hub.commits[-1]["revision"]) == ("me/tiny", "v2")
    assert info.repo_url.repo_id == "me/tiny"


def test_push_to_hub_opens_a_pull_request_and_commits_to_it(tmp_path, hub):
    folder, _ = saved_folder(tmp_path)
    info = push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake", create_pr=True)
    assert info.pr_revision == "refs/pr/1" and hub.commits[-1]["revision"] == "refs/pr/1"  # not main
    # a later upload to the open pull request commits to its ref, which is no branch to create
    push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake", revision="refs/pr/1", commit_message="fix")
    assert hub.errors == [] and (hub.commits[-1]["revision"], hub.commits[-1]["summary"]) == ("refs/pr/1", "fix")
    assert not [path for _, path in hub.requests if "/branch/" in path]


def test_a_resaved_model_keeps_its_pipeline_loadable(tmp_path, caplog):
    folder, _ = saved_folder(tmp_path)
    prepare_model_folder(folder)
    loaded = HeadSelMarianMTModel.from_pretrained(folder)  # its config names the folder's pipeline class
    loaded.save_pretrained(tmp_path / "resaved")
    impl = json.loads((tmp_path / "resaved" / "config.json").read_text())["custom_pipelines"]["translation"]["impl"]
    module = tmp_path / "resaved" / f"{impl.split('.')[0]}.py"
    assert module.read_bytes() == (ROOT / "src" / "hf_headsel" / module.name).read_bytes()

    loaded.config.custom_pipelines = {"translation": {**loaded.config.custom_pipelines["translation"],
                                                      "impl": "not_beside_the_code.Pipeline"}}
    loaded.save_pretrained(tmp_path / "elsewhere")  # a module it cannot find: the entry is left out, not dangling
    assert json.loads((tmp_path / "elsewhere" / "config.json").read_text()).get("custom_pipelines") in (None, {})
    assert not (tmp_path / "elsewhere" / "not_beside_the_code.py").exists()


def test_push_to_hub_stops_on_invalid_card_metadata(tmp_path, hub):
    folder, _ = saved_folder(tmp_path)
    (folder / "README.md").write_text("---\nmodel-index:\n- name: x\n  results:\n  - metrics: [{value: 1}]\n---\n")
    with pytest.raises(ValueError, match="Invalid metadata in README.md"):
        push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake")
    assert hub.commits == []  # nothing committed


def test_push_to_hub_keeps_the_hub_token_out(tmp_path, hub, monkeypatch):
    secret = "hf_SECRET_TOKEN_123"
    folder, _ = saved_folder(tmp_path)
    torch.save(TrainingArguments(output_dir=str(folder), hub_token=secret, report_to=[]),
               folder / "training_args.bin")  # as Trainer.save_model writes it: the token in clear
    assert secret.encode() in (folder / "training_args.bin").read_bytes()
    push_to_hub(folder, "me/tiny", endpoint=hub.url, token=secret)
    assert hub.errors == [] and "training_args.bin" not in hub.files()
    assert not [name for name, content in hub.files().items() if secret.encode() in content]

    # a saved run configuration repeating --hub_token: refused, naming it, before anything is created; the token
    # searched for is the one the upload uses: the one passed, else the logged-in one (None, True)
    (folder / "run_config.json").write_text(json.dumps({"learning_rate": 5e-4, "hub_token": secret}))
    for token, logged_in in ((secret, "hf_another_token"), (None, secret), (True, secret)):
        monkeypatch.setenv("HF_TOKEN", logged_in)
        with pytest.raises(ValueError, match=r"\['run_config.json'\] in .* hold the Hub token this upload uses"):
            push_to_hub(folder, "me/other", endpoint=hub.url, token=token)
    assert len(hub.created) == len(hub.commits) == 1  # the first upload only
    push_to_hub(folder, "me/tiny", endpoint=hub.url, token=secret, ignore_patterns=["run_config.json"])
    assert "run_config.json" not in hub.commits[-1]["files"]


def test_check_upload_searches_what_the_upload_sends(tmp_path):
    secret = "hf_SECRET_TOKEN_123"
    folder, _ = saved_folder(tmp_path)
    # a cloned repository's .git/ (its remote URL may hold the token) and huggingface_hub's .cache/huggingface/ are
    # never uploaded: neither listed nor searched
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text(f'[remote "origin"]\n\turl = https://me:{secret}@huggingface.co/me/tiny\n')
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / ".cache" / "huggingface" / ".gitignore").write_text("*\n")
    files = check_upload(folder, token=secret)
    assert "model.safetensors" in files and not [name for name in files if name.startswith((".git/", ".cache/"))]
    # a training log of a MiB is searched (what could hold the token: anything but weights)
    (folder / "train.log").write_bytes(b"step\n" * (2**20 // 5) + f"hub_token={secret}\n".encode())
    with pytest.raises(ValueError, match=r"\['train.log'\] in .* hold the Hub token this upload uses"):
        check_upload(folder, token=secret)


def test_push_to_hub_refuses_a_folder_without_weights(tmp_path, hub, caplog):
    folder, model = saved_folder(tmp_path)
    (folder / "model.safetensors").unlink()  # only in the ignored checkpoint-10/
    (folder / "conversion.py").unlink()  # a module prepare_model_folder would add
    with pytest.raises(ValueError, match="holds no model weights to upload"):
        push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake")
    assert hub.created == [] and hub.commits == []
    assert not (folder / "conversion.py").exists()  # refused before the folder was completed

    # weights saved by an older Transformers (pytorch_model.bin) count too; without a card or a tokenizer: uploaded,
    # with warnings (the card's examples load one)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    with caplog.at_level(logging.WARNING, logger="hf_headsel.hub"):
        push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake")
    assert "pytorch_model.bin" in hub.files() and hub.errors == []
    assert "has no README.md" in caplog.text and "has no tokenizer or processor files" in caplog.text
    # a tokenizer, or a speech model's feature extractor (preprocessor_config.json): no warning about them
    model.save_pretrained(folder)
    for name in ("tokenizer_config.json", "preprocessor_config.json"):
        caplog.clear()
        (folder / name).write_text("{}")
        with caplog.at_level(logging.WARNING, logger="hf_headsel.hub"):
            push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake")
        assert "tokenizer" not in caplog.text and hub.errors == []
        (folder / name).unlink()
    # the same checks without the Hub: the files that go, the ignored checkpoint left out
    files = check_upload(folder, token="hf_fake")
    assert "model.safetensors" in files and not [name for name in files if name.startswith("checkpoint-")]


def test_push_to_hub_needs_a_model_folder(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        push_to_hub(tmp_path, "me/tiny", endpoint="http://127.0.0.1:9", token="hf_fake")


def test_ignore_patterns_are_relative_globs():
    assert "checkpoint-*/**" in DEFAULT_IGNORE_PATTERNS and "runs/**" in DEFAULT_IGNORE_PATTERNS


def test_push_cli_with_hf_endpoint(tmp_path):
    """`training/push_to_hub.py` in a fresh process, pointed at the recording Hub with `HF_ENDPOINT`; the folder has
    no card, so the tool writes one (with the Trainer's scores) before uploading."""
    folder, _ = saved_folder(tmp_path)
    repo_id = "me/cli-model"  # a repository of the recording Hub (below), not of the real one
    (folder / "all_results.json").write_text(json.dumps({"eval_bleu": 17.0, "eval_bleu_de-it": 16.0}))
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    with RecordingHub() as hub:
        env.update(HF_ENDPOINT=hub.url, HF_TOKEN="hf_fake", HF_HUB_DISABLE_XET="1", NO_PROXY="127.0.0.1",
                   HF_HOME=str(tmp_path / "hf_home"))
        completed = subprocess.run(
            [sys.executable, str(ROOT / "training" / "push_to_hub.py"), str(folder), repo_id,
             "--dataset_name", "Europarl-ST"],
            capture_output=True, text=True, env=env, timeout=180,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert hub.errors == []
        files = hub.files()
    assert completed.stdout.strip().splitlines()[-1].startswith(f"{hub.url}/{repo_id}/commit/")
    assert REMOTE_CODE | {"README.md", "config.json", "model.safetensors", "all_results.json"} <= set(files)
    assert not {name for name in files if name.startswith(("checkpoint-", "runs/")) or name == "optimizer.pt"}
    card = ModelCard(files["README.md"].decode())
    assert {(r.dataset_config, r.metric_value) for r in card.data.eval_results} == {(None, 17.0), ("de-it", 16.0)}
    assert f'from_pretrained("{repo_id}", trust_remote_code=True' in card.text
    assert files["model.safetensors"] == (folder / "model.safetensors").read_bytes()


def test_push_cli_refuses_what_it_would_not_do_before_any_upload(tmp_path):
    from headsel_recipes.cli.push_to_hub import main as push_cli

    folder, model = saved_folder(tmp_path)
    write_model_card(folder, model, repo_id="me/tiny")  # as training writes it
    with pytest.raises(ValueError, match="--dataset_name --license describe the card, .* pass --write_card"):
        push_cli([str(folder), "me/tiny", "--dataset_name", "Europarl-ST", "--license", "mit"])
    export_task_model(model, encoder_task="en", decoder_task="fr").save_pretrained(tmp_path / "stock")
    with pytest.raises(ValueError, match="holds a 'marian' model: this tool writes the cards of head-selection"):
        push_cli([str(tmp_path / "stock"), "me/stock"])  # no README.md to upload, none it can write
    (tmp_path / "stock" / "README.md").write_text("# an exported model's card\n")
    with pytest.raises(ValueError, match="holds a 'marian' model: this tool writes the cards of head-selection"):
        push_cli([str(tmp_path / "stock"), "me/stock", "--write_card"])  # a card it keeps, but none it can write


def test_push_cli_names_a_bare_repository_and_creates_it_once_the_upload_checks_pass(tmp_path, hub, monkeypatch):
    # the card names the whole id before anything is created: a refused upload left an empty repository, public by
    # default; an accepted one is created once, by the upload
    from headsel_recipes.cli.push_to_hub import main as push_cli

    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    folder, _ = saved_folder(tmp_path)
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="holds no model weights"):
        push_cli([str(folder), "tiny", "--token", "hf_fake"])
    assert hub.created == [] and hub.commits == []
    (folder / "model.safetensors").write_bytes(weights)
    push_cli([str(folder), "tiny", "--token", "hf_fake", "--write_card"])
    assert hub.errors == [] and len(hub.created) == 1
    assert hub.commits[-1]["repo_id"] == "me/tiny" and 'from_pretrained("me/tiny"' in (folder / "README.md").read_text()


def test_push_cli_rewrites_a_kept_card_with_its_flags_and_uploads_private(tmp_path, hub, monkeypatch):
    from headsel_recipes.cli.push_to_hub import main as push_cli

    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    folder, model = saved_folder(tmp_path)
    write_model_card(folder, model, repo_id="me/tiny")  # as training writes it
    push_cli([str(folder), "me/tiny", "--token", "hf_fake", "--write_card", "--license", "mit", "--private"])
    assert hub.errors == [] and [payload.get("visibility") for payload in hub.created] == ["private"]
    assert ModelCard((folder / "README.md").read_text()).data.license == "mit"  # the flag's, not the kept card's


def test_push_cli_says_when_a_kept_card_names_another_repository(tmp_path, hub, monkeypatch, caplog):
    from headsel_recipes.cli.push_to_hub import main as push_cli

    monkeypatch.setattr(hub_constants, "ENDPOINT", hub.url)
    folder, model = saved_folder(tmp_path)
    write_model_card(folder, model, repo_id="me/tiny")  # as training writes it
    kept = (folder / "README.md").read_bytes()
    for repo_id in ("me/tiny", "me/other"):
        with caplog.at_level(logging.WARNING, logger="push_to_hub"):
            push_cli([str(folder), repo_id, "--token", "hf_fake"])
    said = [record.getMessage() for record in caplog.records if record.name == "push_to_hub"]
    # not for the repository the card names; for another, the card kept and uploaded as it is, said so
    assert said == [f"{folder / 'README.md'} does not name me/other: its examples load another id (--write_card "
                    "writes it anew)"]
    assert hub.errors == [] and [commit["repo_id"] for commit in hub.commits] == ["me/tiny", "me/other"]
    assert hub.commits[-1]["files"]["README.md"] == kept


def test_hub_repo_id_names_a_bare_repository_without_creating_it(hub):
    assert hub_repo_id("tiny", endpoint=hub.url, token="hf_fake") == "me/tiny"
    assert hub_repo_id("org/tiny", endpoint=hub.url, token="hf_fake") == "org/tiny"
    assert hub.created == [] and hub.requests == [("GET", "/api/whoami-v2")]  # a whole id asks nothing


# --------------------------------------------------------------------------------------------------------------------
# More of the card's metadata and tables, and the folder's restoring
# --------------------------------------------------------------------------------------------------------------------


def test_prepare_model_folder_restores_the_family_modules_and_stale_pipelines(tmp_path):
    # a folder that lost its modeling code or names an old pipeline class must load and serve the pipelines again
    folder = tmp_path / "model"
    marian_model().save_pretrained(folder)
    for name in ("configuration_headsel_marian.py", "modeling_headsel_marian.py"):
        (folder / name).unlink()
    config = json.loads((folder / "config.json").read_text())
    config["custom_pipelines"] = {"translation": {"impl": "old_module.OldPipeline", "pt": [], "type": "text"}}
    (folder / "config.json").write_text(json.dumps(config))
    written = prepare_model_folder(folder)
    assert {"configuration_headsel_marian.py", "modeling_headsel_marian.py", "config.json"} <= set(written)
    assert json.loads((folder / "config.json").read_text())["custom_pipelines"] == MARIAN.custom_pipelines


def test_character_error_rates_are_speech_recognition_scores():
    # a CER is published as a speech-recognition score like a WER; a flag named like a metric is no score of 1.0
    records = collect_metrics({"eval_cer_es": 5.0, "eval_wer_es": 9.0, "eval_bleu": True, "eval_chrf": False})
    assert records == [MetricRecord("validation", "cer", "es", 5.0), MetricRecord("validation", "wer", "es", 9.0)]
    results = eval_results(records, "covost", "covost")
    assert [(r.metric_type, r.task_type, r.metric_name) for r in results] == [
        ("cer", "automatic-speech-recognition", "CER (es)"), ("wer", "automatic-speech-recognition", "WER (es)")]


def test_pooled_and_mean_scores_name_no_dataset_config_and_lead_the_table():
    # "pooled" and the mean are no subset of the data for the Hub, and a reader looks for them atop the table
    records = collect_metrics({"eval_bleu_en-fr": 21.5, "eval_bleu_pooled": 19.0, "eval_bleu": 20.0})
    assert [r.dataset_config for r in eval_results(records, "d", "d")] == ["en-fr", None, None]
    _, rows = results_table(records)
    assert {row["task"] for row in rows[:2]} == {"mean over tasks", "all (pooled)"} and rows[2]["task"] == "en-fr"


def test_a_split_without_its_own_dataset_name_is_the_dataset_ids():
    # with names per split, a split left out is still credited to the dataset, not to a made-up name
    records = collect_metrics({"eval_bleu_en-de": 30.0, "predict_bleu_en-de": 29.0})
    results = eval_results(records, {"validation": "dev.jsonl"}, "europarl_st")
    assert [(r.dataset_split, r.dataset_name) for r in results] == [("validation", "dev.jsonl"),
                                                                     ("test", "europarl_st")]


def test_card_tables_name_each_task_and_side(tmp_path):
    # a reader learns here each side's tasks and default, which sides select and what tasks share; titled by the repo
    model = marian_model(default_encoder_task="de", default_decoder_task="it",
                         head_selection_components=["encoder_self", "decoder_self"])
    path = write_model_card(tmp_path / "model", model, repo_id="me/mt-headsel")
    card, text = ModelCard.load(path), path.read_text()
    assert card.data.model_name == "mt-headsel" and "# mt-headsel\n" in text  # the repo's name, not its owner
    assert "| encoder | `en`, `de` | de |" in text and "| decoder | `fr`, `it`, `es` | it |" in text
    assert "| encoder heads | 4 used per task, out of 8 candidates |" in text  # both sides select here
    assert "| decoder heads | 4 used per task, out of 8 candidates |" in text
    heads = model.selected_heads()["decoder_self"]
    for i, task in enumerate(model.config.decoder_tasks):  # each row is its own task's: the diagonal is 1.00
        cells = " | ".join(f"{shared_heads(heads, i, j):.2f}" for j in range(len(model.config.decoder_tasks)))
        assert f"| {task} | {cells} |" in text


def test_a_domain_cards_examples_use_the_scored_domain(tmp_path):
    # the examples run the domain the model was evaluated on, and name the exported folder after it once
    model = marian_model(encoder_tasks=["news", "web"], decoder_tasks=["news", "web"], task_type="domain")
    text = write_model_card(tmp_path / "model", model, {"eval_bleu_web": 3.0}).read_text()
    assert 'trust_remote_code=True, encoder_task="web", decoder_task="web")' in text
    assert 'stock.save_pretrained("web-only")' in text
