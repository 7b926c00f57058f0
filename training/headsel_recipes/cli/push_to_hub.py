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
from hf_headsel.hub import push_to_hub, read_config, write_model_card

from ..results_keys import read_metrics
from . import console_script

logger = logging.getLogger("push_to_hub")

def write_card(folder: Path, args: argparse.Namespace) -> Path:
    """Load the model of `folder` and write its card."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    config = AutoConfig.from_pretrained(folder)
    auto_class = AutoModelForSpeechSeq2Seq if config.model_type == "headsel_speech_to_text" else AutoModelForSeq2SeqLM
    model = auto_class.from_pretrained(folder)
    return write_model_card(
        folder, model, read_metrics(folder), repo_id=args.repo_id, dataset_name=args.dataset_name,
        dataset_id=args.dataset_id, base_model=args.base_model, license=args.license, heatmap_path=args.heatmap,
    )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="headsel-push-to-hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a saved head-selection model folder")
    parser.add_argument("repo_id", help="the Hub repository, e.g. me/mt-headsel")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--revision", help="an existing branch to commit to (default: main)")
    parser.add_argument("--create_pr", action="store_true", help="open a pull request instead of committing")
    parser.add_argument("--commit_message", default="Upload head-selection model")
    parser.add_argument("--token", help="a Hub token (default: HF_TOKEN or the logged-in one)")
    parser.add_argument("--ignore", nargs="*", default=[], help="more glob patterns to leave out")
    parser.add_argument("--write_card", action="store_true", help="(re)write README.md even if there is one")
    parser.add_argument("--dataset_name", help="evaluation dataset, for the card")
    parser.add_argument("--dataset_id", help="Hub id of the dataset, for the card metadata")
    parser.add_argument("--base_model", help="the checkpoint this model was upcycled or fine-tuned from")
    parser.add_argument("--license", default="apache-2.0")
    parser.add_argument("--heatmap", help="a PNG of the head sharing between tasks, embedded in the card")
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    read_config(args.folder)  # a clear error for a folder that is not a saved model
    if args.write_card or not (args.folder / "README.md").is_file():
        logger.info("wrote %s", write_card(args.folder, args))
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
