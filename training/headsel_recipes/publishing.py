# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The end of a run: the model card of the output folder and, with `--push_to_hub`, the upload.

The Trainer's own `push_to_hub` would upload at every save and overwrite `README.md` with its generic card, so the
recipe takes `--push_to_hub` away from the Trainer ([`take_push_to_hub`]) and, once training and evaluation are
done, writes the head-selection card (per-task scores, tasks, head sharing, training configuration) and uploads the
folder with the remote-code modules through `hf_headsel.hub` ([`publish`]).
"""

from __future__ import annotations

import logging
from pathlib import Path

from hf_headsel.analysis import SELECTION_LOG_NAME, write_analysis
from hf_headsel.modeling_head_selection import HeadSelectionModelMixin
from hf_headsel.hub import hub_repo_id, push_to_hub, write_model_card

logger = logging.getLogger("headsel_recipes")


def take_push_to_hub(training_args) -> bool:
    """Whether `--push_to_hub` was asked; the Trainer itself is then told not to push."""
    asked = bool(training_args.push_to_hub)
    if asked and not training_args.do_train:
        raise ValueError("--push_to_hub uploads the model this run trains and needs --do_train; upload an existing "
                         "folder with headsel-push-to-hub (training/push_to_hub.py)")
    training_args.push_to_hub = False
    return asked


def files_label(data_args, files: list[str] | None) -> str | None:
    """A display name of data files: their names (under the manifest folder's name), not the local paths."""
    names = sorted({Path(name).name for name in files or []})
    if data_args.manifest_dir:
        names = [f"{Path(data_args.manifest_dir).name}/{name}" for name in names]
    return ", ".join(names) or None


def dataset_label(data_args) -> str | None:
    """A display name of the training data (the Trainer's card): the dataset name, or the names of the files."""
    if data_args.dataset_name:
        return data_args.dataset_name
    return files_label(data_args, data_args.train_file or data_args.validation_file or data_args.test_file)


def eval_dataset_labels(data_args) -> str | dict[str, str] | None:
    """The data the card's scores were computed on: the dataset name (its splits), or `{split: files}`, each split
    named by its own files (validation scores come from --validation_file, not the training data)."""
    if data_args.dataset_name:
        return data_args.dataset_name
    labels = {split: files_label(data_args, files)
              for split, files in (("validation", data_args.validation_file), ("test", data_args.test_file))}
    return {split: label for split, label in labels.items() if label} or None


def analysis_heatmap(model, output_dir: Path) -> Path | None:
    """Write the analysis of the trained model (head-sharing and head-load heatmaps per component, `analysis.json`,
    the selection-stability plot from the training log) into `output_dir`; the first sharing heatmap, for the card."""
    log = output_dir / SELECTION_LOG_NAME
    result = write_analysis(model, output_dir, selection_log=log if log.is_file() else None)
    sharing = [name for name in result["figures"] if name.startswith("head_sharing_")]
    return output_dir / sharing[0] if sharing else None


def publish(trainer, metrics: dict, model_args, data_args, training_args, push: bool, heatmap_path=None) -> Path:
    """Write the analysis and the card of the saved model in `output_dir` (main process only) and upload the
    folder when `push`.

    A stock model (`--shared_baseline`) gets the Trainer's standard card: the head-selection card describes tasks
    and selections it does not have.
    """
    output_dir = Path(training_args.output_dir)
    if not trainer.is_world_process_zero():
        return output_dir / "README.md"
    model = trainer.accelerator.unwrap_model(trainer.model)
    repo_id = training_args.hub_model_id or output_dir.name
    if push:  # the whole id (`name` -> `user/name`) for the card's examples; push_to_hub creates it once it checked
        repo_id = hub_repo_id(repo_id, token=training_args.hub_token)
    if isinstance(model, HeadSelectionModelMixin):
        heatmap_path = heatmap_path or analysis_heatmap(model, output_dir)
        card = write_model_card(
            output_dir, model, {k: v for k, v in metrics.items() if k != "train"}, repo_id=repo_id,
            dataset_name=eval_dataset_labels(data_args), dataset_id=data_args.dataset_name,
            base_model=model_args.model_name_or_path, heatmap_path=heatmap_path, training_args=training_args,
            target_lang_token=data_args.target_lang_token,
        )  # fmt: skip
    else:
        trainer.create_model_card(model_name=repo_id, dataset=dataset_label(data_args))
        card = output_dir / "README.md"
    logger.info("model card written to %s", card)
    if push:
        info = push_to_hub(output_dir, repo_id, token=training_args.hub_token,
                           private=training_args.hub_private_repo,
                           revision=getattr(training_args, "hub_revision", None))
        logger.info("uploaded %s to %s", output_dir, getattr(info, "commit_url", repo_id))
    return card
