# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The Trainer of the recipes: `Seq2SeqTrainer` with the head-selection loss, task sampling, a training-only
collator, temperature annealing, and head-selection logging.

`Seq2SeqTrainer`'s own `label_smoothing_factor` recomputes the loss from the logits and would silently drop the KL
term the model adds to its loss. [`HeadSelSeq2SeqTrainer`] replaces its label smoother with [`HeadSelLoss`]:
label-smoothed cross-entropy (fairseq's formula) plus `config.head_selection_kl_weight * head_selection_kl`, used for
the training loss and for the evaluation loss alike.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import SequentialSampler
from transformers import Seq2SeqTrainer, TrainerCallback

from hf_headsel.analysis import SELECTION_LOG_NAME, changed_heads, selection_snapshot
from hf_headsel import HeadSelector

from .sampling import TemperatureSampler

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
SCHEDULES = ("constant", "linear", "exponential")
#: How many training examples [`HeadSelSeq2SeqTrainer.mode_losses`] scores after training (a few batches).
MODE_CHECK_EXAMPLES = 256


def label_smoothed_nll(logits: torch.Tensor, labels: torch.Tensor, epsilon: float,
                       tokens: torch.Tensor | int | None = None) -> torch.Tensor:
    """Label-smoothed cross-entropy summed over the non-ignored tokens, divided by `tokens` (default: their count,
    the mean) (fairseq's `label_smoothed_cross_entropy`: `(1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_v -log p_v`;
    plain cross-entropy when `epsilon` is 0)."""
    log_probs = F.log_softmax(logits.float(), dim=-1)
    mask = labels != IGNORE_INDEX
    safe_labels = labels.masked_fill(~mask, 0)
    nll = -log_probs.gather(-1, safe_labels.unsqueeze(-1)).squeeze(-1)
    if epsilon:
        eps_i = epsilon / (log_probs.shape[-1] - 1)
        nll = (1.0 - epsilon - eps_i) * nll - eps_i * log_probs.sum(dim=-1)
    return (nll * mask).sum() / (mask.sum() if tokens is None else torch.as_tensor(tokens)).clamp(min=1)


class HeadSelLoss:
    """The recipe loss from model outputs: label-smoothed CE + `kl_weight * outputs.head_selection_kl`.

    Has the call signature of Transformers' `LabelSmoother`, so `Seq2SeqTrainer.prediction_step` uses it too.
    """

    def __init__(self, epsilon: float, model):
        self.epsilon, self.model = epsilon, model

    def kl_weight(self) -> float:
        return float(getattr(self.model.config, "head_selection_kl_weight", 0.0) or 0.0)

    def __call__(self, outputs, labels: torch.Tensor, shift_labels: bool = False, num_items_in_batch=None):
        return label_smoothed_nll(outputs["logits"], labels, self.epsilon) + self.kl_term(outputs)

    def kl_term(self, outputs) -> torch.Tensor | float:
        """`kl_weight * outputs.head_selection_kl` (0 without a KL or a weight)."""
        kl = outputs.get("head_selection_kl") if isinstance(outputs, dict) else None
        return self.kl_weight() * kl if kl is not None and self.kl_weight() else 0.0


class HeadSelSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` for head-selection recipes.

    Args:
        train_collator: collator of the training batches (e.g. with SpecAugment); `data_collator` serves evaluation.
        sampling_groups: the task group of every training example, for temperature-based task sampling.
        sampling_alpha: `p(task) ∝ n_task ** alpha`; 1.0 keeps the Trainer's own (shuffled) sampler.
        selection_learning_rate: peak learning rate of the selection logits (`None`: `args.learning_rate`).
        selection_weight_decay: weight decay of the selection logits.
    """

    def __init__(self, *args, train_collator=None, sampling_groups: list[str] | None = None,
                 sampling_alpha: float = 1.0, selection_learning_rate: float | None = None,
                 selection_weight_decay: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        if selection_learning_rate is not None and selection_learning_rate < 0:
            raise ValueError(f"--head_selection_learning_rate must be >= 0 (0 freezes the selection logits), got "
                             f"{selection_learning_rate}")
        if selection_weight_decay < 0:
            raise ValueError(f"--head_selection_weight_decay must be >= 0, got {selection_weight_decay}")
        self.selection_learning_rate, self.selection_weight_decay = selection_learning_rate, selection_weight_decay
        self.label_smoother = HeadSelLoss(self.args.label_smoothing_factor, self.model)
        # The Trainer then counts the target tokens of each optimizer step (every accumulated batch, every process)
        # and passes the count to `compute_loss`, which normalizes by it (the model itself is not given it).
        self.model_accepts_loss_kwargs = True
        self.train_collator = train_collator
        self.sampling_groups, self.sampling_alpha = sampling_groups, sampling_alpha
        self._temperature_sampler: TemperatureSampler | None = None
        self._kl_sum, self._kl_steps = 0.0, 0
        self._last_selection = None

    # ---- loss -------------------------------------------------------------------------------------------------

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        outputs = model(**inputs)
        if model.training and num_items_in_batch is not None:
            loss = self.step_loss(outputs, inputs["labels"], num_items_in_batch)
        else:  # evaluation (which Transformers 5.24 hands a token count too): the batch's mean
            loss = self.label_smoother(outputs, inputs["labels"])
        kl = outputs.get("head_selection_kl")
        if model.training and kl is not None:
            self._kl_sum += float(kl.detach())
            self._kl_steps += 1
        return (loss, outputs) if return_outputs else loss

    def step_loss(self, outputs, labels: torch.Tensor, step_tokens) -> torch.Tensor:
        """This batch's share of one optimizer step's loss, as the stock Trainer scales its models' losses: the
        cross-entropy summed over the batch's target tokens and divided by the target tokens of the whole step
        (`step_tokens`: every accumulated batch, every process where `average_tokens_across_devices`), so that
        accumulated or distributed batches train as one large batch would (a mean per batch weighted short batches'
        tokens more); the KL term averaged over the step's batches."""
        loss = label_smoothed_nll(outputs["logits"], labels, self.label_smoother.epsilon, tokens=step_tokens)
        if self.args.average_tokens_across_devices and self.args.world_size > 1:
            loss = loss * self.accelerator.num_processes  # processes' gradients are averaged, the count is global
        return loss + self.label_smoother.kl_term(outputs) / self.current_gradient_accumulation_steps

    def training_step(self, model, inputs, num_items_in_batch=None):
        if self._last_selection is None:
            self._last_selection = self._selection()
            if self._last_selection is not None:  # the selection the run starts from: the log's first snapshot
                self.append_selection_log()
        return super().training_step(model, inputs, num_items_in_batch)

    # ---- evaluation ---------------------------------------------------------------------------------------------

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        """`Seq2SeqTrainer.prediction_step`; with `--task_tag`, generation starts from each example's
        `decoder_prefix_ids` (start token, task tag) and the tag is blanked out of the returned tokens, so scores
        read the words alone. The loss is the model's on the labels, tag included."""
        prefix = inputs.pop("decoder_prefix_ids", None)
        if prefix is None or prediction_loss_only or not self.args.predict_with_generate:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)
        gen_kwargs = {**getattr(self, "_gen_kwargs", {}), **gen_kwargs, "decoder_input_ids": prefix.to(model.device)}
        loss, generated, labels = super().prediction_step(model, inputs, prediction_loss_only, ignore_keys,
                                                          **gen_kwargs)
        if generated is not None:
            generated[:, 1:prefix.shape[1]] = self.model.config.pad_token_id
        return loss, generated, labels

    @torch.no_grad()
    def mode_losses(self, dataset, examples: int = MODE_CHECK_EXAMPLES) -> tuple[float, float]:
        """The cross-entropy (nats per target token, no label smoothing, no KL) of `examples` examples spread
        evenly over `dataset`, batched as for evaluation, in evaluation mode and in training mode (dropout, and a
        head selection's sampling noise, on): `(eval_mode, train_mode)`. A model that has learned its task scores
        about the same in both or better in evaluation mode; one far worse in evaluation mode works only with its
        training-time noise (see `recipe.warn_if_noise_dependent`). The random state and the model's mode are
        restored afterwards, so training or scoring after this call is unchanged."""
        indices = torch.linspace(0, len(dataset) - 1, min(examples, len(dataset))).long().unique().tolist()
        loader = self.get_test_dataloader(dataset.select(indices))  # evaluation batches, no cached loader
        model, was_training = self.model, self.model.training
        losses = []
        with torch.random.fork_rng():
            for training in (False, True):
                model.train(training)
                torch.manual_seed(self.args.seed)
                total, tokens = 0.0, 0
                for inputs in loader:
                    inputs = self._prepare_inputs(inputs)
                    inputs.pop("decoder_prefix_ids", None)
                    count = int((inputs["labels"] != IGNORE_INDEX).sum())
                    total += float(label_smoothed_nll(model(**inputs).logits, inputs["labels"], 0.0)) * count
                    tokens += count
                losses.append(total / max(tokens, 1))
        model.train(was_training)
        return losses[0], losses[1]

    # ---- optimizer ----------------------------------------------------------------------------------------------

    def create_optimizer(self, model=None):
        """The Trainer's optimizer, with the selection logits moved into a group of their own (their learning rate
        and weight decay). Done before the scheduler exists, so the schedule scales this group like the others."""
        optimizer = super().create_optimizer(model)
        logits = selection_logits(self.model if model is None else model)
        if not logits or not isinstance(optimizer, torch.optim.Optimizer):
            return optimizer
        ids = {id(p) for p in logits}
        for group in optimizer.param_groups:
            group["params"] = [p for p in group["params"] if id(p) not in ids]
        lr = self.args.learning_rate if self.selection_learning_rate is None else self.selection_learning_rate
        optimizer.add_param_group({"params": logits, "lr": lr, "weight_decay": self.selection_weight_decay})
        return optimizer

    # ---- data -------------------------------------------------------------------------------------------------

    def _get_eval_sampler(self, eval_dataset):
        # `--train_sampling_strategy group_by_length` also reorders evaluation batches in Transformers 5; scores are
        # matched with references and tasks by position, so evaluation always reads the split in order (distributed
        # evaluation keeps the Trainer's sharding, which Accelerate gathers back in order).
        if self.args.world_size <= 1:
            return SequentialSampler(eval_dataset)
        return None  # the stock distributed evaluation, without `group_by_length`'s reordering

    def _get_train_sampler(self, train_dataset=None):
        if self.sampling_alpha == 1.0 or self.sampling_groups is None:
            return super()._get_train_sampler(train_dataset)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        sampler = self._temperature_sampler = TemperatureSampler(self.sampling_groups, self.sampling_alpha, seed=seed)
        logger.info("task sampling (alpha=%s): %s", self.sampling_alpha,
                    {task: round(p, 4) for task, p in sampler.probabilities.items()})
        return sampler

    def _run_epoch(self, *args, **kwargs):
        # The resumed epoch's loader (Accelerate's `skip_first_batches`) wraps a distributed run's sampler where
        # neither Accelerate's nor the Trainer's `set_epoch` reaches it: it would replay epoch 0's draws.
        if self._temperature_sampler is not None:
            self._temperature_sampler.set_epoch(kwargs["epoch"] if "epoch" in kwargs else args[1])
        return super()._run_epoch(*args, **kwargs)

    def get_train_dataloader(self):
        if self.train_collator is None:
            return super().get_train_dataloader()
        eval_collator, self.data_collator = self.data_collator, self.train_collator
        try:
            return super().get_train_dataloader()
        finally:
            self.data_collator = eval_collator

    # ---- logging ----------------------------------------------------------------------------------------------

    def _selection(self) -> dict[str, torch.Tensor] | None:
        model = self.accelerator.unwrap_model(self.model)
        return model.selected_heads() if hasattr(model, "selected_heads") else None

    def append_selection_log(self) -> None:
        """Append the current selection (per component, task and layer: the selected heads) at the current step
        to `<output_dir>/head_selection_log.jsonl`, read by `hf_headsel.analysis` for selection stability.

        Main process only. A resumed run appends again from its checkpoint's step; the reader lets those
        snapshots replace the interrupted run's from that step on.
        """
        if not self.is_world_process_zero():
            return
        path = Path(self.args.output_dir) / SELECTION_LOG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        record = selection_snapshot(self.accelerator.unwrap_model(self.model), self.state.global_step)
        with path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(record, ensure_ascii=False) + "\n")

    def head_selection_logs(self) -> dict[str, float]:
        """KL (mean since the last log), temperature, noise scale, and how many selected heads were swapped since
        the last log (per task and layer, the heads selected now that were not before: `changed_heads`); the
        selection itself goes to the selection log."""
        selection = self._selection()
        if selection is None:
            return {}
        self.append_selection_log()
        config = self.model.config
        logs = {"head_selection_temperature": float(config.head_selection_temperature),
                "head_selection_noise_scale": float(config.head_selection_noise_scale)}
        if self._kl_steps:
            logs["head_selection_kl"] = self._kl_sum / self._kl_steps
        if self._last_selection is not None:
            logs["head_selection_changes"] = sum(changed_heads(self._last_selection[name], selection[name])
                                                 for name in selection)
        self._kl_sum, self._kl_steps, self._last_selection = 0.0, 0, selection
        return logs

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if "loss" in logs:
            logs.update(self.head_selection_logs())
        super().log(logs, *args, **kwargs)


def selection_logits(model) -> list[torch.nn.Parameter]:
    """The trainable selection logits `phi` of a model (none for the stock model and `task_specific`)."""
    return [module.logits for module in model.modules()
            if isinstance(module, HeadSelector) and module.logits is not None and module.logits.requires_grad]


def schedule_value(step: int, max_steps: int, start: float, end: float, schedule: str) -> float:
    """The value of a schedule at (0-based) `step` of `max_steps`: constant, or linear / exponential from `start` at
    the first step to `end` at the last (the temperature's, and the noise scale's)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}: use one of {SCHEDULES}")
    if schedule == "constant" or max_steps <= 1:
        return start
    progress = min(max(step / (max_steps - 1), 0.0), 1.0)
    if schedule == "linear":
        return start + (end - start) * progress
    return start * math.exp(math.log(end / start) * progress)  # exponential


class ConfigScheduleCallback(TrainerCallback):
    """Anneal a runtime config keyword (read by the model on every forward pass) as training goes: the temperature
    (`head_selection_temperature`) or the noise scale (`head_selection_noise_scale`).

    The value is a function of the global step only, so a resumed run continues the schedule where it stopped.
    """

    def __init__(self, keyword: str, start: float, end: float, schedule: str = "linear"):
        schedule_value(0, 1, start, end, schedule)  # validates the schedule
        if schedule == "exponential" and (start <= 0 or end <= 0):
            raise ValueError(f"an exponential schedule of {keyword} needs values > 0, got {start} -> {end}")
        self.keyword, self.start, self.end, self.schedule = keyword, start, end, schedule

    def _set(self, state, model) -> None:
        if model is not None:
            setattr(model.config, self.keyword, schedule_value(
                state.global_step, state.max_steps, self.start, self.end, self.schedule))

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._set(state, model)

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self._set(state, model)


class TemperatureScheduleCallback(ConfigScheduleCallback):
    """Anneal `config.head_selection_temperature` (see [`ConfigScheduleCallback`]); temperatures must be > 0."""

    def __init__(self, start: float, end: float, schedule: str = "linear"):
        if start <= 0 or end <= 0:
            raise ValueError(f"temperatures must be > 0, got {start} -> {end}")
        super().__init__("head_selection_temperature", start, end, schedule)


class NoiseScheduleCallback(ConfigScheduleCallback):
    """Anneal `config.head_selection_noise_scale` (see [`ConfigScheduleCallback`]), e.g. linearly from 1 (the
    paper's sample: the selection explores) to 0 (the evaluation choice: the heads it keeps train alone); >= 0."""

    def __init__(self, start: float, end: float, schedule: str = "linear"):
        if start < 0 or end < 0:
            raise ValueError(f"noise scales must be >= 0, got {start} -> {end}")
        super().__init__("head_selection_noise_scale", start, end, schedule)
