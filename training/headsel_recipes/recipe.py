# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""One recipe for ASR, ST and MT: arguments -> data -> tasks -> tokenizer/features -> model -> prepared splits ->
Trainer -> train / average / evaluate / predict. The entry scripts only choose the [`RecipeTask`]."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import transformers
from sacrebleu.metrics import BLEU
from transformers import EarlyStoppingCallback, Speech2TextFeatureExtractor, Speech2TextProcessor, set_seed

from hf_headsel.card_metrics import ERROR_RATES
from hf_headsel.configuration_head_selection import SIDES, UNKEYED_TASK
from hf_headsel.model_card import language_token

from .arguments import DataArguments, HeadSelectionArguments, ModelArguments, RecipeTask, parse_arguments
from .audio import SpecAugment
from .collator import Seq2SeqCollator
from .data import DataError, collect_tasks, load_splits
from .environment import record_environment
from .metrics import TaskMetrics, is_noise_dependent, is_unlearned
from .modeling import (STRUCTURAL_KEYWORDS, build_model, checkpoint_tasks, find_checkpoints, load_averaged_weights,
                       parse_config_overrides, refuse_head_selection_overrides)
from .publishing import publish, take_push_to_hub
from .preprocess import PrepareContext, SplitReport, prepare_split, write_report
from .results_keys import TRAIN_LOSS_EVAL_MODE, TRAIN_LOSS_TRAIN_MODE, predictions_path, unusable_key
from .run_folder import (AVERAGED_CHECKPOINTS_NAME, clear_earlier_run, earlier_run, folder_files,
                         removed_on_failure)
from .tokenizer import (
    check_tokenizer_flags,
    has_tokenizer,
    load_tokenizer,
    piece_ids,
    task_tag,
    task_tag_ids,
    train_marian_tokenizer,
    train_speech_tokenizer,
)
from .trainer import HeadSelSeq2SeqTrainer, NoiseScheduleCallback, TemperatureScheduleCallback

logger = logging.getLogger("headsel_recipes")
FEATURE_EXTRACTOR_FILES = ("preprocessor_config.json", "processor_config.json")


@dataclass
class RecipeResult:
    """What a run produced: the trainer (with its model), the metrics of each stage, the data reports."""

    trainer: HeadSelSeq2SeqTrainer
    metrics: dict[str, dict] = field(default_factory=dict)
    reports: list[SplitReport] = field(default_factory=list)


def setup_logging(training_args) -> None:
    """Log like the Transformers example scripts. The recipe's own messages (tasks, tokenizer, the per-split summary
    of kept and skipped examples) are INFO on the main process unless `--log_level` says otherwise."""
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", datefmt="%m/%d/%Y %H:%M:%S",
                        handlers=[logging.StreamHandler(sys.stdout)])
    level = training_args.get_process_log_level()
    if training_args.log_level != "passive" or training_args.log_level_replica != "warning":
        datasets.utils.logging.set_verbosity(level)
        transformers.utils.logging.set_verbosity(level)
    elif training_args.should_log:
        level = logging.INFO
    logger.setLevel(level)


def needed_splits(training_args) -> list[str]:
    """The splits a run reads: train (`--do_train`), validation (`--do_eval` or evaluation during training), test
    (`--do_predict`)."""
    splits = []
    if training_args.do_train:
        splits.append("train")
    if training_args.do_eval or (training_args.do_train and training_args.eval_strategy != "no"):
        splits.append("validation")
    if training_args.do_predict:
        splits.append("test")
    return splits


def resolve_tasks(task: RecipeTask, head_args: HeadSelectionArguments, raw: dict,
                  fixed: tuple[list[str], list[str], str] | None, path: str | None) -> tuple[list[str], list[str], str]:
    """`(encoder tasks, decoder tasks, task type)`: `fixed`, the tasks of the head-selection checkpoint at `path`,
    else the flags, else the sorted tasks of the training data."""
    if fixed is not None:
        encoder_tasks, decoder_tasks, task_type = fixed
        for side, given, known in (("encoder", head_args.encoder_tasks, encoder_tasks),
                                   ("decoder", head_args.decoder_tasks, decoder_tasks)):
            if given is not None and given != known:
                raise ValueError(f"{path} was trained with {side} tasks {known}; --{side}_tasks {given} differs")
        if head_args.task_type not in (None, task_type):
            raise ValueError(f"{path} was trained with task_type={task_type!r}, not {head_args.task_type!r}")
        return encoder_tasks, decoder_tasks, task_type
    task_type = head_args.task_type or "lang"
    encoder_tasks, decoder_tasks = head_args.encoder_tasks, head_args.decoder_tasks
    if encoder_tasks is None or decoder_tasks is None:
        if "train" not in raw:
            raise DataError("without training data, give the tasks: --encoder_tasks and --decoder_tasks")
        found = collect_tasks(raw["train"], task, task_type)
        encoder_tasks = encoder_tasks or found[0]
        decoder_tasks = decoder_tasks or found[1]
    return list(encoder_tasks), list(decoder_tasks), task_type


def tagged_tasks(task: RecipeTask, task_type: str, raw: dict, side: str, tasks: list[str]) -> list[str]:
    """The task names `--task_tag` (decoder) or `--encoder_task_tag` (encoder) tag examples with: the side's `tasks`,
    or on a side keyed by no task (`--decoder_tasks default`) the examples' own, found in every split read. A tag names
    the example's task whatever the routing: it is what a shared model is told, and routing by no task removes only
    the per-task heads."""
    if tasks != [UNKEYED_TASK]:
        return list(tasks)
    found = [collect_tasks(dataset, task, task_type)[SIDES.index(side)] for dataset in raw.values()]
    return sorted({name for names in found for name in names})


def get_tokenizer(task: RecipeTask, model_args: ModelArguments, data_args: DataArguments, raw: dict,
                  encoder_tasks: list[str], decoder_tasks: list[str], training_args, task_type: str = "lang"):
    """`--tokenizer_name`, else the checkpoint's, else the one already in the output folder (a resumed run; not when
    starting over there), else a sentencepiece model trained on the training text and saved to the output folder.

    The main process decides first; the others then find what it saved (every process passes the same barriers),
    also when the main process trained a new one over an earlier run's (`--overwrite_output_dir`).
    """
    with training_args.main_process_first(local=False, desc="building the tokenizer"):
        own = own_output_dir(data_args, training_args) if training_args.process_index == 0 else training_args.output_dir
        for path in (model_args.tokenizer_name, model_args.model_name_or_path, own):
            if path is not None and (must_load(path, model_args.tokenizer_name, model_args)
                                     or has_tokenizer(path, task.speech)):
                logger.info("tokenizer from %s", path)
                return load_named("tokenizer", path, lambda: load_tokenizer(path, task.speech, model_args.cache_dir))
        if model_args.model_name_or_path:
            raise DataError(f"{model_args.model_name_or_path} holds no tokenizer: give the one it was trained with "
                            "(--tokenizer_name)")
        if "train" not in raw:
            raise DataError("no tokenizer: give --tokenizer_name or --model_name_or_path, or training data to "
                            "build one")
        texts = list(raw["train"]["target_text"])
        if task.speech:
            tags = ([task_tag(task_type, name) for name in tagged_tasks(task, task_type, raw, "decoder", decoder_tasks)]
                    if data_args.task_tag else None)
            tokenizer = train_speech_tokenizer(texts, model_args.vocab_size, model_args.tokenizer_model_type,
                                               model_args.tokenizer_max_sentences, tags)
        else:
            languages = target_languages(raw, task_type, decoder_tasks) if data_args.target_lang_token else []
            symbols = [language_token(lang) for lang in languages]
            if data_args.encoder_task_tag:
                symbols += [task_tag(task_type, name)
                            for name in tagged_tasks(task, task_type, raw, "encoder", encoder_tasks)]
            texts += list(raw["train"]["source_text"])
            tokenizer = train_marian_tokenizer(texts, model_args.vocab_size, model_args.tokenizer_model_type,
                                               symbols or None, model_args.tokenizer_max_sentences)
        if training_args.should_save:
            tokenizer.save_pretrained(training_args.output_dir)
            # loaded back from there, as the other processes and a resumed run load it: the trained one holds its
            # files in a temporary folder, a path that would give the prepared splits' cache another key
            tokenizer = load_tokenizer(training_args.output_dir, task.speech, model_args.cache_dir)
        logger.info("trained a %d-piece sentencepiece tokenizer on the training text", len(tokenizer))
        return tokenizer


def must_load(path: str, named: str | None, model_args: ModelArguments) -> bool:
    """Whether `path` must load (else the next place is tried): it is the flag's own `named` one, or a checkpoint
    that is no local folder (a Hub id)."""
    return path == named or (path == model_args.model_name_or_path and not Path(path).exists())


def load_named(what: str, path: str, load):
    """`load()`, its failure (a typo, a folder without the files, a Hub id offline) a [`DataError`] naming `path`."""
    try:
        return load()
    except OSError as error:
        raise DataError(f"cannot load a {what} from {path!r} (a local folder holding its files, or a Hub id): "
                        f"{error}") from error


def target_languages(raw: dict, task_type: str, decoder_tasks: list[str]) -> list[str]:
    """The languages of `--target_lang_token`'s `>>xx<<` tokens: the decoder tasks, or, where the tasks are domains
    (or the decoder is keyed by no task), the target languages of the rows of every split."""
    if task_type == "lang" and decoder_tasks != [UNKEYED_TASK]:
        return list(decoder_tasks)
    languages = {lang for dataset in raw.values() for lang in dataset["target_lang"]}
    if "" in languages:
        raise DataError("--target_lang_token: rows without a target language; give them one (--target_lang_column "
                        "or --target_lang)")
    return sorted(languages)


def own_output_dir(data_args: DataArguments, training_args) -> str | None:
    """The output folder, where a run may find its own processor; `None` when it starts over there
    (`--overwrite_output_dir`): what the folder holds is an earlier run's."""
    return None if training_args.do_train and data_args.overwrite_output_dir else training_args.output_dir


def get_feature_extractor(model_args: ModelArguments, data_args: DataArguments,
                          training_args) -> Speech2TextFeatureExtractor:
    """`--feature_extractor_name`, else the checkpoint's, else the output folder's, else 80 log-mel bins at 16 kHz
    with utterance mean/variance normalization (fairseq's S2T front end).

    A `--feature_extractor_name`, or a checkpoint that is not a local folder (a Hub id), must load: a typo would
    otherwise give the default front end silently, features the checkpoint was not trained on."""
    for path in (model_args.feature_extractor_name, model_args.model_name_or_path,
                 own_output_dir(data_args, training_args)):
        if path is not None and (must_load(path, model_args.feature_extractor_name, model_args)
                                 or any((Path(path) / name).exists() for name in FEATURE_EXTRACTOR_FILES)):
            logger.info("feature extractor from %s", path)
            return load_named("feature extractor", path, lambda: Speech2TextFeatureExtractor.from_pretrained(
                path, cache_dir=model_args.cache_dir))
    return Speech2TextFeatureExtractor(feature_size=80, num_mel_bins=80, sampling_rate=16000, padding_value=0.0,
                                       do_ceptral_normalize=True, normalize_means=True, normalize_vars=True)


def prepare_context(task, task_type, encoder_tasks, decoder_tasks, tokenizer, feature_extractor, model,
                    data_args: DataArguments, raw: dict) -> PrepareContext:
    """Preprocessing limits: the flags, capped by the model's positions; the task tags of `--task_tag` and
    `--encoder_task_tag`, and the `>>xx<<` tokens of `--target_lang_token` (each a piece of the tokenizer)."""
    if data_args.target_lang_token:
        piece_ids(tokenizer, [language_token(lang) for lang in target_languages(raw, task_type, decoder_tasks)],
                  "--target_lang_token")
    config = model.config
    if task.speech:
        subsampling = 2 ** getattr(config, "num_conv_layers", 2)
        max_source = config.max_source_positions * subsampling
        max_target = config.max_target_positions
    else:
        max_source = min(data_args.max_source_length, config.max_position_embeddings)
        max_target = config.max_position_embeddings
    decoder_tags = (task_tag_ids(tokenizer, task_type, tagged_tasks(task, task_type, raw, "decoder", decoder_tasks))
                    if data_args.task_tag else None)
    encoder_tags = (task_tag_ids(tokenizer, task_type, tagged_tasks(task, task_type, raw, "encoder", encoder_tasks),
                                 "--encoder_task_tag") if data_args.encoder_task_tag else None)
    return PrepareContext(
        task=task, task_type=task_type, encoder_tasks=encoder_tasks, decoder_tasks=decoder_tasks,
        tokenizer=tokenizer, feature_extractor=feature_extractor, max_source_length=max_source,
        max_target_length=min(data_args.max_target_length, max_target),
        min_duration=data_args.min_duration_in_seconds, max_duration=data_args.max_duration_in_seconds,
        target_lang_token=data_args.target_lang_token,
        task_tag_ids=decoder_tags, encoder_tag_ids=encoder_tags,
    )


def use_split(metrics: TaskMetrics, dataset) -> None:
    """Point the metrics at a prepared split: its groups, references and label lengths, in order."""
    metrics.use(dataset["group"], dataset["reference"], [len(labels) for labels in dataset["labels"]])


def write_predictions(path: Path, dataset, hypotheses: list[str]) -> None:
    """`generated_predictions.jsonl`: id, group, reference and hypothesis of every scored example (read back by
    [`headsel_recipes.results_keys.read_predictions`])."""
    with open(path, "w", encoding="utf-8") as handle:
        rows = zip(dataset["id"], dataset["group"], dataset["reference"], hypotheses)
        for row_id, group, reference, hypothesis in rows:
            record = {"id": row_id, "group": group, "reference": reference, "prediction": hypothesis}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def prepare_splits(raw: dict, ctx: PrepareContext, data_args: DataArguments, training_args):
    """Prepare every split (the main process first, so the others read its cache), write `data_report.json`, and
    fail if a split lost every example."""
    prepared, reports = {}, []
    with training_args.main_process_first(desc="preparing the data"):
        for split, dataset in raw.items():
            prepared[split], report = prepare_split(dataset, split, ctx, data_args.preprocessing_num_workers,
                                                    data_args.overwrite_cache)
            reports.append(report)
    if training_args.should_save:
        write_report(reports, Path(training_args.output_dir) / "data_report.json")
    for report in reports:
        if report.kept == 0:
            raise DataError(f"every {report.split} example was skipped: {report.summary()}")
    if "train" in prepared:
        warn_if_tasks_lost(raw["train"], prepared["train"], ctx)
    return prepared, reports


def warn_if_tasks_lost(raw_train, prepared_train, ctx: PrepareContext) -> None:
    """Warn about each task the training data names whose every example was skipped (too long, unreadable, ...):
    it stays a task of the model, with its selection never trained."""
    named = collect_tasks(raw_train, ctx.task, ctx.task_type)
    for side, tasks, names in (("encoder", ctx.encoder_tasks, named[0]), ("decoder", ctx.decoder_tasks, named[1])):
        kept = {tasks[index] for index in set(prepared_train[f"{side}_task_ids"])}
        lost = sorted(set(names) & set(tasks) - kept)
        if lost:
            logger.warning("every training example of %s task(s) %s was skipped (data_report.json says why): the "
                           "model keeps them, their head selection untrained", side, lost)


def numpy_view(dataset, speech: bool):
    """The split as the Trainer reads it: model inputs as numpy arrays (the other columns stay available)."""
    inputs = ["input_features" if speech else "input_ids", "labels", "encoder_task_ids", "decoder_task_ids"]
    return dataset.with_format("numpy", columns=inputs, output_all_columns=True)


def check_flags(task: RecipeTask, model_args: ModelArguments, head_args: HeadSelectionArguments,
                data_args: DataArguments, training_args) -> None:
    """The rules between flags, checked before any data is read or a tokenizer trained (a `ValueError` names the
    rule broken): what would otherwise fail, or quietly do something else, only after preprocessing or training."""
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ValueError("nothing to do: pass --do_train, --do_eval and/or --do_predict")
    if (training_args.do_eval or training_args.do_predict) and not (
            training_args.do_train or model_args.model_name_or_path):
        raise ValueError("--do_eval / --do_predict without --do_train score a trained model: give it with "
                         "--model_name_or_path (else a fresh, untrained model would be scored)")
    if data_args.task_tag and not task.speech:
        raise ValueError("--task_tag is for speech recipes; MT tells the target language with --target_lang_token")
    if data_args.encoder_task_tag and task.speech:
        raise ValueError("--encoder_task_tag is for MT (a tag prepended to the source text); speech recipes tell "
                         "the decoder task with --task_tag")
    if training_args.do_train:
        check_output_dir(task, model_args, data_args, training_args)
    check_tokenizer_flags(model_args.vocab_size, model_args.tokenizer_model_type, model_args.tokenizer_max_sentences)
    # `build_model` checks them too, but only once the data is read and a tokenizer trained
    refuse_head_selection_overrides(parse_config_overrides(model_args.config_overrides))
    if not model_args.shared_baseline:
        list(_schedules(head_args))  # each non-constant schedule has its final value
    if data_args.sampling_alpha != 1.0 and training_args.train_sampling_strategy != "random":
        raise ValueError(f"--sampling_alpha {data_args.sampling_alpha} draws the training order itself: it cannot "
                         f"follow --train_sampling_strategy {training_args.train_sampling_strategy} (keep 'random')")
    metric = training_args.metric_for_best_model
    if metric and training_args.greater_is_better and any(rate in metric.lower() for rate in ERROR_RATES):
        raise ValueError(f"--metric_for_best_model {metric} is an error rate (lower is better), and Transformers "
                         "takes any metric but a loss as higher-better: add --greater_is_better false")
    if data_args.early_stopping_patience and training_args.eval_strategy == "no":
        raise ValueError("--early_stopping_patience needs evaluation during training (--eval_strategy steps/epoch)")
    if training_args.do_train and data_args.average_last_n > 0:
        if training_args.save_strategy == "no":
            raise ValueError(f"--average_last_n {data_args.average_last_n} averages saved checkpoints, and "
                             "--save_strategy no saves none")
        if training_args.save_strategy == "best" and training_args.eval_strategy == "no":
            raise ValueError(f"--average_last_n {data_args.average_last_n} averages saved checkpoints, and "
                             "--save_strategy best saves one only when an evaluation during training is the best so "
                             "far, which --eval_strategy no never runs")
        # with a best metric tracked (early stopping, --load_best_model_at_end) the Trainer also keeps the best
        kept = data_args.average_last_n + bool(data_args.early_stopping_patience or training_args.metric_for_best_model)
        if training_args.save_total_limit is not None and training_args.save_total_limit < kept:
            raise ValueError(f"--average_last_n {data_args.average_last_n} needs the last {data_args.average_last_n} "
                             f"checkpoints kept{' beside the best one' if kept > data_args.average_last_n else ''}, "
                             f"and --save_total_limit {training_args.save_total_limit} keeps fewer")
    if task.metric == "bleu":
        try:
            BLEU(tokenize=data_args.bleu_tokenize)
        except Exception as error:  # sacrebleu raises KeyError for an unknown name, RuntimeError for a missing one
            raise ValueError(f"--bleu_tokenize {data_args.bleu_tokenize!r} cannot score: {error}") from error


def continues_its_run(training_args) -> bool:
    """Whether the run continues the earlier run of `--output_dir` (`--resume_from_checkpoint last`, or one of its
    checkpoints); a checkpoint of another folder continues a run there: this folder's files are not that run's."""
    resume, checkpoint = training_args.resume_from_checkpoint, resume_checkpoint(training_args)
    elsewhere = checkpoint is not None and checkpoint.resolve().parent != Path(training_args.output_dir).resolve()
    return (checkpoint is not None or str(resume).lower() == "last") and not elsewhere


def check_output_dir(task: RecipeTask, model_args: ModelArguments, data_args: DataArguments, training_args) -> None:
    """A training run that neither resumes `--output_dir`'s earlier run nor starts over there
    (`--overwrite_output_dir`) refuses a folder whose checkpoints or tokenizer it would take for its own
    ([`headsel_recipes.run_folder`]); a checkpoint to resume must exist."""
    resume, checkpoint = training_args.resume_from_checkpoint, resume_checkpoint(training_args)
    continues = continues_its_run(training_args)
    if continues and data_args.overwrite_output_dir:
        raise ValueError(f"--overwrite_output_dir starts over in {training_args.output_dir}, and "
                         f"--resume_from_checkpoint {resume} continues a run: give one of them")
    if continues or data_args.overwrite_output_dir:
        return
    left = earlier_run(training_args.output_dir, speech=task.speech,
                       reads_its_tokenizer=not (model_args.tokenizer_name or model_args.model_name_or_path))
    if left:
        start = f"from {checkpoint}" if checkpoint is not None else "from step 0"  # a checkpoint: another folder's
        raise ValueError(f"--output_dir {training_args.output_dir} holds an earlier run's {', '.join(left)}, which "
                         f"this run ({start}) would take for its own: continue that run with "
                         "--resume_from_checkpoint last, start over there with --overwrite_output_dir, or train into "
                         "another --output_dir")


def _schedules(head_args: HeadSelectionArguments):
    """`(schedule, config keyword, final value, callback class)` of each non-constant schedule the flags ask for."""
    for name, keyword, final_flag, callback in (
        ("temperature", "head_selection_temperature", "final_temperature", TemperatureScheduleCallback),
        ("noise", "head_selection_noise_scale", "final_noise_scale", NoiseScheduleCallback),
    ):
        schedule, final = getattr(head_args, f"{name}_schedule"), getattr(head_args, final_flag)
        if schedule == "constant":
            continue
        if final is None:
            raise ValueError(f"--{name}_schedule needs --{final_flag}")
        yield schedule, keyword, final, callback


def schedule_callbacks(config, head_args: HeadSelectionArguments) -> list:
    """The temperature and noise-scale schedules the flags ask for, each starting from the model's config value."""
    return [callback(float(getattr(config, keyword)), final, schedule)
            for schedule, keyword, final, callback in _schedules(head_args)]


def make_trainer(task: RecipeTask, model, tokenizer, feature_extractor, prepared: dict, metrics: TaskMetrics,
                 model_args: ModelArguments, head_args: HeadSelectionArguments, data_args: DataArguments,
                 training_args) -> HeadSelSeq2SeqTrainer:
    """The Trainer: numpy-formatted splits, collators (SpecAugment for training batches only), metrics, task
    sampling and the temperature and noise schedules."""
    formatted = {split: numpy_view(dataset, task.speech) for split, dataset in prepared.items()}
    with_task_ids = not model_args.shared_baseline
    augment = SpecAugment(data_args.freq_mask_num, data_args.freq_mask_width, data_args.time_mask_num,
                          data_args.time_mask_width, data_args.time_mask_ratio) if (
        task.speech and data_args.spec_augment) else None
    callbacks = [] if model_args.shared_baseline else schedule_callbacks(model.config, head_args)
    if data_args.early_stopping_patience:
        callbacks.append(early_stopping(task, data_args.early_stopping_patience, training_args))
    if "validation" in prepared:
        use_split(metrics, prepared["validation"])
    return HeadSelSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=formatted.get("train"),
        eval_dataset=formatted.get("validation"),
        processing_class=Speech2TextProcessor(feature_extractor, tokenizer) if task.speech else tokenizer,
        data_collator=Seq2SeqCollator(task.speech, tokenizer.pad_token_id, with_task_ids, decoder_prefix_start=(
            model.config.decoder_start_token_id if data_args.task_tag else None)),
        train_collator=Seq2SeqCollator(task.speech, tokenizer.pad_token_id, with_task_ids, augment),
        compute_metrics=metrics if training_args.predict_with_generate else None,
        callbacks=callbacks,
        sampling_groups=list(prepared["train"]["group"]) if "train" in prepared else None,
        sampling_alpha=data_args.sampling_alpha,
        selection_learning_rate=head_args.head_selection_learning_rate,
        selection_weight_decay=head_args.head_selection_weight_decay,
    )


def early_stopping(task: RecipeTask, patience: int, training_args) -> EarlyStoppingCallback:
    """Early stopping on `--metric_for_best_model`, by default the task's averaged score (lower WER / higher BLEU)."""
    if training_args.metric_for_best_model is None:
        training_args.metric_for_best_model = task.metric
        training_args.greater_is_better = task.metric not in ERROR_RATES
    # a resumed run continues the patience count (Transformers restores callback states only when asked)
    training_args.restore_callback_states_from_checkpoint = True
    return EarlyStoppingCallback(early_stopping_patience=patience)


def resume_checkpoint(training_args) -> Path | None:
    """The checkpoint `--resume_from_checkpoint` resumes: `last` the output folder's last checkpoint if there is one
    (else a fresh start: restartable runs), `true` the last one (an error if there is none), or a path."""
    resume = training_args.resume_from_checkpoint
    if resume is None or str(resume).lower() in ("false", "none"):
        return None
    if str(resume).lower() in ("last", "true"):
        checkpoints = find_checkpoints(training_args.output_dir)
        if not checkpoints and str(resume).lower() == "true":
            raise ValueError(f"--resume_from_checkpoint true: no checkpoint-* folder in {training_args.output_dir}")
        return checkpoints[-1] if checkpoints else None
    if not (Path(resume) / "config.json").is_file():
        raise ValueError(f"--resume_from_checkpoint {resume}: not a checkpoint folder (no config.json)")
    return Path(resume)


def check_resumable(checkpoint: Path | None, model) -> None:
    """`ValueError` when the checkpoint to resume was made with other tasks or another structure than the model this
    run builds: resuming would quietly load its rows for other tasks, or its weights for another choice rule."""
    if checkpoint is None:
        return
    saved = json.loads((checkpoint / "config.json").read_text())
    for name in ("model_type", *STRUCTURAL_KEYWORDS):
        built = getattr(model.config, name, None)
        if saved.get(name) != built:
            raise ValueError(f"--resume_from_checkpoint: {checkpoint} was trained with {name}={saved.get(name)!r}, "
                             f"and this run builds {name}={built!r}: resume with the flags the run started with, or "
                             "train into another --output_dir")


def train(trainer: HeadSelSeq2SeqTrainer, train_size: int, data_args: DataArguments) -> dict:
    """Train (resuming if asked), average the last checkpoints if asked, save model and processor."""
    checkpoint = resume_checkpoint(trainer.args)
    output = trainer.train(resume_from_checkpoint=None if checkpoint is None else str(checkpoint))
    if data_args.average_last_n > 0:
        average_last_checkpoints(trainer, data_args.average_last_n)
    trainer.save_model()
    eval_mode, train_mode = trainer.mode_losses(trainer.train_dataset)
    warn_if_noise_dependent(eval_mode, train_mode)
    metrics = {**output.metrics, "train_samples": train_size, TRAIN_LOSS_EVAL_MODE: eval_mode,
               TRAIN_LOSS_TRAIN_MODE: train_mode}
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()
    return metrics


def score(trainer: HeadSelSeq2SeqTrainer, metrics: TaskMetrics, dataset, prefix: str, speech: bool) -> dict:
    """Evaluate (`prefix="eval"`) or predict (`"predict"`) on a prepared split; write `{prefix}_results.json` and,
    for predictions, `generated_predictions.jsonl`."""
    use_split(metrics, dataset)
    formatted = numpy_view(dataset, speech)
    if prefix == "eval":
        results = trainer.evaluate(formatted, metric_key_prefix=prefix)
    else:
        results = trainer.predict(formatted, metric_key_prefix=prefix).metrics
        if trainer.is_world_process_zero() and trainer.args.predict_with_generate:
            write_predictions(predictions_path(trainer.args.output_dir), dataset,
                              metrics.last_hypotheses)
    results[f"{prefix}_samples"] = len(dataset)
    warn_if_unlearned(results.get(unusable_key(prefix)), prefix, selection_noise(trainer.model))
    trainer.log_metrics(prefix, results)
    trainer.save_metrics(prefix, results)
    return results


def warn_if_unlearned(share: float | None, split: str, noise_scale: float = 0.0) -> None:
    """Say so when most hypotheses of a split are empty or looping: the model has not learned its task (a recipe
    that does not suit the model, or too few updates), and its BLEU or WER compares nothing (its loss still can).
    With `noise_scale` > 0 (a head selection drawn with sampling noise in training) the warning names the noise,
    measured to keep models that underfit on this plateau."""
    if not is_unlearned(share):
        return
    logger.warning("%.0f%% of the %s hypotheses are empty or looping (`%s`): the model has not learned its task; "
                   "its BLEU or WER compares nothing (its loss still can)", 100 * share, split, unusable_key(split))
    if noise_scale > 0:
        logger.warning("the head selection trained with sampling noise (head_selection_noise_scale=%g), which was "
                       "measured to hold models that underfit on this plateau (benchmarks/RESULTS.md: 'Full size on a "
                       "GPU', 'Depth on the CPU', 'How much sampling noise'); try --head_selection_noise_scale 0 "
                       "(neither schedule measured at depth, --noise_schedule from 1 to 0 or from 0 to 1, avoided its "
                       "cost)", noise_scale)


def warn_if_noise_dependent(eval_mode: float, train_mode: float) -> None:
    """Say so when a trained model scores its own training examples far worse in evaluation mode than with its
    training-time noise on ([`HeadSelSeq2SeqTrainer.mode_losses`], [`is_noise_dependent`]): it has learned to work
    only with that noise (in the 6 + 6-layer CPU benchmark, stock models included, the decoder held one vector at
    every target position without dropout), so its evaluation and test scores will be far from its training loss."""
    if not is_noise_dependent(eval_mode, train_mode):
        return
    logger.warning("on training examples the model's loss is %.2f in evaluation mode and %.2f in training mode "
                   "(`%s`, `%s`): it works only with its training-time noise (dropout, sampling noise), and its "
                   "evaluation and test scores will not follow its training loss. Seen in deep post-norm models, "
                   "where a lower --learning_rate avoided it (training/README.md, 'Runs that did not learn')",
                   eval_mode, train_mode, TRAIN_LOSS_EVAL_MODE, TRAIN_LOSS_TRAIN_MODE)


def selection_noise(model) -> float:
    """The sampling-noise scale `model` draws its head selection with in training: 0 where it draws none (a stock
    or adapter model, or only task-specific or `H' = H` components, which learn no selection)."""
    chooses = any(selector.chooses for selector in getattr(model, "head_selection", {}).values())
    return float(model.config.head_selection_noise_scale) if chooses else 0.0


def check_feature_size(model, feature_extractor: Speech2TextFeatureExtractor) -> None:
    """A `ValueError` naming the flags to change when the speech model reads another number of features per frame than
    the feature extractor makes."""
    if model.config.input_feat_per_channel != feature_extractor.feature_size:
        raise ValueError(f"the model reads {model.config.input_feat_per_channel} features per frame, the feature "
                         f"extractor makes {feature_extractor.feature_size}: give the feature extractor the model was "
                         "trained with (--feature_extractor_name), or a model that reads as many "
                         "(--config_overrides input_feat_per_channel=...)")


def run(task: RecipeTask, args: list[str] | None = None) -> RecipeResult:
    """Run a recipe with command-line `args` (default `sys.argv[1:]`)."""
    model_args, head_args, data_args, training_args = parse_arguments(args)
    push = take_push_to_hub(training_args)
    check_flags(task, model_args, head_args, data_args, training_args)
    setup_logging(training_args)
    set_seed(training_args.seed)
    Path(training_args.output_dir).mkdir(parents=True, exist_ok=True)
    logger.info("recipe %s; training arguments %s", task.name, training_args)
    # a run that does not continue the folder's run clears its scores, predictions and selection log (checkpoints
    # and a tokenizer it would reuse were refused above, unless --overwrite_output_dir): they describe another model
    if training_args.do_train and not continues_its_run(training_args):
        with training_args.main_process_first(desc="clearing the earlier run"):
            if training_args.should_save:
                clear_earlier_run(training_args.output_dir)

    # before the data is read: a feature extractor that does not load fails the run at once
    feature_extractor = get_feature_extractor(model_args, data_args, training_args) if task.speech else None
    fixed = checkpoint_tasks(model_args.model_name_or_path, model_args.cache_dir) if (
        model_args.model_name_or_path and not model_args.shared_baseline) else None
    task_type = fixed[2] if fixed else (head_args.task_type or "lang")
    with training_args.main_process_first(desc="reading the data"):
        raw = load_splits(task, data_args, needed_splits(training_args), task_type, model_args.cache_dir)
    encoder_tasks, decoder_tasks, task_type = resolve_tasks(task, head_args, raw, fixed, model_args.model_name_or_path)
    logger.info("task_type=%s; encoder tasks %s; decoder tasks %s", task_type, encoder_tasks, decoder_tasks)
    files_before = folder_files(training_args.output_dir)
    tokenizer = get_tokenizer(task, model_args, data_args, raw, encoder_tasks, decoder_tasks, training_args, task_type)
    written = folder_files(training_args.output_dir) - files_before if training_args.should_save else set()
    # a check failing from here to the start of training stops a run that trained nothing: the tokenizer it trained
    # goes too, or the next run in the folder would refuse it as an earlier run's
    with removed_on_failure(training_args.output_dir, written):
        head_args.task_type = task_type
        model = build_model(task, model_args, head_args, tokenizer, encoder_tasks, decoder_tasks)
        resumed_from = resume_checkpoint(training_args) if training_args.do_train else None
        check_resumable(resumed_from, model)
        if task.speech:
            check_feature_size(model, feature_extractor)
        generation = model.generation_config
        generation.max_length = training_args.generation_max_length or generation.max_length
        generation.num_beams = training_args.generation_num_beams or generation.num_beams

        ctx = prepare_context(task, task_type, encoder_tasks, decoder_tasks, tokenizer, feature_extractor, model,
                              data_args, raw)
        prepared, reports = prepare_splits(raw, ctx, data_args, training_args)
        metrics = TaskMetrics(tokenizer, task.metric, data_args.bleu_tokenize, data_args.bootstrap_resamples)
        trainer = make_trainer(task, model, tokenizer, feature_extractor, prepared, metrics, model_args, head_args,
                               data_args, training_args)
    result = RecipeResult(trainer, reports=reports)
    if training_args.should_save:  # a rerun on another machine or library version drifts: say where this one ran
        record_environment(training_args.output_dir, recipe=task.name, do_train=training_args.do_train,
                           do_eval=training_args.do_eval, do_predict=training_args.do_predict,
                           resumed_from=resumed_from and str(resumed_from), processes=training_args.world_size)
    if training_args.do_train:
        result.metrics["train"] = train(trainer, len(prepared["train"]), data_args)
    if training_args.do_eval:
        result.metrics["eval"] = score(trainer, metrics, prepared["validation"], "eval", task.speech)
    if training_args.do_predict:
        result.metrics["predict"] = score(trainer, metrics, prepared["test"], "predict", task.speech)
    if training_args.do_train or push:
        publish(trainer, result.metrics, model_args, data_args, training_args, push)
    return result


def average_last_checkpoints(trainer: HeadSelSeq2SeqTrainer, last_n: int) -> list[str]:
    """Load the mean of the last `last_n` checkpoints of the output folder into the trainer's model (the paper
    averages the last 10 epochs' checkpoints and evaluates the average)."""
    trainer.accelerator.wait_for_everyone()
    step = trainer.state.global_step  # not an abandoned continuation's later ones (a resume from an earlier step)
    checkpoints = [path for path in find_checkpoints(trainer.args.output_dir)
                   if int(path.name.split("-")[-1]) <= step][-last_n:]
    if not checkpoints:
        logger.warning("--average_last_n %d: no checkpoint-* folder in %s, nothing averaged", last_n,
                       trainer.args.output_dir)
        return []
    if len(checkpoints) < last_n:
        logger.warning("--average_last_n %d: only %d checkpoints to average", last_n, len(checkpoints))
    load_averaged_weights(trainer.model, checkpoints)
    names = [path.name for path in checkpoints]
    logger.info("averaged checkpoints %s into the final model", names)
    if trainer.is_world_process_zero():
        (Path(trainer.args.output_dir) / AVERAGED_CHECKPOINTS_NAME).write_text(json.dumps(names) + "\n")
    return names
