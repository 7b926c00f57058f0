# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Loading the data of a recipe into one standard form, whatever it came from.

Three kinds of source, one code path:

* JSONL/JSON, CSV, TSV (and Parquet) files given by `--train_file` / `--validation_file` / `--test_file`;
* anything `datasets.load_dataset` reads (`--dataset_name`, a Hub-style name or a local folder);
* fairseq speech-to-text manifests (TSV with `id, audio, n_frames, tgt_text, speaker, src_lang, tgt_lang`), named
  `{split}_{src}_{tgt}_{domain}.tsv`: the name supplies the languages and domain the rows do not give.

Every source is *standardized* to the columns of [`STANDARD_COLUMNS`]: `id`, the input (`audio` for speech: a path
or a `datasets.Audio(decode=False)` dict; `source_text` for text), `target_text`, `source_lang`, `target_lang` and
`domain` (strings, `""` when unknown). Nothing is dropped here; bad rows are skipped, and counted, in
[`~headsel_recipes.preprocess`]. A missing file or a missing column is a [`DataError`] raised before training.
"""

from __future__ import annotations

import csv
import glob
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import datasets
from datasets import Audio, Dataset, Features, Value
from datasets.exceptions import DatasetGenerationError

from hf_headsel.configuration_head_selection import UNKEYED_TASK

from .arguments import DataArguments, RecipeTask
from .results_keys import POOLED

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
SAMPLE_LIMITS = {"train": "max_train_samples", "validation": "max_eval_samples", "test": "max_predict_samples"}
FAIRSEQ_COLUMNS = ("id", "audio", "n_frames", "tgt_text", "speaker", "src_lang", "tgt_lang")
# A language code in a split name, with its BCP-47 subtags: `es`, `zh-CN`, `zh-Hant`, `es-419` (CoVoST's names). A
# region or script subtag starts upper-case or with a digit, a language lower-case: that tells `zh-CN` (one code)
# from `es-en` (two).
FAIRSEQ_LANGUAGE = r"[^_-]+(?:-(?:[A-Z][A-Za-z]*|[0-9]+))*"
# {split}_{src}_{tgt}_{domain}, also accepted: {split}_{src}-{tgt}_{domain}; the domain may hold underscores.
FAIRSEQ_SPLIT_NAME = re.compile(
    rf"^(?P<split>[^_]+)_(?P<source_lang>{FAIRSEQ_LANGUAGE})[_-](?P<target_lang>{FAIRSEQ_LANGUAGE})_(?P<domain>.+)$"
)
# UTF-8, with or without the byte-order mark spreadsheet programs write (else it would open the first column's name).
CSV_ENCODING = "utf-8-sig"
EXTENSION_FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
# The defaults of the fairseq manifest columns, used where a column flag keeps its DataArguments default.
FAIRSEQ_COLUMN_DEFAULTS = {
    "text_column": "tgt_text", "translation_column": "tgt_text", "source_lang_column": "src_lang",
    "target_lang_column": "tgt_lang",
}


class DataError(ValueError):
    """Bad data arguments: a missing file, split or column. Raised before any training starts."""


def standard_columns(task: RecipeTask) -> tuple[str, ...]:
    """The columns every standardized split has."""
    return ("id", "audio" if task.speech else "source_text", "target_text", "source_lang", "target_lang", "domain")


@dataclass(frozen=True)
class ColumnSpec:
    """The input column feeding each standard field (`None`: not read from a column). `a.b` reads key `b` of the
    dict in column `a` (e.g. `translation.de` for WMT-style datasets)."""

    id: str | None
    source: str
    target: str
    source_lang: str
    target_lang: str | None
    domain: str


@dataclass(frozen=True)
class SourceInfo:
    """What a data source says about all its rows beyond its columns."""

    name: str  # file path or dataset name, for messages
    base_dir: str | None  # relative audio paths start here
    source_lang: str | None = None
    target_lang: str | None = None
    domain: str | None = None


def column_spec(task: RecipeTask, data_args: DataArguments, data_format: str) -> ColumnSpec:
    """The column names of a source of `data_format`, from the `--*_column` flags (fairseq defaults for manifests)."""
    defaults = DataArguments()

    def flag(name: str) -> str:
        value = getattr(data_args, name)
        if data_format == "fairseq" and value == getattr(defaults, name):
            return FAIRSEQ_COLUMN_DEFAULTS.get(name, value)
        return value

    if task.speech:
        source, target = flag("audio_column"), flag(f"{task.target_field}_column")
    else:
        source, target = flag("source_column"), flag("target_column")
    return ColumnSpec(
        id=flag("id_column"),
        source=source,
        target=target,
        source_lang=flag("source_lang_column"),
        target_lang=None if task.same_language else flag("target_lang_column"),
        domain=flag("domain_column"),
    )


# --------------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------------


def expand_files(entries: list[str] | None, manifest_dir: str | None = None) -> list[Path]:
    """Data file paths from `--*_file` entries: globs expanded, bare split names looked up in `manifest_dir`.

    Raises [`DataError`] for an entry that matches no file.
    """
    files = []
    for entry in entries or []:
        candidates = [entry]
        if manifest_dir is not None and not os.path.isabs(entry):
            candidates.insert(0, os.path.join(manifest_dir, entry))
            if not Path(entry).suffix:
                candidates.insert(0, os.path.join(manifest_dir, entry + ".tsv"))
        for candidate in candidates:
            matches = sorted(glob.glob(candidate)) if glob.has_magic(candidate) else (
                [candidate] if os.path.isfile(candidate) else []
            )
            if matches:
                files.extend(Path(match) for match in matches)
                break
        else:
            where = f" (also looked in --manifest_dir {manifest_dir})" if manifest_dir else ""
            raise DataError(f"data file {entry!r} not found{where}")
    return files


def read_header(path: Path, delimiter: str) -> list[str]:
    """The column names of a CSV/TSV file (its first row); a [`DataError`] naming the file when its start is not
    UTF-8 (the decoder reads ahead: a bad byte in an early row fails here, before `load_file` reads the rows)."""
    data_format = "tsv" if delimiter == "\t" else "csv"
    try:
        with open(path, newline="", encoding=CSV_ENCODING) as handle:
            quoting = csv.QUOTE_NONE if data_format == "tsv" else csv.QUOTE_MINIMAL
            header = next(csv.reader(handle, delimiter=delimiter, quoting=quoting), None)
    except UnicodeDecodeError as error:
        raise DataError(f"{path} cannot be read as {data_format}: {type(error).__name__}: {error}") from error
    if not header:
        raise DataError(f"{path} is empty: a header row is needed")
    return header


def detect_format(path: Path, data_format: str = "auto") -> str:
    """`json`, `csv`, `tsv`, `parquet` or `fairseq`: the given format, else from the extension (a TSV whose header
    holds the fairseq manifest columns is a manifest)."""
    if data_format != "auto":
        return data_format
    suffix = path.suffix.lower()
    if suffix not in EXTENSION_FORMATS:
        raise DataError(f"cannot tell the format of {path} from its extension; pass --data_format")
    data_format = EXTENSION_FORMATS[suffix]
    if data_format == "tsv" and {"id", "audio", "n_frames", "tgt_text"} <= set(read_header(path, "\t")):
        return "fairseq"
    return data_format


def parse_fairseq_split_name(name: str) -> dict[str, str] | None:
    """`train_es_en_tedx` -> `{"split": "train", "source_lang": "es", "target_lang": "en", "domain": "tedx"}`;
    `None` when the name does not follow `{split}_{src}_{tgt}_{domain}` (or `{split}_{src}-{tgt}_{domain}`)."""
    match = FAIRSEQ_SPLIT_NAME.match(name)
    return match.groupdict() if match else None


def load_file(path: Path, data_format: str, cache_dir: str | None = None) -> Dataset:
    """One data file as a `Dataset`. CSV/TSV cells are read as strings, empty cells stay `""` (no NaN), and TSVs
    are read unquoted like fairseq's manifests.

    A file that cannot be read as its format (a line that is not JSON, bytes that are not UTF-8, a row with more
    fields than the header, a CSV cell holding a line break: a quote left open, which would swallow the rows after
    it) is a [`DataError`] naming the file (and, for JSON, the first line that breaks), raised before any work."""
    if data_format not in ("json", "parquet", "csv", "tsv", "fairseq"):
        raise DataError(f"unknown --data_format {data_format!r}: use auto, json, csv, tsv, parquet or fairseq")
    if data_format in ("json", "parquet") and path.is_file() and path.stat().st_size == 0:
        raise DataError(f"{path} is empty")
    try:
        delimiter = "," if data_format == "csv" else "\t"
        header = None if data_format in ("json", "parquet") else read_header(path, delimiter)
        dataset = _read(path, data_format, header, cache_dir)
    except DataError:
        raise
    except (DatasetGenerationError, UnicodeDecodeError, ValueError) as error:  # ValueError: pandas' ParserError
        cause = error.__cause__ if isinstance(error, DatasetGenerationError) and error.__cause__ else error
        where = _first_bad_json_line(path) if data_format == "json" else ""
        raise DataError(f"{path} cannot be read as {data_format}: {where}{type(cause).__name__}: {cause}") from error
    if data_format == "csv":
        _refuse_line_breaks(path, dataset, header)
    return dataset


def _first_bad_json_line(path: Path) -> str:
    """`"line 7 is not a JSON object; "`: where a JSON file breaks, counted from 1 (pyarrow's message counts rows from
    0, within a block). A file whose first line is a JSON object on its own is JSON Lines, read line by line; any
    other is one document. `""` where nothing is found (or the file cannot be read as text)."""
    try:
        with open(path, encoding="utf-8") as file:
            rows = ((number, _json_or_none(line)) for number, line in enumerate(file, start=1) if line.strip())
            number, first = next(rows, (1, None))
            if isinstance(first, dict):
                return next((f"line {number} is not a JSON object; " for number, row in rows
                             if not isinstance(row, dict)), "")
        json.loads(path.read_text(encoding="utf-8"))  # one document: where its syntax breaks
    except json.JSONDecodeError as error:
        return f"line {error.lineno} breaks the JSON ({error.msg}); "
    except (OSError, UnicodeDecodeError):
        pass
    return ""


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _read(path: Path, data_format: str, header: list[str] | None, cache_dir: str | None) -> Dataset:
    if header is None:
        return datasets.load_dataset(data_format, data_files=str(path), split="train", cache_dir=cache_dir)
    return datasets.load_dataset(
        "csv",
        data_files=str(path),
        split="train",
        cache_dir=cache_dir,
        encoding=CSV_ENCODING,
        delimiter="," if data_format == "csv" else "\t",  # fairseq manifests are TSVs
        quoting=csv.QUOTE_MINIMAL if data_format == "csv" else csv.QUOTE_NONE,
        keep_default_na=False,
        na_filter=False,
        features=Features({name: Value("string") for name in header}),
    )


def _refuse_line_breaks(path: Path, dataset: Dataset, header: list[str]) -> None:
    """A [`DataError`] at the first CSV cell holding a line break: the recipes read one example per line, and a
    quote opened in a cell and not closed reads every following line into that cell, until the next quote."""
    for column in header:
        row = next((index for index, value in enumerate(dataset[column]) if "\n" in value or "\r" in value), None)
        if row is not None:
            raise DataError(f"{path}: the {column!r} cell of data row {row + 1} holds a line break (a quote left open "
                            "reads the lines after it into that cell): one example per line, with quotes closed or "
                            "doubled, or use a TSV")


# --------------------------------------------------------------------------------------------------------------------
# Standardization
# --------------------------------------------------------------------------------------------------------------------


def check_columns(
    column_names: list[str], task: RecipeTask, spec: ColumnSpec, info: SourceInfo, task_type: str,
    data_args: DataArguments, split: str,
) -> None:
    """Raise a [`DataError`] naming the flag to use when a column the task needs is absent (and nothing else
    supplies its value)."""
    required = {"source": (spec.source, f"--{'audio' if task.speech else 'source'}_column", None)}
    target_flag = f"--{task.target_field}_column" if task.speech else "--target_column"
    required["target"] = (spec.target, target_flag, None)
    if task_type == "lang":
        required["source language"] = (
            spec.source_lang, "--source_lang_column", info.source_lang or data_args.source_lang)
        if spec.target_lang is not None:
            required["target language"] = (
                spec.target_lang, "--target_lang_column", info.target_lang or data_args.target_lang
            )
    elif task_type == "domain":
        required["domain"] = (spec.domain, "--domain_column", info.domain or data_args.domain)
    else:
        raise DataError(f"--task_type must be 'lang' or 'domain', got {task_type!r}")
    for what, (column, flag, fallback) in required.items():
        if column.split(".")[0] in column_names or fallback:
            continue
        hint = {"source language": " or --source_lang", "target language": " or --target_lang",
                "domain": " or --domain"}.get(what, "")
        raise DataError(
            f"the {split} data {info.name} has no column {column!r} (the {what}); its columns are {column_names}. "
            f"Name the right column with {flag}{hint}."
        )


def _entry(row_value, key: str | None):
    """A cell value, or with `key` its entry of a dict cell (`None` where the cell is no dict)."""
    if key is None:
        return row_value
    return row_value.get(key) if isinstance(row_value, dict) else None


def _cell(row_value, key: str | None):
    """A cell value as a stripped string (`""` for missing); `key` reads one entry of a dict cell."""
    row_value = _entry(row_value, key)
    return "" if row_value is None else str(row_value).strip()


def _column_reader(column_names: list[str], column: str | None):
    """A function `(batch, i) -> value` for a (possibly dotted) column, or `None` when the column is absent."""
    if column is None:
        return None
    name, _, key = column.partition(".")
    if name not in column_names:
        return None
    return lambda batch, index: _cell(batch[name][index], key or None)


def resolve_audio(value, base_dir: str | None):
    """An audio cell with relative paths made absolute (fairseq `path:offset:length` suffixes kept)."""
    if isinstance(value, str):
        if value and base_dir and not os.path.isabs(value) and "://" not in value:
            return os.path.join(base_dir, value)
        return value
    if isinstance(value, dict) and not value.get("bytes") and isinstance(value.get("path"), str):
        return {**value, "path": resolve_audio(value["path"], base_dir)}
    return value


def standardize(
    dataset: Dataset, task: RecipeTask, spec: ColumnSpec, info: SourceInfo, data_args: DataArguments,
    split: str, task_type: str,
) -> Dataset:
    """Map a raw dataset to the standard columns of `task` (see the module docstring).

    Languages and domain come from the row, else from the source (a fairseq split name), else from the
    `--source_lang` / `--target_lang` / `--domain` flags. For ASR the target language is the source language.
    """
    columns = dataset.column_names
    check_columns(columns, task, spec, info, task_type, data_args, split)
    if task.speech and isinstance(dataset.features.get(spec.source), Audio):
        dataset = dataset.cast_column(spec.source, Audio(decode=False))
    read = {field: _column_reader(columns, getattr(spec, field))
            for field in ("id", "target", "source_lang", "target_lang", "domain")}
    source_name = spec.source.partition(".")[0]
    source_key = spec.source.partition(".")[2] or None
    fallback = {
        "source_lang": info.source_lang or data_args.source_lang or "",
        "target_lang": info.target_lang or data_args.target_lang or "",
        "domain": info.domain or data_args.domain or "",
    }
    stem = Path(info.name).stem

    def convert(batch, indices):
        out = {name: [] for name in standard_columns(task)}
        for i, index in enumerate(indices):
            out["id"].append((read["id"] and read["id"](batch, i)) or f"{stem}:{index}")
            source = batch[source_name][i]
            if task.speech:  # `media.wav`: key `wav` of a dict cell (missing: unreadable audio, counted)
                out["audio"].append(resolve_audio(_entry(source, source_key), info.base_dir))
            else:
                out["source_text"].append(_cell(source, source_key))
            out["target_text"].append(read["target"](batch, i))
            for field in ("source_lang", "target_lang", "domain"):
                value = read[field](batch, i) if read[field] else ""
                out[field].append(value or fallback[field])
            if task.same_language:
                out["target_lang"][-1] = out["source_lang"][-1]
        return out

    return dataset.map(
        convert, batched=True, with_indices=True, remove_columns=columns,
        desc=f"Reading {split} data {stem}",
    )


# --------------------------------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------------------------------


def split_sources(data_args: DataArguments) -> dict[str, list[str] | None]:
    """The `--*_file` entries of each split."""
    return {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}


def load_split_from_files(
    split: str, files: list[Path], task: RecipeTask, data_args: DataArguments, task_type: str,
    cache_dir: str | None = None,
) -> Dataset:
    """Load and standardize every file of a split (each with its own folder and split-name metadata), then
    concatenate them."""
    parts = []
    for path in files:
        data_format = detect_format(path, data_args.data_format)
        meta = parse_fairseq_split_name(path.stem) if data_format == "fairseq" else None
        meta = meta or {}
        info = SourceInfo(
            name=str(path),
            base_dir=data_args.audio_root or str(path.parent.resolve()),
            source_lang=meta.get("source_lang"),
            target_lang=meta.get("target_lang"),
            domain=meta.get("domain"),
        )
        spec = column_spec(task, data_args, data_format)
        raw = load_file(path, data_format, cache_dir)
        parts.append(standardize(raw, task, spec, info, data_args, split, task_type))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def load_split_from_dataset(
    split: str, task: RecipeTask, data_args: DataArguments, task_type: str, cache_dir: str | None = None
) -> Dataset:
    """Load one split of `--dataset_name` with `datasets.load_dataset` and standardize it."""
    split_name = getattr(data_args, f"{split}_split_name")
    try:
        raw = datasets.load_dataset(
            data_args.dataset_name, data_args.dataset_config_name, split=split_name, cache_dir=cache_dir
        )
    except (ValueError, KeyError) as error:
        raise DataError(f"cannot load split {split_name!r} of {data_args.dataset_name!r}: {error}") from error
    local = os.path.isdir(data_args.dataset_name)
    info = SourceInfo(
        name=f"{data_args.dataset_name}[{split_name}]",
        base_dir=data_args.audio_root or (os.path.abspath(data_args.dataset_name) if local else None),
    )
    spec = column_spec(task, data_args, "dataset")
    return standardize(raw, task, spec, info, data_args, split, task_type)


def load_splits(
    task: RecipeTask, data_args: DataArguments, splits: list[str], task_type: str, cache_dir: str | None = None
) -> dict[str, Dataset]:
    """The standardized splits named in `splits` (a subset of `train`, `validation`, `test`).

    Every file is checked before anything is read, so a typo fails fast.
    """
    sources = split_sources(data_args)
    files = {split: expand_files(sources[split], data_args.manifest_dir) for split in splits}
    loaded = {}
    for split in splits:
        limit = getattr(data_args, SAMPLE_LIMITS[split])
        if files[split]:
            dataset = load_split_from_files(split, files[split], task, data_args, task_type, cache_dir)
        elif data_args.dataset_name:
            dataset = load_split_from_dataset(split, task, data_args, task_type, cache_dir)
        else:
            flag = {"train": "--train_file", "validation": "--validation_file", "test": "--test_file"}[split]
            raise DataError(f"the {split} split is needed but neither {flag} nor --dataset_name is given")
        if limit is not None:
            dataset = dataset.select(range(min(limit, len(dataset))))
        logger.info("%s data: %d examples", split, len(dataset))
        loaded[split] = dataset
    return loaded


# --------------------------------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------------------------------


def example_tasks(task: RecipeTask, task_type: str, source_lang: str, target_lang: str, domain: str):
    """`(encoder task, decoder task, group)` of one example. The group names the example's direction (or language,
    or domain) in metrics and in task sampling: `es` for ASR, `fr-en` for translation, the domain for domains."""
    if task_type == "domain":
        return domain, domain, domain
    if task.same_language:
        return source_lang, source_lang, source_lang
    return source_lang, target_lang, f"{source_lang}-{target_lang}" if source_lang and target_lang else ""


def keyed_task(name: str, tasks: list[str]) -> str:
    """The task an example takes on a side whose tasks are `tasks`: its own (`name`), or on a side keyed by no task
    (`[UNKEYED_TASK]`, e.g. `--encoder_tasks default`) that one task, whatever the example's language or domain. A
    row that names none keeps its empty name (skipped as such: its scores and sampling group need it)."""
    return UNKEYED_TASK if tasks == [UNKEYED_TASK] and name else name


def collect_tasks(dataset: Dataset, task: RecipeTask, task_type: str) -> tuple[list[str], list[str]]:
    """The sorted encoder and decoder task names found in `dataset` (empty names ignored)."""
    encoder, decoder = set(), set()
    columns = dataset.select_columns(["source_lang", "target_lang", "domain"]).to_dict()
    for source_lang, target_lang, domain in zip(columns["source_lang"], columns["target_lang"], columns["domain"]):
        enc, dec, _ = example_tasks(task, task_type, source_lang, target_lang, domain)
        encoder.add(enc)
        decoder.add(dec)
    encoder.discard("")
    decoder.discard("")
    if not encoder or not decoder:
        raise DataError("the training data names no task: every row lacks its language (or domain)")
    if POOLED in encoder | decoder:
        raise DataError(f"the training data names a task {POOLED!r} (a language or domain): the name of the "
                        "corpus-level score is reserved, and its scores would be that one's; rename it in the data")
    return sorted(encoder), sorted(decoder)
