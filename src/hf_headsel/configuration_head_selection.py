# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The head-selection configuration shared by every model family: its keywords, their validation, and the facts
derived from them (tasks, heads and routing keys of each side and component).

* [`HeadSelectionConfigMixin`]: the keywords, mixed into a stock config dataclass (`MarianConfig`,
  `Speech2TextConfig`) by each family's configuration module.
* The vocabulary of the method: [`COMPONENTS`], [`STRATEGIES`], [`SIDES`], and [`component_side`], the side whose
  layers hold a component.

Copied next to saved models as remote code; imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
import typing
from dataclasses import Field, dataclass, field, fields

COMPONENTS = ("encoder_self", "decoder_self", "decoder_cross")
STRATEGIES = ("group", "subset", "task_specific")
TASK_TYPES = ("lang", "domain")
CROSS_ATTENTION_TASK_KEYS = ("decoder", "encoder", "pair")
SIDES = ("encoder", "decoder")
ADAPTER_KEYS = ("direction", "task")
#: The group name of a corpus-level score, over every sentence (the recipes' `{metric}_pooled`, a card's "all
#: (pooled)" row): no task may take it, or its scores would be that one's.
POOLED = "pooled"
#: The one task of a side given no task list. A side whose only task it is is keyed by no task: it selects its H of
#: the H' candidates once for every example, and the recipes route every example there whatever its language or
#: domain (`--encoder_tasks default`: the encoder unrouted, the decoder routed by its task).
UNKEYED_TASK = "default"


# The attribute of a stock encoder / decoder layer that holds each component's attention.
ATTENTION_ATTRIBUTES = {"encoder_self": "self_attn", "decoder_self": "self_attn", "decoder_cross": "encoder_attn"}


def component_side(component: str) -> str:
    """The side whose layers hold a component: `"encoder"` for `encoder_self`, else `"decoder"`."""
    return "encoder" if component == "encoder_self" else "decoder"


def attention_path(component: str, layer: int) -> str:
    """The path of the attention of `component` in `layer` below the base model (`model.base_model`), e.g.
    `decoder.layers.1.encoder_attn`: the same in every family, whose stock layers name their attention alike."""
    return f"{component_side(component)}.layers.{layer}.{ATTENTION_ATTRIBUTES[component]}"


KEYWORD_ROLES = ("tasks", "structure", "runtime", "default")


def _keyword(default, help: str, role: str, *, choices: Sequence[str] | None = None, minimum: float | None = None,
             above: float | None = None):
    """A head-selection config keyword: a dataclass field whose metadata holds its help text, its role (see
    [`KEYWORD_ROLES`]) and the rules `__post_init__` checks (`choices`; `minimum`: value >= it; `above`: value > it)."""
    metadata = {"help": help, "role": role, "choices": None if choices is None else tuple(choices), "minimum": minimum,
                "above": above}
    return field(default=default, metadata=metadata)


@dataclass(repr=False)
class HeadSelectionConfigMixin:
    """Head-selection keywords shared by every head-selection config (mixed into a stock config dataclass).

    Every keyword is a field below, documented by its `help` (also readable as [`head_selection_keywords`]); its
    role says what it decides: `"tasks"` (the task lists), `"structure"` (the shape of the model: a trained
    checkpoint keeps it), `"runtime"` (may change between runs) or `"default"` (the default tasks, also set by
    `from_pretrained(..., task=...)`). `encoder_attention_heads` / `decoder_attention_heads` keep their stock
    meaning: the `H` heads one task uses. Invalid values and combinations raise `ValueError` at creation.
    """

    # The output fields `Trainer.prediction_step` leaves out of the predictions: the stock default (`["cache"]`,
    # the stock configs set none) and the KL the head-selection output adds, so that `compute_metrics` gets the
    # stock model's arrays. A class attribute, not a keyword (no annotation: not a dataclass field).
    keys_to_ignore_at_inference = ["cache", "head_selection_kl"]

    encoder_tasks: list[str] | None = _keyword(
        None, "Ordered encoder task names (default [\"default\"]): the source languages in the lang setting, the "
        "domains in the domain setting; [\"default\"] alone keys the encoder by no task (one selection for all).",
        "tasks")
    decoder_tasks: list[str] | None = _keyword(
        None, "Ordered decoder task names (default [\"default\"]): the target languages in the lang setting, the "
        "domains in the domain setting; [\"default\"] alone keys the decoder by no task (one selection for all).",
        "tasks")
    task_type: str = _keyword(
        "lang", "lang: the encoder is keyed by the source language and the decoder by the target language (zero-shot "
        "directions possible); domain: both sides are keyed by the domain.", "structure", choices=TASK_TYPES)
    head_selection_strategy: str = _keyword(
        "group", "group (paper Eq. 6-7), subset (Eq. 5) or task_specific (Blackwood et al., 2018: task t owns "
        "candidates t*H .. t*H+H-1).", "structure", choices=STRATEGIES)
    head_selection_components: list[str] | None = _keyword(
        None, "The attention components that select heads, among encoder_self, decoder_self and decoder_cross "
        "(default: both self-attentions, as in the paper).", "structure", choices=COMPONENTS)
    total_encoder_attention_heads: int | None = _keyword(
        None, "H' of the encoder, the candidate pool (default 2H; tasks x H for task_specific).", "structure")
    total_decoder_attention_heads: int | None = _keyword(
        None, "H' of the decoder, the candidate pool (default 2H; tasks x H for task_specific).", "structure")
    head_selection_temperature: float | int = _keyword(
        5.0, "Gumbel-sigmoid temperature tau (default 5.0).", "runtime", above=0)
    head_selection_noise_scale: float | int = _keyword(
        1.0, "Scale s of the Gumbel noise in the training sample y = sigmoid((phi + s (g1 - g2)) / tau) (default 1.0, "
        "the paper's sample). 0.0 trains on the deterministic choice (argmax phi, as in evaluation), the "
        "straight-through gate still carrying the gradient to phi.", "runtime", minimum=0)
    head_selection_kl_weight: float | int = _keyword(
        0.0, "Weight of the KL(q || prior) term added to the loss given labels (default 0.0; reported anyway).",
        "runtime", minimum=0)
    default_encoder_task: str | None = _keyword(
        None, "Encoder task used when no encoder_task_ids are given.", "default")
    default_decoder_task: str | None = _keyword(
        None, "Decoder task used when no decoder_task_ids are given.", "default")
    cross_attention_task_key: str = _keyword(
        "decoder", "Which task keys the cross-attention selection: decoder (target-specific), encoder "
        "(source-specific) or pair (the direction, no zero-shot).", "structure", choices=CROSS_ATTENTION_TASK_KEYS)
    task_adapter_dim: int = _keyword(
        0, "Bottleneck of the per-task adapters after every encoder and decoder layer (Bapna and Firat, 2019; 256 "
        "in Gong et al.); 0: no adapters.", "structure", minimum=0)
    task_adapter_key: str = _keyword(
        "direction", "Adapters per direction (one per encoder task x decoder task: the multilingual setting) or per "
        "task (encoder adapters by encoder task, decoder adapters by decoder task: the multi-domain setting).",
        "structure", choices=ADAPTER_KEYS)

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.check_head_selection()

    def check_head_selection(self) -> None:
        """Check every head-selection keyword and their combinations (`ValueError` naming the rule broken), and fill
        in the defaults (task lists, components, `H'`). Run at creation, and again by [`from_dict`] after the
        keywords `from_pretrained(..., **kwargs)` sets on the loaded config; idempotent."""
        # A stock config keeps any unknown keyword as an attribute: one named like a method below (`tasks=[...]`,
        # `heads=4`) would hide the method and fail later with "'list' object is not callable".
        shadowed = sorted(name for name in vars(self) if callable(vars(HeadSelectionConfigMixin).get(name)))
        if shadowed:
            raise ValueError(
                f"{shadowed} name methods of head-selection configs, not keywords (the keywords: "
                f"{[keyword.name for keyword in fields(HeadSelectionConfigMixin)]})"
            )
        for keyword in fields(HeadSelectionConfigMixin):  # the type and the rules each keyword's metadata states
            _check_rules(keyword, _KEYWORD_TYPES[keyword.name], getattr(self, keyword.name))
        self.encoder_tasks = _task_list(self.encoder_tasks, "encoder_tasks")
        self.decoder_tasks = _task_list(self.decoder_tasks, "decoder_tasks")
        if self.head_selection_components is None:
            self.head_selection_components = ["encoder_self", "decoder_self"]
        self.head_selection_components = list(self.head_selection_components)
        if len(set(self.head_selection_components)) != len(self.head_selection_components):
            raise ValueError(f"head_selection_components lists a component twice: {self.head_selection_components}")
        for side in SIDES:
            default = getattr(self, f"default_{side}_task")
            if default is not None and default not in self.tasks(side):
                raise ValueError(
                    f"default_{side}_task={default!r} is not one of the {side} tasks {self.tasks(side)}"
                )
            self._set_total_heads(side)

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """The stock `from_dict` (what `from_pretrained` calls), then [`check_head_selection`]: the stock method
        sets the keywords passed to `from_pretrained` on the created config after its `__post_init__` checked it."""
        loaded = super().from_dict(config_dict, **kwargs)
        (loaded[0] if isinstance(loaded, tuple) else loaded).check_head_selection()  # (config, unused kwargs)
        return loaded

    def _set_total_heads(self, side: str) -> None:
        """Fill in the default `H'` of a side and check the rules of the strategy."""
        name = f"total_{side}_attention_heads"
        heads = self.heads(side)
        components = [c for c in self.head_selection_components if c.startswith(side)]
        strategy = self.head_selection_strategy
        if getattr(self, name) is None:
            if strategy == "task_specific" and components:
                setattr(self, name, self.num_tasks(components[0]) * heads)
            else:
                setattr(self, name, 2 * heads)
        total = getattr(self, name)
        if total < heads:
            raise ValueError(f"{name}={total} must be >= {side}_attention_heads={heads} (H' >= H)")
        if strategy == "group" and total % heads:
            raise ValueError(
                f"the group strategy needs {name}={total} to be a multiple of {side}_attention_heads={heads}"
            )
        task_counts = {component: self.num_tasks(component) for component in components}
        if strategy == "task_specific" and len(set(task_counts.values())) > 1:
            raise ValueError(
                f"the task_specific strategy needs {name} = tasks x heads for every selecting {side} component, and "
                f"they have different task counts {task_counts} (cross_attention_task_key="
                f"{self.cross_attention_task_key!r}): no {name} serves them all; select in fewer components"
            )
        for component in components:
            if strategy == "task_specific" and total != self.num_tasks(component) * heads:
                raise ValueError(
                    f"the task_specific strategy needs {name} = tasks x heads = {self.num_tasks(component)} x "
                    f"{heads} = {self.num_tasks(component) * heads} for {component}, got {total}"
                )

    # ---- facts derived from the keywords ----------------------------------------------------------------------

    def tasks(self, side: str) -> list[str]:
        """The task names of `side` (`"encoder"` or `"decoder"`)."""
        return self.encoder_tasks if side == "encoder" else self.decoder_tasks

    def heads(self, side: str) -> int:
        """`H`, the heads one task uses on `side`."""
        return self.encoder_attention_heads if side == "encoder" else self.decoder_attention_heads

    def total_heads(self, side: str) -> int:
        """`H'`, the candidate heads of a selecting attention layer on `side`."""
        return getattr(self, f"total_{side}_attention_heads")

    def component_sides(self, component: str) -> tuple[str, ...]:
        """The sides whose task ids key a component: one side, or both for a cross-attention keyed by pair."""
        if component == "encoder_self":
            return ("encoder",)
        if component == "decoder_cross" and self.cross_attention_task_key == "encoder":
            return ("encoder",)
        if component == "decoder_cross" and self.cross_attention_task_key == "pair":
            return ("encoder", "decoder")
        return ("decoder",)

    def adapter_sides(self, side: str) -> tuple[str, ...]:
        """The sides whose task ids key the adapters of `side`'s layers: both for a direction, else `side`."""
        return SIDES if self.task_adapter_key == "direction" else (side,)

    def num_tasks(self, component: str) -> int:
        """The number of tasks (rows of `phi`) of a component."""
        return self.num_keys(self.component_sides(component))

    def num_keys(self, sides: Sequence[str]) -> int:
        """The number of routing keys made of the tasks of `sides` (a pair key counts every combination)."""
        keys = 1
        for side in sides:  # a loop, not math.prod over a generator: torch.compile traces this in the adapters
            keys *= len(self.tasks(side))
        return keys

    def routing_key(self, sides: Sequence[str], task_ids: dict):
        """The routing key (the row of `phi`, or the adapter) of the task ids `{side: id}` for something keyed by
        `sides`: that side's id, or for both sides the pair key `encoder * len(decoder_tasks) + decoder` (pairs
        numbered encoder-major; [`num_keys`] counts them). Ids may be ints or tensors of ids."""
        if len(sides) == 1:
            return task_ids[sides[0]]
        return task_ids["encoder"] * len(self.decoder_tasks) + task_ids["decoder"]

    def num_layers(self, component: str) -> int:
        return self.encoder_layers if component == "encoder_self" else self.decoder_layers

    def task_id(self, side: str, name: str) -> int:
        """The index of task `name` on `side`; a `ValueError` lists the known tasks."""
        tasks = self.tasks(side)
        if name not in tasks:
            raise ValueError(f"unknown {side} task {name!r}; the {side} tasks are {tasks}")
        return tasks.index(name)


def _task_list(tasks: Sequence[str] | None, name: str) -> list[str]:
    tasks = [UNKEYED_TASK] if tasks is None else list(tasks)
    if not tasks or not all(isinstance(t, str) and t for t in tasks):
        raise ValueError(f"{name} must be a non-empty list of non-empty strings, got {tasks}")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"{name} lists a task twice: {tasks}")
    if POOLED in tasks:
        raise ValueError(f"{name} names a task {POOLED!r}: the name of the corpus-level score in results and cards "
                         "is reserved; rename the task (its language or domain)")
    return tasks


def _check_rules(keyword: Field, annotation, value) -> None:
    """Check `value` against `keyword`'s type (`annotation`, resolved) and the rules in its metadata: `None` only
    where the type allows it (nothing else to check then), lists of strings as lists or tuples, numbers finite
    (`bool` is not a number here), then `choices`, `minimum` and `above`."""
    name, rules = keyword.name, keyword.metadata
    allowed = typing.get_args(annotation) or (annotation,)
    if value is None:
        if type(None) not in allowed:
            raise ValueError(f"{name} must not be None (its default is {keyword.default!r})")
        return
    if not any(_has_type(value, kind) for kind in allowed):
        expected = " or ".join(_TYPE_NAMES.get(typing.get_origin(kind) or kind) for kind in allowed
                               if kind is not type(None) and not (kind is int and float in allowed))
        raise ValueError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if rules["choices"] is not None and item not in rules["choices"]:
            raise ValueError(f"{name} must be one of {list(rules['choices'])}, got {item!r}")
    if rules["minimum"] is not None and value < rules["minimum"]:
        raise ValueError(f"{name} must be >= {rules['minimum']}, got {value}")
    if rules["above"] is not None and value <= rules["above"]:
        raise ValueError(f"{name} must be > {rules['above']}, got {value}")


def _has_type(value, kind) -> bool:
    """Whether `value` is of `kind`, one member of a keyword's type: `str`, `int`, `float` or `list[str]`."""
    if typing.get_origin(kind) is list:  # a tuple too: the config stores it as a list
        return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)
    if kind in (int, float):
        return isinstance(value, kind) and not isinstance(value, bool)
    return isinstance(value, kind)


_TYPE_NAMES = {list: "a list of strings", str: "a string", int: "an integer", float: "a number"}


@dataclass(frozen=True)
class KeywordSpec:
    """One head-selection config keyword, as its field in [`HeadSelectionConfigMixin`] defines it: what a command
    line, a model card or a converter needs to know about it."""

    name: str
    type: object  # the resolved annotation, e.g. `list[str] | None`
    default: object
    help: str
    role: str  # one of KEYWORD_ROLES
    choices: tuple[str, ...] | None  # allowed values (of every item, for a list)


def head_selection_keywords(*roles: str) -> tuple[KeywordSpec, ...]:
    """The head-selection config keywords in definition order (only those of `roles`, if given)."""
    unknown = set(roles) - set(KEYWORD_ROLES)
    if unknown:
        raise ValueError(f"unknown keyword roles {sorted(unknown)}: expected some of {list(KEYWORD_ROLES)}")
    return tuple(
        KeywordSpec(f.name, _KEYWORD_TYPES[f.name], f.default, f.metadata["help"], f.metadata["role"],
                    f.metadata["choices"])
        for f in fields(HeadSelectionConfigMixin)
        if not roles or f.metadata["role"] in roles
    )


# The resolved type of every keyword (the annotations are strings under `from __future__ import annotations`).
_KEYWORD_TYPES = typing.get_type_hints(HeadSelectionConfigMixin)

# Every config keyword the head-selection mixin adds on top of the stock config, in definition order.
HEAD_SELECTION_CONFIG_KEYS = tuple(keyword.name for keyword in fields(HeadSelectionConfigMixin))

#: Said once by a training forward without labels while `head_selection_kl_weight` is set (`{weight}`): the model
#: computes the KL from the labels (their tokens weigh the tasks), so a loss computed outside it leaves the KL out.
KL_WITHOUT_LABELS = (
    "head_selection_kl_weight is {weight} but this training forward got no labels, from which the head-selection KL "
    "is computed and added to the loss: a loss computed outside the model (a Trainer's label smoother or "
    "compute_loss_func, EncoderDecoderModel's loss) leaves the KL out. Pass the labels to the model (with a Trainer: "
    "label_smoothing_factor 0, or headsel_recipes' HeadSelSeq2SeqTrainer, which smooths and adds the KL)"
)


#: The config keywords a trained checkpoint keeps: its task lists and structure ([`head_selection_keywords`] roles),
#: but for the adapter keywords ([`ADAPTER_KEYWORDS`]): a checkpoint without adapters may gain fresh ones on loading
#: (up-projections at zero: the outputs unchanged).
TRAINED_STRUCTURE_KEYWORDS = tuple(
    keyword.name for keyword in head_selection_keywords("tasks", "structure")
    if not keyword.name.startswith("task_adapter_")
)

#: The adapter keywords: a checkpoint with trained adapters keeps them (see [`refuse_saved_structure_change`]).
ADAPTER_KEYWORDS = tuple(
    keyword.name for keyword in head_selection_keywords("structure") if keyword.name.startswith("task_adapter_")
)


#: The `from_pretrained` keywords that say where its config file is (the stock `get_config_dict` reads them).
CONFIG_FILE_KEYWORDS = ("cache_dir", "force_download", "proxies", "token", "local_files_only", "revision", "subfolder",
                        "_commit_hash")


def is_head_selection_config(config) -> bool:
    """Whether `config` (a config or a config class) is a head-selection one, made by this copy of the module or by
    another: remote code (`trust_remote_code=True`) imports this module once for `AutoConfig` and once for the model
    classes, as two modules, so an `isinstance` check against one copy's [`HeadSelectionConfigMixin`] misses the
    other's configs."""
    kind = config if isinstance(config, type) else type(config)
    return any(base.__name__ == HeadSelectionConfigMixin.__name__ for base in kind.__mro__)


def refuse_structure_change(config: HeadSelectionConfigMixin, requested: dict,
                             given_as: str = "from_pretrained(..., {name}={value!r})") -> None:
    """`ValueError` if a keyword in `requested` (as `from_pretrained` got it: `given_as`) differs from the saved
    `config`: it would reorder the trained tasks' rows or change what the heads mean, and the loaded weights still
    fit."""
    if not requested:
        return
    wanted = type(config).from_dict({**config.to_dict(), **requested})  # normalised and checked like the saved one
    for name in requested:
        if getattr(wanted, name) != getattr(config, name):
            raise ValueError(
                f"{given_as.format(name=name, value=requested[name])} would change the trained model's tasks or "
                f"structure: it was saved with {name}={getattr(config, name)!r}, and its weights are laid out for "
                "that. Only the runtime keywords (temperature, noise scale, KL weight, default tasks) may change on "
                "loading, and fresh adapters be added; for another layout build a new model from a config (or "
                "upcycle a stock one: from_stock)"
            )


def refuse_saved_structure_change(config_class, checkpoint, requested: dict, kwargs: dict,
                                   given_as: str = "from_pretrained(..., {name}={value!r})") -> None:
    """[`refuse_structure_change`] against the checkpoint's saved config (when that is a head-selection config of
    `config_class`), before loading: for a config given to `from_pretrained` with `config=`
    (`AutoModel...from_pretrained(path, decoder_tasks=...)` sets the keywords on the config it builds and passes that
    on), and for adapter keywords, which may add fresh adapters to a checkpoint without them but not change or drop
    trained ones (the stock loading would leave those weights out with a mere report). Skipped when the saved config
    cannot be read here (the loading then says why)."""
    try:
        saved, _ = config_class.get_config_dict(
            checkpoint, **{name: kwargs[name] for name in CONFIG_FILE_KEYWORDS if name in kwargs})
    except OSError:
        return
    if saved.get("model_type") != config_class.model_type:  # a stock checkpoint: upcycled, nothing trained
        return
    saved = config_class.from_dict(saved)
    if not saved.task_adapter_dim:  # fresh adapters may be added
        requested = {name: value for name, value in requested.items() if name not in ADAPTER_KEYWORDS}
    refuse_structure_change(saved, requested, given_as=given_as)


__all__ = [
    "ADAPTER_KEYWORDS",
    "COMPONENTS",
    "HEAD_SELECTION_CONFIG_KEYS",
    "KL_WITHOUT_LABELS",
    "KEYWORD_ROLES",
    "KeywordSpec",
    "head_selection_keywords",
    "is_head_selection_config",
    "SIDES",
    "STRATEGIES",
    "TRAINED_STRUCTURE_KEYWORDS",
    "UNKEYED_TASK",
    "attention_path",
    "HeadSelectionConfigMixin",
    "component_side",
    "refuse_saved_structure_change",
    "refuse_structure_change",
]
