# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Upload a saved head-selection model folder to the Hugging Face Hub.

Completes the folder first (the remote-code modules and the `custom_pipelines` entry of `config.json`, see
`hf_headsel.hub.prepare_model_folder`), writes the model card when the folder has none (or with `--write_card`,
scores from the Trainer's `all_results.json` / `eval_results.json` / `predict_results.json`), then creates the
repository and uploads the folder (model, tokenizer / processor, card, plots, remote code; Trainer checkpoints, logs
and optimizer state are left out). `HF_ENDPOINT` and `HF_TOKEN` are honoured as by `huggingface_hub`.

    headsel-push-to-hub outputs/mt me/mt-headsel --dataset_name "Europarl-ST" --heatmap outputs/mt/heads.png
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import hf_headsel  # noqa: F401  (registers the head-selection classes with the Auto classes)
from hf_headsel.families import family_of
from hf_headsel.hub import (
    HEADSEL_MODEL_TYPES,
    check_upload,
    hub_repo_id,
    push_to_hub,
    read_config,
    write_model_card,
)

from ..results_keys import read_metrics
from . import console_script

logger = logging.getLogger("push_to_hub")
LICENSE = "apache-2.0"


def write_card(folder: Path, args: argparse.Namespace) -> Path:
    """Load the model of `folder` (with its Auto class: a translation, speech or decoder-only model) and write its
    card."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    model = family_of(config.model_type).auto_class_of(config).from_pretrained(folder)
    return write_model_card(
        folder, model, read_metrics(folder), repo_id=args.repo_id, dataset_name=args.dataset_name,
        dataset_id=args.dataset_id, base_model=args.base_model, license=args.license, heatmap_path=args.heatmap,
    )


CARD_FLAGS = ("dataset_name", "dataset_id", "base_model", "heatmap")


def check_card_flags(args: argparse.Namespace, config: dict) -> None:
    """A `ValueError` before any upload where the card would not be what the flags say: card flags given while the
    folder's `README.md` (the one training wrote) is kept, or a card to write for a model that is not a
    head-selection one (an exported model's card is written by `headsel-export-tasks`)."""
    has_card = (args.folder / "README.md").is_file()
    given = [f"--{name}" for name in CARD_FLAGS if getattr(args, name) is not None]
    if args.license != LICENSE:
        given.append("--license")
    if given and has_card and not args.write_card:
        raise ValueError(f"{' '.join(given)} describe the card, and {args.folder / 'README.md'} is kept as it is: "
                         "pass --write_card to write it anew with them")
    if has_card and not args.write_card:  # no card to write
        return
    if config.get("model_type") not in HEADSEL_MODEL_TYPES:
        raise ValueError(f"{args.folder} holds a {config.get('model_type')!r} model: this tool writes the cards of "
                         "head-selection models (an exported model's card is written by headsel-export-tasks); "
                         "give the folder a README.md, or upload it as it is without --write_card")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="headsel-push-to-hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a saved head-selection model folder")
    parser.add_argument("repo_id", help="the Hub repository, e.g. me/mt-headsel")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--revision", help="the branch to commit to (default: main; created if missing)")
    parser.add_argument("--create_pr", action="store_true", help="open a pull request instead of committing")
    parser.add_argument("--commit_message", default="Upload head-selection model")
    parser.add_argument("--token", help="a Hub token (default: HF_TOKEN or the logged-in one)")
    parser.add_argument("--ignore", nargs="*", default=[], help="more glob patterns to leave out")
    parser.add_argument("--write_card", action="store_true", help="(re)write README.md even if there is one")
    parser.add_argument("--dataset_name", help="evaluation dataset, for the card")
    parser.add_argument("--dataset_id", help="Hub id of the dataset, for the card metadata")
    parser.add_argument("--base_model", help="the checkpoint this model was upcycled or fine-tuned from")
    parser.add_argument("--license", default=LICENSE)
    parser.add_argument("--heatmap", help="a PNG of the head sharing between tasks, embedded in the card")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    check_card_flags(args, read_config(args.folder))  # read_config: a clear error for a folder holding no model
    # the upload's checks before the card is written: writing it loads the model, and a folder without weights gets
    # the upload's error rather than the loader's
    check_upload(args.folder, token=args.token, ignore_patterns=args.ignore)
    # the whole id, for the card's examples; push_to_hub creates the repository after its own checks (a refused
    # upload leaves no empty repository)
    args.repo_id = hub_repo_id(args.repo_id, token=args.token)
    card = args.folder / "README.md"
    if args.write_card or not card.is_file():
        logger.info("wrote %s", write_card(args.folder, args))
    elif f'"{args.repo_id}"' not in card.read_text(encoding="utf-8"):
        logger.warning("%s does not name %s: its examples load another id (--write_card writes it anew)", card,
                       args.repo_id)
    info = push_to_hub(
        args.folder, args.repo_id, token=args.token, private=args.private or None, revision=args.revision,
        commit_message=args.commit_message, create_pr=args.create_pr, ignore_patterns=args.ignore,
    )
    logger.info("uploaded %s to %s", args.folder, info.commit_url)
    print(info.commit_url)
    return info


console = console_script(main)

if __name__ == "__main__":
    main()
