# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Unit tests of the data code: formats, columns, fairseq manifests, tasks, skipping."""

from __future__ import annotations

import io
import json
import os
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import soundfile
from datasets import Audio, Dataset
from recipe_testkit import text_rows, write_jsonl, write_table, write_tone
from transformers import Speech2TextFeatureExtractor

from headsel_recipes.arguments import DataArguments, RecipeTask
from headsel_recipes.audio import AudioError, read_audio
from headsel_recipes.data import (
    DataError,
    collect_tasks,
    detect_format,
    expand_files,
    load_splits,
    parse_fairseq_split_name,
)
from headsel_recipes.preprocess import PrepareContext, prepare_example, prepare_split
from headsel_recipes.tokenizer import train_marian_tokenizer

ASR = RecipeTask("asr", speech=True, target_field="text", metric="wer", same_language=True)
ST = RecipeTask("st", speech=True, target_field="translation", metric="bleu")
MT = RecipeTask("mt", speech=False, target_field="target", metric="bleu")
MANIFEST = ["id", "audio", "n_frames", "tgt_text", "speaker", "src_lang", "tgt_lang"]  # fairseq's columns


def load(task, tmp_path, task_type="lang", splits=("train",), **flags):
    return load_splits(task, DataArguments(**flags), list(splits), task_type, cache_dir=str(tmp_path / "cache"))


def test_jsonl_text_default_columns(tmp_path):
    rows = text_rows(6, seed=0)
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    train = load(MT, tmp_path, train_file=[str(path)])["train"]
    assert set(train.column_names) == {"id", "source_text", "target_text", "source_lang", "target_lang", "domain"}
    assert train[0] == {"id": rows[0]["id"], "source_text": rows[0]["source"], "target_text": rows[0]["target"],
                        "source_lang": "en", "target_lang": "de", "domain": "news"}


def test_csv_and_tsv_with_renamed_columns(tmp_path):
    rows = [{"src": 'a, "quoted" text', "tgt": "NA", "sl": "en", "tl": "de", "dom": ""},
            {"src": "plain", "tgt": "", "sl": "en", "tl": "fr", "dom": "web"}]
    flags = dict(source_column="src", target_column="tgt", source_lang_column="sl", target_lang_column="tl",
                 domain_column="dom")
    csv_rows = load(MT, tmp_path, train_file=[str(write_table(tmp_path / "t.csv", rows, ","))], **flags)["train"]
    assert csv_rows["source_text"] == ['a, "quoted" text', "plain"]
    assert csv_rows["target_text"] == ["NA", ""]  # no NaN conversion, empty stays empty
    assert csv_rows["domain"] == ["", "web"] and csv_rows["id"] == ["t:0", "t:1"]
    tsv_rows = load(MT, tmp_path, train_file=[str(write_table(tmp_path / "t.tsv", rows, "\t"))], **flags)["train"]
    assert tsv_rows["source_text"] == csv_rows["source_text"] and tsv_rows["target_lang"] == ["de", "fr"]


def test_tsv_cells_are_read_unquoted(tmp_path):
    # TSVs (fairseq manifests among them) quote nothing: a cell that opens with a quote is text, not a quoted field
    rows = [{"source": '"Hola," dijo.', "target": '"Hello," he said.', "source_lang": "es", "target_lang": "en"},
            {"source": "adios", "target": "bye", "source_lang": "es", "target_lang": "en"}]
    train = load(MT, tmp_path, train_file=[str(write_table(tmp_path / "t.tsv", rows, "\t"))])["train"]
    assert train["source_text"] == ['"Hola," dijo.', "adios"]
    assert train["target_text"] == ['"Hello," he said.', "bye"]


def test_generated_ids_are_unique_past_one_map_batch(tmp_path):
    # rows without an id get `{file stem}:{row}`, counted over the whole file (`datasets` maps batches of 1000 rows)
    rows = [{key: value for key, value in row.items() if key != "id"} for row in text_rows(1003, seed=0)]
    ids = load(MT, tmp_path, train_file=[str(write_jsonl(tmp_path / "t.jsonl", rows))])["train"]["id"]
    assert ids[998:] == ["t:998", "t:999", "t:1000", "t:1001", "t:1002"] and len(set(ids)) == 1003


def test_an_upper_case_extension_is_read_as_its_format(tmp_path):
    path = write_jsonl(tmp_path / "TRAIN.JSONL", text_rows(3, seed=0))
    assert len(load(MT, tmp_path, train_file=[str(path)])["train"]) == 3


def test_dict_columns_and_constant_languages(tmp_path):
    path = write_jsonl(tmp_path / "wmt.jsonl", [{"translation": {"de": "hallo welt", "en": "hello world"}}])
    train = load(MT, tmp_path, train_file=[str(path)], source_column="translation.de",
                 target_column="translation.en", source_lang="de", target_lang="en")["train"]
    assert train[0]["source_text"] == "hallo welt" and train[0]["target_text"] == "hello world"
    assert (train[0]["source_lang"], train[0]["target_lang"]) == ("de", "en")


def test_a_dotted_audio_column_reads_its_key(tmp_path):
    # `--audio_column media.wav`: the whole dict was passed on as the audio cell, so every row was unreadable
    soundfile.write(tmp_path / "a.wav", np.zeros(1600, dtype=np.float32), 16000)
    path = write_jsonl(tmp_path / "train.jsonl", [{"media": {"wav": "a.wav", "video": "a.mp4"}, "text": "hola",
                                                    "source_lang": "es"}, {"media": {"video": "b.mp4"}, "text": "x",
                                                                           "source_lang": "es"}])
    train = load(ASR, tmp_path, train_file=[str(path)], audio_column="media.wav")["train"]
    assert train["audio"] == [str(tmp_path / "a.wav"), None]  # relative to the file; a missing key: no audio
    assert read_audio(train[0]["audio"]).duration == pytest.approx(0.1)
    with pytest.raises(AudioError, match="no audio"):
        read_audio(train[1]["audio"])


def test_relative_audio_paths_are_made_absolute_but_urls_are_left_alone(tmp_path):
    rows = [{"audio": "https://example.org/a.wav", "text": "hola", "source_lang": "es"},
            {"audio": "audio/b.wav", "text": "gato", "source_lang": "es"}]
    train = load(ASR, tmp_path, train_file=[str(write_jsonl(tmp_path / "train.jsonl", rows))])["train"]
    assert train["audio"] == ["https://example.org/a.wav", str(tmp_path.resolve() / "audio/b.wav")]


def test_relative_audio_paths_start_in_the_audio_root(tmp_path):
    # --audio_root: the audio lies apart from the data files
    (tmp_path / "clips").mkdir()
    write_tone(tmp_path / "clips" / "a.wav", [1, 2])
    path = write_jsonl(tmp_path / "meta" / "train.jsonl", [{"audio": "a.wav", "text": "hola", "source_lang": "es"}])
    row = load(ASR, tmp_path, train_file=[str(path)], audio_root=str(tmp_path / "clips"))["train"][0]
    assert row["audio"] == str(tmp_path / "clips" / "a.wav")
    assert read_audio(row["audio"]).duration == pytest.approx(0.24)


def test_relative_audio_paths_of_a_dataset_folder_start_in_that_folder(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "audio").mkdir(parents=True)
    write_tone(folder / "audio" / "a.wav", [1, 2])
    write_jsonl(folder / "train.jsonl", [{"audio": "audio/a.wav", "text": "hola", "source_lang": "es"}])
    row = load(ASR, tmp_path, dataset_name=str(folder))["train"][0]
    assert row["audio"] == str(folder / "audio" / "a.wav")
    assert read_audio(row["audio"]).duration == pytest.approx(0.24)


def test_a_parquet_files_audio_column_is_read_undecoded(tmp_path, monkeypatch):
    # a `datasets.Audio` column, as `Dataset.to_parquet` stores most audio datasets: each cell reaches the rows as a
    # path (made absolute from the file's folder) or its embedded bytes, and is read with soundfile later
    write_tone(tmp_path / "a.wav", [1, 2])
    wav_bytes = io.BytesIO()
    soundfile.write(wav_bytes, np.sin(np.arange(4000) * 0.3).astype(np.float32), 16000, format="WAV")
    data = Dataset.from_dict({
        "audio": [{"path": "a.wav", "bytes": None}, {"path": "b.wav", "bytes": wav_bytes.getvalue()}],
        "text": ["hola gato", "sol"], "source_lang": ["es", "es"],
    }).cast_column("audio", Audio())
    monkeypatch.chdir(tmp_path)  # `to_parquet` sizes the files its relative paths name
    data.to_parquet(str(tmp_path / "train.parquet"))
    monkeypatch.chdir(tmp_path.parent)  # not where "a.wav" is
    first, second = load(ASR, tmp_path, train_file=[str(tmp_path / "train.parquet")])["train"]["audio"]
    assert first == {"path": str(tmp_path.resolve() / "a.wav"), "bytes": None}
    assert second["bytes"] == wav_bytes.getvalue()
    assert read_audio(first).duration == pytest.approx(0.24) and read_audio(second).duration == pytest.approx(0.25)


@pytest.mark.parametrize("name, expected", [
    ("train_es_en_tedx", {"split": "train", "source_lang": "es", "target_lang": "en", "domain": "tedx"}),
    ("dev_fr-pt_europarl", {"split": "dev", "source_lang": "fr", "target_lang": "pt", "domain": "europarl"}),
    ("test_it_it_covost", {"split": "test", "source_lang": "it", "target_lang": "it", "domain": "covost"}),
    ("train_zh-CN_en_covost", {"split": "train", "source_lang": "zh-CN", "target_lang": "en", "domain": "covost"}),
    ("dev_en-zh-CN_covost", {"split": "dev", "source_lang": "en", "target_lang": "zh-CN", "domain": "covost"}),
    ("test_es-419_sv-SE_ted_talks", {"split": "test", "source_lang": "es-419", "target_lang": "sv-SE",
                                     "domain": "ted_talks"}),
    ("train_zh-Hant_en_ted", {"split": "train", "source_lang": "zh-Hant", "target_lang": "en", "domain": "ted"}),
    ("train_asr_es", None),
    ("train", None),
])
def test_fairseq_split_names(name, expected):
    assert parse_fairseq_split_name(name) == expected


def test_fairseq_manifests(speech_corpus, tmp_path):
    manifests = speech_corpus / "manifests"
    assert detect_format(manifests / "train_fr_en_covost.tsv") == "fairseq"
    assert expand_files(["train_*"], str(manifests)) == sorted(manifests.glob("train_*.tsv"))
    splits = load(ST, tmp_path, splits=("train", "validation"), manifest_dir=str(manifests),
                  train_file=["train_es_en_tedx", "train_fr_en_covost"], validation_file=["dev_*"])
    train = splits["train"]
    fr = [row for row in train if row["source_lang"] == "fr"]
    assert len(fr) == 8 and {(row["target_lang"], row["domain"]) for row in fr} == {("en", "covost")}
    assert {row["domain"] for row in train if row["source_lang"] == "es"} == {"tedx"}
    assert all(os.path.isfile(row["audio"]) for row in train)  # relative to the manifest's folder
    first = json.loads((speech_corpus / "train.jsonl").read_text().splitlines()[0])
    assert (train[0]["id"], train[0]["target_text"]) == (first["id"], first["translation"])
    assert len(splits["validation"]) == 6
    asr = load(ASR, tmp_path, manifest_dir=str(manifests), train_file=["train_fr_en_covost"])["train"]
    assert asr[0]["target_lang"] == "fr"  # ASR: the transcript is in the source language


def test_column_flags_name_the_columns_of_a_fairseq_manifest(tmp_path):
    # fairseq's columns are the defaults of a manifest; a --*_column flag given still names the column read
    row = {"id": "u1", "audio": "a.wav", "n_frames": "0", "tgt_text": "Hola, gato.", "speaker": "s", "src_lang": "es",
           "tgt_lang": "es", "tgt_text_norm": "hola gato"}
    path = write_table(tmp_path / "train_es_es_tedx.tsv", [row], "\t", MANIFEST + ["tgt_text_norm"])
    assert load(ASR, tmp_path, train_file=[str(path)], text_column="tgt_text_norm")["train"][0]["target_text"] == (
        "hola gato")
    assert load(ASR, tmp_path, train_file=[str(path)])["train"][0]["target_text"] == "Hola, gato."


def test_a_manifest_of_fairseqs_required_columns_only(tmp_path):
    # fairseq needs only id, audio, n_frames and tgt_text: such a TSV is a manifest, its split name supplies both
    # languages and the domain, and they win over the --source_lang / --target_lang / --domain flags (which fill in
    # sources that name none)
    path = write_table(tmp_path / "train_es_en_tedx.tsv",
                       [{"id": "u1", "audio": "a.wav", "n_frames": "3840", "tgt_text": "hello cat"}], "\t",
                       MANIFEST[:4])
    row = load(ST, tmp_path, train_file=[str(path)])["train"][0]
    assert (row["source_lang"], row["target_lang"], row["domain"], row["target_text"]) == (
        "es", "en", "tedx", "hello cat")
    row = load(ST, tmp_path, train_file=[str(path)], source_lang="fr", target_lang="de", domain="news")["train"][0]
    assert (row["source_lang"], row["target_lang"], row["domain"]) == ("es", "en", "tedx")


def test_dataset_name_folder(tmp_path):
    folder = tmp_path / "corpus"
    write_jsonl(folder / "train.jsonl", text_rows(4, seed=0))
    write_jsonl(folder / "validation.jsonl", text_rows(2, seed=1))
    splits = load(MT, tmp_path, splits=("train", "validation"), dataset_name=str(folder))
    assert (len(splits["train"]), len(splits["validation"])) == (4, 2)
    with pytest.raises(DataError, match="split 'test'"):
        load(MT, tmp_path, splits=("test",), dataset_name=str(folder))


def test_missing_files_and_columns_are_clear_errors(tmp_path):
    path = write_jsonl(tmp_path / "train.jsonl", [{"audio": "a.wav", "text": "hola"}])
    with pytest.raises(DataError, match="not found"):
        load(ASR, tmp_path, train_file=[str(tmp_path / "nope.jsonl")])
    with pytest.raises(DataError, match="'source_lang'.*--source_lang_column or --source_lang"):
        load(ASR, tmp_path, train_file=[str(path)])
    assert load(ASR, tmp_path, train_file=[str(path)], source_lang="es")["train"][0]["target_lang"] == "es"
    with pytest.raises(DataError, match="'translation'.*--translation_column"):
        load(ST, tmp_path, train_file=[str(path)], source_lang="es")
    with pytest.raises(DataError, match="'domain'.*--domain_column or --domain"):
        load(ASR, tmp_path, task_type="domain", train_file=[str(path)])
    with pytest.raises(DataError, match="--train_file nor --dataset_name"):
        load(ASR, tmp_path, splits=("train",))


HEADER = "source,target,source_lang,target_lang\n"
OPEN_QUOTE = HEADER + 'a b,c d,en,de\n"the cat,x y,en,de\ne f,g h,en,fr\ni j,k "l",en,de\n'  # row 2 opens a quote


@pytest.mark.parametrize(
    "name, content, message",
    [
        # the quote swallows two rows, uncounted; as well where lines end with a bare CR ("CSV (Macintosh)")
        ("train.csv", OPEN_QUOTE, "the 'source' cell of data row 2 holds a line break"),
        ("train.csv", OPEN_QUOTE.replace("\n", "\r"), "the 'source' cell of data row 2 holds a line break"),
        ("train.jsonl", '{"source": "a", "target": "b", "source_lang": "en", "target_lang": "de"}\n{"source": \n',
         "cannot be read as json: line 2 is not a JSON object"),  # pyarrow says "row 1"
        ("train.json", '[\n{"source": "a", "target": "b", "source_lang": "en", "target_lang": "de"},\n{"source": "c"\n]\n',
         "cannot be read as json: line 4 breaks the JSON"),  # one document over many lines
        ("train.tsv", HEADER.replace(",", "\t") + "a\tb\ten\tde\nc\td\ten\tde\textra\n",
         "cannot be read as tsv: ParserError"),
        ("train.csv", HEADER + "caf\xe9,x,en,de\n", "cannot be read as csv: UnicodeDecodeError"),
        # the TSV's header is read first (a fairseq manifest?), and the decoder reads ahead into the rows
        ("train.tsv", HEADER.replace(",", "\t") + "caf\xe9\tx\ten\tde\n", "cannot be read as tsv: UnicodeDecodeError"),
    ],
    ids=["csv-open-quote", "csv-open-quote-cr", "json-line", "json-document", "tsv-extra-field", "not-utf8",
         "tsv-not-utf8"],
)
def test_a_file_that_cannot_be_read_as_its_format_is_a_clear_error(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(DataError, match=message) as error:
        load(MT, tmp_path, train_file=[str(path)])
    assert str(path) in str(error.value)


@pytest.mark.parametrize("name, rule", [("train.jsonl", ""), ("train.csv", ": a header row is needed"),
                                        ("train.tsv", ": a header row is needed")])
def test_an_empty_file_is_a_clear_error(tmp_path, name, rule):
    path = tmp_path / name
    path.write_bytes(b"")
    with pytest.raises(DataError, match=re.escape(f"{path} is empty{rule}")):
        load(MT, tmp_path, train_file=[str(path)])


def test_a_file_of_unknown_extension_needs_its_format_named(tmp_path):
    rows = text_rows(4, seed=0)
    path = write_jsonl(tmp_path / "train.txt", rows)
    with pytest.raises(DataError, match=re.escape(f"cannot tell the format of {path} from its extension; pass "
                                                  "--data_format")):
        load(MT, tmp_path, train_file=[str(path)])
    assert load(MT, tmp_path, train_file=[str(path)], data_format="json")["train"]["source_text"] == [
        row["source"] for row in rows]
    with pytest.raises(DataError, match=re.escape("unknown --data_format 'jsonl': use auto, json, csv, tsv, parquet "
                                                  "or fairseq")):
        load(MT, tmp_path, train_file=[str(path)], data_format="jsonl")


def test_an_unknown_task_type_is_refused_naming_the_two(tmp_path):
    path = write_jsonl(tmp_path / "train.jsonl", text_rows(4, seed=0))
    with pytest.raises(DataError, match="--task_type must be 'lang' or 'domain', got 'language'"):
        load(MT, tmp_path, task_type="language", train_file=[str(path)])


def test_a_csv_with_a_byte_order_mark_reads_its_first_column(tmp_path):
    path = tmp_path / "train.csv"  # as spreadsheet programs save "CSV UTF-8"
    path.write_bytes(("\ufeff" + HEADER + "a b,c d,en,de\n").encode("utf-8"))
    row = load(MT, tmp_path, train_file=[str(path)])["train"][0]
    assert (row["source_text"], row["target_text"], row["source_lang"]) == ("a b", "c d", "en")


def test_tasks_from_training_data(tmp_path):
    rows = text_rows(6, seed=0)
    train = load(MT, tmp_path, train_file=[str(write_jsonl(tmp_path / "t.jsonl", rows))])["train"]
    assert collect_tasks(train, MT, "lang") == (["de", "en"], ["de", "en", "fr"])
    assert collect_tasks(train, MT, "domain") == (["news", "web"], ["news", "web"])
    assert collect_tasks(train, ASR, "lang") == (["de", "en"], ["de", "en"])


def test_text_rows_skipped_and_counted(tmp_path):
    good = text_rows(4, seed=0)
    bad = [
        {**good[0], "source": ""},
        {**good[0], "target": "   "},
        {**good[0], "target_lang": "xx"},
        {**good[0], "source_lang": ""},
        {**good[0], "source": " ".join(["the cat"] * 40)},
    ]
    train = load(MT, tmp_path, train_file=[str(write_jsonl(tmp_path / "t.jsonl", good + bad))])["train"]
    tokenizer = train_marian_tokenizer(list(train["source_text"]) + list(train["target_text"]), vocab_size=60)
    ctx = PrepareContext(MT, "lang", ["de", "en"], ["de", "en", "fr"], tokenizer, max_source_length=20)
    prepared, report = prepare_split(train, "train", ctx)
    assert report.skipped == {"empty_source": 1, "empty_target": 1, "unknown_language": 1, "missing_language": 1,
                              "source_too_long": 1}
    assert report.summary().startswith("train: kept 4 of 9 examples; skipped 5: empty_source=1")
    assert len(prepared) == 4 and "skip_reason" not in prepared.column_names
    assert prepared["group"] == ["en-de", "en-fr", "de-en", "en-de"]
    assert prepared["encoder_task_ids"] == [1, 1, 0, 1] and prepared["decoder_task_ids"] == [0, 2, 1, 0]
    assert all(labels[-1] == tokenizer.eos_token_id for labels in prepared["labels"])


def test_a_side_keyed_by_no_task_takes_every_named_language(tmp_path):
    good = text_rows(4, seed=0)
    other = [{**good[0], "source_lang": "xx"}, {**good[0], "source_lang": ""}]
    train = load(MT, tmp_path, train_file=[str(write_jsonl(tmp_path / "t.jsonl", good + other))])["train"]
    tokenizer = train_marian_tokenizer(list(train["source_text"]) + list(train["target_text"]), vocab_size=60)
    ctx = PrepareContext(MT, "lang", ["default"], ["de", "en", "fr"], tokenizer)
    prepared, report = prepare_split(train, "train", ctx)
    # a language the model has no task for is routed to the one encoder task; a row that names none still lacks the
    # group its scores and sampling need
    assert report.skipped == {"missing_language": 1}
    assert prepared["group"] == ["en-de", "en-fr", "de-en", "en-de", "xx-de"]
    assert prepared["encoder_task_ids"] == [0] * 5 and prepared["decoder_task_ids"] == [0, 2, 1, 0, 0]


@pytest.mark.parametrize("split", ["validation", "test"])
def test_evaluation_splits_cut_long_text_instead_of_skipping_it(tmp_path, split):
    rows = text_rows(4, seed=0)
    rows[1] = {**rows[1], "source": " ".join(["the cat"] * 40), "target": " ".join(["die Katze"] * 40)}
    data = load(MT, tmp_path, train_file=[str(write_jsonl(tmp_path / "t.jsonl", rows))])["train"]
    tokenizer = train_marian_tokenizer(list(data["source_text"]) + list(data["target_text"]), vocab_size=60)
    ctx = PrepareContext(MT, "lang", ["de", "en"], ["de", "en", "fr"], tokenizer, max_source_length=20,
                         max_target_length=40)
    _, train_report = prepare_split(data, "train", ctx)
    assert train_report.skipped == {"target_too_long": 1}  # checked first
    prepared, report = prepare_split(data, split, ctx)
    assert report.skipped == {} and len(prepared) == 4
    long_row = prepared[1]
    assert len(long_row["input_ids"]) == 20 and long_row["input_ids"][-1] == tokenizer.eos_token_id
    assert len(long_row["labels"]) == 40 and long_row["labels"][-1] == tokenizer.eos_token_id
    assert long_row["reference"] == rows[1]["target"]  # scored against the whole reference
    assert prepared[0]["input_ids"] == tokenizer(data[0]["source_text"])["input_ids"]  # short rows untouched


def two_vocabulary_tokenizer(text=None, text_target=None):
    """A tokenizer whose sources and targets are two vocabularies, as Marian's two sentencepiece models: an id per
    word (from 10 for sources, from 100 for targets), then `</s>` (2)."""
    first, words = (10, text) if text_target is None else (100, text_target)
    return {"input_ids": [first + index for index in range(len(words.split()))] + [2]}


TEXT_ROW = {"id": "r", "source_text": "the cat runs", "target_text": "die katze", "source_lang": "en",
            "target_lang": "de", "domain": ""}


def test_labels_are_tokenized_as_targets():
    # read with the source vocabulary, the labels would be other ids than the ones the model generates
    out = prepare_example(TEXT_ROW, PrepareContext(MT, "lang", ["en"], ["de"], two_vocabulary_tokenizer))
    assert (out["input_ids"], out["labels"]) == ([10, 11, 12, 2], [100, 101, 2])


def test_text_of_exactly_the_length_limit_is_kept():
    # --max_source_length / --max_target_length are the most tokens a training row may hold, not one more than that
    ctx = PrepareContext(MT, "lang", ["en"], ["de"], two_vocabulary_tokenizer, max_source_length=4,
                         max_target_length=3)
    assert prepare_example(TEXT_ROW, ctx)["skip_reason"] == ""
    assert prepare_example(TEXT_ROW, replace(ctx, max_source_length=3))["skip_reason"] == "source_too_long"
    assert prepare_example(TEXT_ROW, replace(ctx, max_target_length=2))["skip_reason"] == "target_too_long"


def test_duration_limits_skip_training_audio_only_and_the_frame_limit_is_inclusive(speech_corpus, tmp_path):
    # --min/max_duration_in_seconds filter the training data; evaluation splits keep every utterance (each is
    # scored); the frame limit (the model's positions) applies to every split and holds that many frames
    data = load(ASR, tmp_path, train_file=[str(speech_corpus / "train_clean.jsonl")])["train"]
    words = Counter(len(text.split()) for text in data["target_text"])  # 0.12 s of tone per word
    ctx = PrepareContext(ASR, "lang", ["es", "fr"], ["es", "fr"], two_vocabulary_tokenizer,
                         feature_extractor=Speech2TextFeatureExtractor(), min_duration=0.3, max_duration=0.4)
    assert prepare_split(data, "train", ctx)[1].skipped == {"audio_too_short": words[2], "audio_too_long": words[4]}
    prepared, report = prepare_split(data, "validation", ctx)
    assert report.skipped == {}
    frames = max(prepared["length"])
    limited = replace(ctx, max_source_length=frames)
    assert prepare_split(data, "validation", limited)[1].skipped == {}
    longest = prepared["length"].count(frames)
    assert prepare_split(data, "validation", replace(limited, max_source_length=frames - 1))[1].skipped == {
        "audio_too_long": longest}


def speech_skip_reason(audio: str, **limits) -> str:
    """The skip reason of a Spanish ASR training row of `audio` under `limits` (`min_duration`, ...)."""
    row = {"id": "u", "audio": audio, "target_text": "hola gato", "source_lang": "es", "target_lang": "es",
           "domain": ""}
    ctx = PrepareContext(ASR, "lang", ["es"], ["es"], two_vocabulary_tokenizer,
                         feature_extractor=Speech2TextFeatureExtractor(), **limits)
    return prepare_example(row, ctx)["skip_reason"]


def test_audio_of_exactly_the_duration_limits_is_kept(tmp_path):
    # --min/max_duration_in_seconds are the shortest and the longest training audio kept
    write_tone(tmp_path / "a.wav", [1, 2])  # 0.24 s
    audio = str(tmp_path / "a.wav")
    assert speech_skip_reason(audio, min_duration=0.24, max_duration=0.24) == ""
    assert speech_skip_reason(audio, max_duration=0.23) == "audio_too_long"
    assert speech_skip_reason(audio, min_duration=0.25) == "audio_too_short"


def test_empty_audio_is_counted_as_empty_under_a_minimum_duration(tmp_path):
    # a file without samples is `empty_audio` (a broken file), not `audio_too_short` (a filter's choice)
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, np.float32), 16000)
    np.save(tmp_path / "empty.npy", np.zeros((0, 80), np.float32))
    for name in ("empty.wav", "empty.npy"):
        assert speech_skip_reason(str(tmp_path / name), min_duration=0.1) == "empty_audio"


def test_precomputed_features_are_100_frames_a_second_and_of_the_extractors_size(tmp_path):
    # a .npy of 300 fbank frames is 3 s of speech for the duration limits; features of another size than the
    # extractor's would break the batches later: the row is unreadable
    rng = np.random.default_rng(0)
    np.save(tmp_path / "f.npy", rng.standard_normal((300, 80)).astype(np.float32))
    np.save(tmp_path / "f40.npy", rng.standard_normal((50, 40)).astype(np.float32))
    audio = str(tmp_path / "f.npy")
    assert speech_skip_reason(audio, min_duration=3.0, max_duration=3.0) == ""
    assert speech_skip_reason(audio, max_duration=2.9) == "audio_too_long"
    assert speech_skip_reason(audio, min_duration=3.1) == "audio_too_short"
    assert speech_skip_reason(str(tmp_path / "f40.npy")) == "unreadable_audio"


def test_overwrite_cache_prepares_the_split_again(tmp_path):
    # --overwrite_cache reads the audio again: the cached preparation would keep the old skip decisions
    write_tone(tmp_path / "a.wav", [1, 2])
    path = write_jsonl(tmp_path / "train.jsonl", [{"audio": "a.wav", "text": "hola gato", "source_lang": "es"}])
    data = load(ASR, tmp_path, train_file=[str(path)])["train"]
    ctx = PrepareContext(ASR, "lang", ["es"], ["es"], two_vocabulary_tokenizer,
                         feature_extractor=Speech2TextFeatureExtractor())
    assert prepare_split(data, "train", ctx)[1].skipped == {}
    (tmp_path / "a.wav").write_bytes(b"not audio any more")
    assert prepare_split(data, "train", ctx, overwrite_cache=True)[1].skipped == {"unreadable_audio": 1}


def test_a_rows_own_languages_win_over_the_language_flags(tmp_path):
    # --source_lang / --target_lang fill in rows that name no language; they do not relabel rows that name one
    rows = text_rows(3, seed=0)  # en-de, en-fr, de-en
    rows[0] = {**rows[0], "source_lang": "", "target_lang": ""}
    train = load(MT, tmp_path, train_file=[str(write_jsonl(tmp_path / "t.jsonl", rows))], source_lang="it",
                 target_lang="es")["train"]
    assert list(zip(train["source_lang"], train["target_lang"])) == [("it", "es"), ("en", "fr"), ("de", "en")]


def test_sample_limits_keep_the_first_rows_of_their_own_split(tmp_path):
    # --max_train_samples, --max_eval_samples (validation) and --max_predict_samples (test)
    rows = text_rows(6, seed=0)
    path = str(write_jsonl(tmp_path / "t.jsonl", rows))
    splits = load(MT, tmp_path, splits=("train", "validation", "test"), train_file=[path], validation_file=[path],
                  test_file=[path], max_train_samples=3, max_eval_samples=2, max_predict_samples=4)
    assert splits["train"]["id"] == [row["id"] for row in rows[:3]]
    assert (len(splits["validation"]), len(splits["test"])) == (2, 4)


def test_rows_without_a_language_add_no_task():
    data = Dataset.from_dict({"source_lang": ["en", ""], "target_lang": ["de", "de"], "domain": ["", ""]})
    assert collect_tasks(data, MT, "lang") == (["en"], ["de"])
    # no row names its source language: an error, not a model without encoder tasks
    with pytest.raises(DataError, match="names no task"):
        collect_tasks(data.select([1]), MT, "lang")


def test_a_task_named_pooled_is_refused():
    # `{metric}_pooled` is the corpus-level score: a domain of that name would have been scored as the whole corpus
    data = Dataset.from_dict({"source_lang": ["en", "en"], "target_lang": ["de", "de"], "domain": ["news", "pooled"]})
    assert collect_tasks(data, MT, "lang") == (["en"], ["de"])
    with pytest.raises(DataError, match="names a task 'pooled' .* the name of the corpus-level score is reserved"):
        collect_tasks(data, MT, "domain")
