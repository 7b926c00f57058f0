# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Publishing head-selection models: the one import point for model cards, model folders and Hub uploads.

* [`write_model_card`] (from `model_card.py`): renders `README.md` (metadata with a model-index of per-task
  WER / BLEU, languages, datasets, tags, base model, license; the tasks, how to load a trained direction, the
  head-sharing tables and heatmap, the training configuration) from the template in `model_cards/`.
* [`prepare_model_folder`] (from `model_folder.py`): makes a saved head-selection folder self-contained for
  `trust_remote_code=True`: the flat remote-code modules and the `custom_pipelines` entry of `config.json`.
* [`check_upload`], [`hub_repo_id`], [`create_hub_repo`], [`push_to_hub`] (here): the upload's checks, the whole id
  a bare name gets, `HfApi.create_repo` + `HfApi.upload_folder` of such a folder (model, tokenizer / processor, card,
  plots, remote code).

Training scripts: after `trainer.save_model()` (and saving the tokenizer / processor), call
`write_model_card(output_dir, model, metrics, ...)` (which also runs `prepare_model_folder`), then
`push_to_hub(output_dir, repo_id)` for `--push_to_hub`. Do not use `Trainer.push_to_hub`: it overwrites `README.md`
with the Trainer's own card.
"""

from __future__ import annotations

import logging
from pathlib import Path

from huggingface_hub import HfApi, get_token
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS as HUB_IGNORE_PATTERNS
from huggingface_hub.utils import filter_repo_objects

# Re-exported: `hf_headsel.hub` stays the one import point for publishing (and for imports written before the split).
from .families import FAMILIES, HEADSEL_MODEL_TYPES, MARIAN, SPEECH2TEXT, Family, family_of
from .model_card import (
    MetricRecord,
    collect_metrics,
    config_rows,
    eval_results,
    head_sharing,
    reads_target_lang_token,
    render_model_card,
    results_table,
    template_path,
    training_rows,
    write_model_card,
)
from .model_folder import PACKAGE_DIR, SHARED_REMOTE_CODE, prepare_model_folder, read_config, remote_code_files

logger = logging.getLogger(__name__)

# Files and folders of a training output folder that do not belong in a model repository.
DEFAULT_IGNORE_PATTERNS = (
    "checkpoint-*",
    "checkpoint-*/**",
    "runs/**",
    "**/__pycache__/**",
    "*.pyc",
    ".ipynb_checkpoints/**",
    "optimizer.pt",
    "scheduler.pt",
    "rng_state*.pth",
    "training_args.bin",  # the Trainer's pickled arguments: they hold --hub_token in clear
)
# A model folder has weights: one of these (a sharded checkpoint: its index and shards).
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
# What `save_pretrained` of a tokenizer, feature extractor or processor writes (the card's examples load one).
PREPROCESSOR_FILES = ("tokenizer_config.json", "tokenizer.json", "preprocessor_config.json", "processor_config.json")
# Files up to this size are searched for the Hub token before an upload: configs, cards, logs, pickled arguments.
# Weights are larger, and reading them all again would double the upload's reading.
MAX_SCANNED_BYTES = 32 * 2**20


def hub_repo_id(repo_id: str, *, token: str | bool | None = None, endpoint: str | None = None) -> str:
    """The repository's whole id, as [`create_hub_repo`] would name it, creating nothing: a name without a namespace
    (`"mt-headsel"`) gets the token's user (`HfApi.whoami`: `"me/mt-headsel"`). A card names this id before
    [`push_to_hub`] creates the repository, after its checks (a refused upload leaves no empty repository)."""
    if "/" in repo_id:
        return repo_id
    return f"{HfApi(endpoint=endpoint, token=token).whoami()['name']}/{repo_id}"


def create_hub_repo(repo_id: str, *, token: str | bool | None = None, private: bool | None = None,
                    endpoint: str | None = None) -> str:
    """`HfApi.create_repo(exist_ok=True)`; returns the repository's whole id, as the Hub names it: a name without a
    namespace (`"mt-headsel"`) is created under the token's user (`"me/mt-headsel"`), the id a card's examples and
    the upload need ([`hub_repo_id`] names it without creating it)."""
    url = HfApi(endpoint=endpoint, token=token).create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    return url.repo_id


def _upload_files(folder: Path, ignore_patterns: list[str]) -> list[str]:
    """The files of `folder` that `HfApi.upload_folder(ignore_patterns=...)` uploads: relative POSIX paths, filtered
    as it filters them (with the Hub library's own ignored paths, `.git/` and `.cache/huggingface/`)."""
    paths = sorted(path.relative_to(folder).as_posix() for path in folder.glob("**/*") if path.is_file())
    return list(filter_repo_objects(paths, ignore_patterns=[*ignore_patterns, *HUB_IGNORE_PATTERNS]))


def _refuse_missing_weights(folder: Path, files: list[str]) -> None:
    """A `ValueError` when no uploaded file is weights: the repository would not load (the weights only in an ignored
    `checkpoint-*/`, or a failed save)."""
    if not list(filter_repo_objects(files, allow_patterns=list(WEIGHT_PATTERNS))):
        raise ValueError(f"{folder} holds no model weights to upload (none of {list(WEIGHT_PATTERNS)} outside the "
                         "ignored paths): save the model into it first (save_pretrained / trainer.save_model)")


def _refuse_token_leaks(folder: Path, files: list[str], token: str | bool | None) -> None:
    """A `ValueError` naming the uploaded files that hold the Hub token this upload uses (a `--hub_token` in a saved
    run configuration, say): a repository, public or shared later, would give the token away."""
    secret = token if isinstance(token, str) else (get_token() if token is not False else None)
    if not secret:
        return
    leaks = [name for name in files if (folder / name).stat().st_size <= MAX_SCANNED_BYTES
             and secret.encode() in (folder / name).read_bytes()]
    if leaks:
        raise ValueError(f"{leaks} in {folder} hold the Hub token this upload uses: take the token out of them, or "
                         f"leave them out with ignore_patterns={leaks}")


def _warn_incomplete(folder: Path, files: list[str]) -> None:
    """Warn about what the card's examples load but the upload lacks: the card, the tokenizer / processor."""
    if "README.md" not in files:
        logger.warning("%s has no README.md: the repository will have no model card (see write_model_card)", folder)
    if not any(Path(name).name in PREPROCESSOR_FILES for name in files):
        logger.warning("%s has no tokenizer or processor files (%s): the repository will not load one; save it into "
                       "the folder first (tokenizer.save_pretrained(folder))", folder, ", ".join(PREPROCESSOR_FILES))


def check_upload(folder: str | Path, *, token: str | bool | None = None, ignore_patterns: list[str] | None = None
                 ) -> list[str]:
    """Refuse, with a `ValueError`, a folder that [`push_to_hub`] would refuse: no `config.json`, no weights among
    the files it uploads, or uploaded files holding the Hub token in use. Touches neither the Hub nor the folder
    ([`push_to_hub`] runs it before it creates the repository). Returns the files that would be uploaded (relative
    POSIX paths)."""
    folder = Path(folder)
    read_config(folder)
    files = _upload_files(folder, [*DEFAULT_IGNORE_PATTERNS, *(ignore_patterns or [])])
    _refuse_missing_weights(folder, files)
    _refuse_token_leaks(folder, files, token)
    return files


def push_to_hub(
    folder: str | Path,
    repo_id: str,
    *,
    token: str | bool | None = None,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str = "Upload head-selection model",
    create_pr: bool = False,
    endpoint: str | None = None,
    ignore_patterns: list[str] | None = None,
    prepare: bool = True,
):
    """Upload a saved model folder to the Hub: `HfApi.create_repo(exist_ok=True)` then `HfApi.upload_folder`.

    Everything in the folder goes (weights, config, tokenizer / processor files, `README.md`, plots, remote-code
    modules) except [`DEFAULT_IGNORE_PATTERNS`] (Trainer checkpoints, logs, optimizer state, the pickled training
    arguments) and `ignore_patterns`. With `prepare=True` (default) the folder is first completed by
    [`prepare_model_folder`].

    Before anything is created or uploaded, a `ValueError` refuses a folder without weights and one whose files hold
    the Hub token in use; a folder without a card or a tokenizer / processor is uploaded with a warning.

    Args:
        folder: the model folder (must hold a `config.json`).
        repo_id: `"user/name"` or `"org/name"` (a bare `"name"`: under the token's user).
        token: a Hub token (default: the logged-in one).
        private: visibility of a repository that does not exist yet.
        revision: the branch to commit to (default: `main`; created from `main` if missing).
        commit_message: the commit title.
        create_pr: open a pull request instead of committing to the branch.
        endpoint: the Hub endpoint (default: `HF_ENDPOINT`, else https://huggingface.co).
        ignore_patterns: more glob patterns (relative to `folder`) to leave out.
        prepare: complete the remote-code files first.

    Returns:
        The `CommitInfo` of the upload (its `repo_url.repo_id` is the whole id).
    """
    folder = Path(folder)
    patterns = [*DEFAULT_IGNORE_PATTERNS, *(ignore_patterns or [])]
    # checked once, before the folder is completed: completing it adds this package's modules and config entries,
    # neither weights nor a token
    check_upload(folder, token=token, ignore_patterns=ignore_patterns)
    if prepare:
        prepare_model_folder(folder)
    _warn_incomplete(folder, _upload_files(folder, patterns))
    api = HfApi(endpoint=endpoint, token=token)
    repo_id = create_hub_repo(repo_id, token=token, private=private, endpoint=endpoint)
    if revision is not None and not revision.startswith("refs/pr/"):  # as the stock `PushToHubMixin.push_to_hub`
        api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
    return api.upload_folder(
        repo_id=repo_id,
        folder_path=folder,
        repo_type="model",
        revision=revision,
        commit_message=commit_message,
        create_pr=create_pr,
        ignore_patterns=patterns,
    )


__all__ = [
    "DEFAULT_IGNORE_PATTERNS",
    "FAMILIES",
    "HEADSEL_MODEL_TYPES",
    "MARIAN",
    "PACKAGE_DIR",
    "SHARED_REMOTE_CODE",
    "SPEECH2TEXT",
    "Family",
    "MetricRecord",
    "check_upload",
    "collect_metrics",
    "config_rows",
    "create_hub_repo",
    "eval_results",
    "family_of",
    "head_sharing",
    "hub_repo_id",
    "prepare_model_folder",
    "push_to_hub",
    "read_config",
    "reads_target_lang_token",
    "remote_code_files",
    "render_model_card",
    "results_table",
    "template_path",
    "training_rows",
    "write_model_card",
]
