# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Export the tasks of a head-selection model as stock Transformers models, one folder per task (or direction).

Each folder holds a stock `MarianMTModel` / `Speech2TextForConditionalGeneration` (a `MarianForCausalLM` from the
decoder alone) with the task's selected heads (see `hf_headsel.conversion.export_task_model`; no remote code needed),
the tokenizer / processor, and a model card with that task's scores when the source folder has them
(`all_results.json`, `eval_results.json`, ...).

Which folders, by default: one per task of the side that keys the selection, when only one side does (or only one
side has several tasks); else, when both sides list the same domains, or the same languages of a speech model (speech
recognition), one per task used on both sides; else one per direction (`src-tgt`, every encoder task with every
decoder task: a text model with the same languages on both sides translates between them). `--tasks` and
`--directions` choose instead.

    headsel-export-tasks outputs/mt outputs/mt-exported
    headsel-export-tasks outputs/st outputs/st-exported --directions en-de en-fr
    headsel-export-tasks outputs/mt outputs/mt-exported --push_to_hub --hub_prefix me/mt
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from transformers import AutoConfig, AutoProcessor, AutoTokenizer

import hf_headsel  # noqa: F401  (registers the head-selection classes with the Auto classes)
from hf_headsel.configuration_head_selection import SIDES
from hf_headsel.conversion import export_task_model, needed_sides, resolve_export_tasks
from hf_headsel.families import HEADSEL_MODEL_TYPES, family_of
from hf_headsel.hub import push_to_hub, reads_target_lang_token, write_model_card

from ..results_keys import one_group, read_metrics
from . import console_script

logger = logging.getLogger("export_task_models")


def export_targets(
    config, tasks: list[str] | None = None, directions: list[str] | None = None
) -> list[tuple[str, dict]]:
    """`(folder name, {side: task})` of every model to export (see the module docstring for the default)."""
    if directions:
        by_label = direction_tasks(config)
        wanted = list(by_label) if "all" in directions else list(dict.fromkeys(directions))  # each folder once
        unknown = [label for label in wanted if label not in by_label]
        if unknown:
            raise ValueError(f"unknown directions {unknown}: the directions are {sorted(by_label)} (or 'all')")
        return [(label, by_label[label]) for label in wanted]
    if tasks:
        return [(task, tasks_of(config, task)) for task in dict.fromkeys(tasks)]  # each folder once
    sides = [side for side in needed_sides(config) if len(config.tasks(side)) > 1]
    if len(sides) < 2:
        side = sides[0] if sides else "decoder"
        return [(task, resolve_export_tasks(config, **{f"{side}_task": task})) for task in config.tasks(side)]
    recognises_or_domains = config.task_type == "domain" or config.model_type == "headsel_speech_to_text"
    if config.encoder_tasks == config.decoder_tasks and recognises_or_domains:
        return [(task, resolve_export_tasks(config, task)) for task in config.encoder_tasks]
    return export_targets(config, directions=["all"])


def direction_tasks(config) -> dict[str, dict]:
    """`{"src-tgt": {"encoder": src, "decoder": tgt}}` of every encoder task with every decoder task, in order."""
    return {f"{e}-{d}": {"encoder": e, "decoder": d} for e in config.encoder_tasks for d in config.decoder_tasks}


def tasks_of(config, task: str) -> dict:
    """`{side: task}` of `--tasks task`; a `ValueError` in the CLI's terms where the task names no model: a name of
    no task, or a task of one side where the other side's task chooses heads too (then the flag to use)."""
    try:
        return resolve_export_tasks(config, task)
    except ValueError as error:
        known = [side for side in SIDES if task in config.tasks(side)]
        if not known:
            raise ValueError(f"--tasks {task}: no such task (the encoder tasks are {config.encoder_tasks}, the "
                             f"decoder tasks {config.decoder_tasks})") from error
        open_side = next(side for side in needed_sides(config) if side not in known)  # what resolving missed
        raise ValueError(
            f"--tasks {task}: {task!r} names the {known[0]} task only, and the heads are also chosen per {open_side} "
            f"task (one of {config.tasks(open_side)}): export by direction, --directions "
            f"{' '.join(direction_tasks(config))} (or --directions all)"
        ) from error


def task_scores(metrics: dict, label: str, names: dict) -> dict:
    """The exported task's scores among the source's: its group is the label (a domain, or a language recognised)
    or, for translation, the direction `src-tgt` of its tasks (a folder labelled by one side's task)."""
    groups = [label]
    if names.get("encoder") and names.get("decoder") and names["encoder"] != names["decoder"]:
        groups.append(f"{names['encoder']}-{names['decoder']}")
    for group in dict.fromkeys(groups):
        if scores := one_group(metrics, group):
            return scores
    if metrics:
        logger.warning("%s: the source's results hold no scores of %s; its card shows none", label, " or ".join(groups))
    return {}


def load_model(model_dir: str):
    """The head-selection model of a folder, with its Auto class (the decoder alone: `AutoModelForCausalLM`)."""
    config = AutoConfig.from_pretrained(model_dir)
    if config.model_type not in HEADSEL_MODEL_TYPES:
        raise ValueError(f"{model_dir} holds a {config.model_type!r} model, not a head-selection one "
                         f"({', '.join(HEADSEL_MODEL_TYPES)}): there are no tasks to export")
    return family_of(config.model_type).auto_class_of(config).from_pretrained(model_dir).eval()


def load_preprocessor(model_dir: str):
    """The processor (speech) or tokenizer (text) saved with the model, or `None`."""
    for loader in (AutoProcessor, AutoTokenizer):
        try:
            return loader.from_pretrained(model_dir)
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.debug("no %s in %s: %s", loader.__name__, model_dir, error)
    logger.warning("%s has no tokenizer or processor: the exported folders will have none", model_dir)
    return None


def export_all(model_dir: str, output_dir: str, tasks=None, directions=None, source_name: str | None = None,
               license: str = "apache-2.0", hub_prefix: str | None = None) -> list[Path]:
    """Export every target of [`export_targets`] from `model_dir` into `output_dir/<name>`; returns the folders.
    With `hub_prefix`, each card names the repository `<hub_prefix>-<name>` it will be uploaded to."""
    model = load_model(model_dir)
    preprocessor = load_preprocessor(model_dir)
    metrics = read_metrics(model_dir)
    card_keywords = dict(task_type=model.config.task_type, target_lang_token=reads_target_lang_token(preprocessor))
    folders = []
    unread = model.unread_sides()  # the decoder alone's source, unless a layer reads it (its config lists its tasks)
    for label, names in export_targets(model.config, tasks, directions):
        names = {side: name for side, name in names.items() if side not in unread}
        folder = Path(output_dir) / label
        stock = export_task_model(model, encoder_task=names.get("encoder"), decoder_task=names.get("decoder"))
        stock.save_pretrained(folder)
        if preprocessor is not None:
            preprocessor.save_pretrained(folder)
        write_model_card(folder, stock, task_scores(metrics, label, names), model_name=folder.name,
                         repo_id=f"{hub_prefix}-{label}" if hub_prefix else None, exported_tasks=names,
                         source_model=source_name or model_dir, base_model=source_name, license=license,
                         **card_keywords)
        logger.info("exported %s -> %s", names, folder)
        folders.append(folder)
    return folders


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="headsel-export-tasks", description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", help="a saved head-selection model folder")
    parser.add_argument("output_dir", help="where the task folders go")
    parser.add_argument("--tasks", nargs="+", help="task names to export (each used on every side that has it)")
    parser.add_argument("--directions", nargs="+", help="'src-tgt' directions to export, or 'all'")
    parser.add_argument("--source_name", help="the Hub id of the source model, for the cards")
    parser.add_argument("--license", default="apache-2.0")
    parser.add_argument("--push_to_hub", action="store_true", help="upload every folder as <hub_prefix>-<task>")
    parser.add_argument("--hub_prefix", help="repository id prefix for --push_to_hub, e.g. me/mt-headsel")
    parser.add_argument("--private", action="store_true")
    args = parser.parse_args(argv)
    if args.tasks and args.directions:
        parser.error("--tasks and --directions are exclusive")
    if (args.hub_prefix or args.private) and not args.push_to_hub:
        parser.error("--hub_prefix and --private describe the upload: add --push_to_hub (without it nothing is "
                     "uploaded and the cards name no repository)")
    if args.push_to_hub and (not args.hub_prefix or "/" not in args.hub_prefix):
        parser.error("--push_to_hub needs --hub_prefix with a namespace (me/mt-headsel: the repositories are "
                     "me/mt-headsel-<task>, the id the cards' examples load)")
    return args


def main(argv=None) -> list[Path]:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    folders = export_all(args.model_dir, args.output_dir, args.tasks, args.directions, args.source_name, args.license,
                         hub_prefix=args.hub_prefix if args.push_to_hub else None)
    if args.push_to_hub:
        for folder in folders:
            info = push_to_hub(folder, f"{args.hub_prefix}-{folder.name}", private=args.private or None)
            logger.info("pushed %s: %s", folder, info.commit_url)
    return folders


console = console_script(main)

if __name__ == "__main__":
    main()
