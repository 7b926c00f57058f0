"""Parameters of an experiment file's systems at the file's model size, counted on the models its recipe builds (on
the meta device: nothing is trained, no weights are allocated, the training data is read only for its tasks).
`param_counts.py` counts trained runs; this sizes systems before any run, e.g. the GPU files' adapters with as many
parameters as Group.

In use: an adapter set counts as in use when a task pair of the training data routes to it (keyed by direction:
the pair; keyed by task: one side's task), as `param_counts.py` counts after training. Systems that start from
another system's run (`init_from`) are left out: their model is their source's plus what their own flags add,
counted in the system trained with the model. Each system of adapters alone is given with the bottleneck that holds
as many parameters in use as Group (`--match` another system), from two counts: an adapter's parameters grow
linearly with its bottleneck. The vocabulary is counted at the `vocab_size` flag; a tokenizer trained on little
data may hold fewer pieces, which changes the totals but not the differences between systems. (`param_counts.py`
counts saved tensors, so Marian's `final_logits_bias` buffer too: one number per vocabulary piece more.)

    python benchmarks/results/quality/baselines/param_match.py training/experiments/benchmark_gpu/mt_one_to_many.yaml
"""

import argparse
import json
import tempfile
from pathlib import Path

import datasets
import torch
from headsel_recipes.arguments import parse_arguments
from headsel_recipes.data import example_tasks, load_splits
from headsel_recipes.experiment.runner import plan_runs, run_flags
from headsel_recipes.experiment.spec import load_experiment
from headsel_recipes.modeling import build_model
from headsel_recipes.recipe import resolve_tasks
from headsel_recipes.tasks import TASKS

from hf_headsel.adapters import TaskAdapters

#: Flags that only a GPU parses (the transformers argument check refuses them on a CPU); they do not change the model.
DEVICE_ONLY_FLAGS = ("bf16", "fp16", "use_cpu", "dataloader_num_workers")


class VocabularyOnly:
    """Stands in for the tokenizer the recipe would train: the model reads its size and special ids only."""

    pad_token_id, eos_token_id, bos_token_id = 1, 2, 0

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def used_adapter_sets(config, pairs: set[tuple[str, str]], side: str) -> int:
    """How many of the adapter sets of `side`'s layers the training data's `(encoder task, decoder task)` pairs use:
    their routing keys (`config.routing_key`: the pair, or one side's task)."""
    sides = config.adapter_sides(side)
    return len({config.routing_key(sides, {"encoder": config.encoder_tasks.index(enc),
                                           "decoder": config.decoder_tasks.index(dec)}) for enc, dec in pairs})


def parameter_counts(model, pairs: set[tuple[str, str]]) -> tuple[int, int]:
    """The model's trained parameters (not the fixed sinusoidal position tables), and those in use (the adapter sets
    no task pair of the training data uses left out)."""
    total = sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
    unused = 0
    for name, module in model.named_modules():
        if isinstance(module, TaskAdapters):
            side = "decoder" if ".decoder." in f".{name}." else "encoder"
            per_set = sum(parameter[0].numel() for parameter in module.parameters())
            unused += per_set * (module.num_tasks - used_adapter_sets(model.config, pairs, side))
    return total, total - unused


def recipe_arguments(flags: dict, folder: Path):
    """The recipe's four argument objects for `flags`, parsed as the runner's `run_config.json` is."""
    config = folder / "run_config.json"
    config.write_text(json.dumps({k: v for k, v in flags.items() if k not in DEVICE_ONLY_FLAGS}))
    return parse_arguments([str(config)])


def count_systems(experiment) -> tuple[tuple, dict[str, tuple[int, int, int | None]]]:
    """`((encoder tasks, decoder tasks, task pairs), {system: (parameters, in use, adapter bottleneck)})` for the
    first seed's run of every system trained from scratch (the bottleneck of adapters alone, else `None`); an
    adapter system is counted at bottleneck `b + 1` too
    (under `"<name> @ b+1"`): its parameters grow linearly with `b`."""
    task, seed = TASKS[experiment.recipe], experiment.seeds[0]
    counts, tasks = {}, None
    with tempfile.TemporaryDirectory() as folder:
        for run in [run for run in plan_runs(experiment) if run.seed == seed and run.system.init_from is None]:
            flags = run_flags(experiment, run)
            # adapters alone (not head selection plus adapters) are what a matching bottleneck is sought for
            dim = None if flags.get("head_selection_strategy") else flags.get("task_adapter_dim")
            for name, bottleneck in [(run.system.name, dim)] + ([(f"{run.system.name} @ b+1", dim + 1)] if dim else []):
                model_args, head_args, data_args, _ = recipe_arguments(
                    {**flags, "task_adapter_dim": bottleneck} if bottleneck else flags, Path(folder))
                if tasks is None:  # every system of a file reads the same training data
                    raw = load_splits(task, data_args, ["train"], head_args.task_type or "lang", model_args.cache_dir)
                    encoder_tasks, decoder_tasks, task_type = resolve_tasks(task, head_args, raw, None, None)
                    columns = raw["train"].select_columns(["source_lang", "target_lang", "domain"]).to_dict()
                    pairs = {example_tasks(task, task_type, *row)[:2] for row in zip(*columns.values())}
                    tasks = encoder_tasks, decoder_tasks, pairs
                head_args.task_type = head_args.task_type or "lang"
                with torch.device("meta"):
                    model = build_model(task, model_args, head_args, VocabularyOnly(model_args.vocab_size), *tasks[:2])
                counts[name] = (*parameter_counts(model, tasks[2]), bottleneck)
    return tasks, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the experiment YAML file")
    parser.add_argument("--match", default="Group",
                        help="the system whose parameters in use the adapters' matching bottleneck equals (Group)")
    options = parser.parse_args()
    datasets.disable_progress_bars()
    experiment = load_experiment(options.experiment)
    tasks, counts = count_systems(experiment)
    shared, target = counts["Shared"][1], counts[options.match][1]
    print(f"{experiment.name}: encoder tasks {tasks[0]}, decoder tasks {tasks[1]}, {len(tasks[2])} task pairs in "
          f"the training data\n\n| system | parameters | in use | in use over Shared |\n|---|---:|---:|---:|")
    for name, (total, in_use, bottleneck) in counts.items():
        if name.endswith(" @ b+1"):
            continue
        print(f"| {name} | {total:,} | {in_use:,} | {in_use / shared:.3f}x |")
        if not bottleneck:
            continue
        per_unit = counts[f"{name} @ b+1"][1] - in_use
        matching = bottleneck + round((target - in_use) / per_unit)
        if matching != bottleneck:
            in_use_then = in_use + (matching - bottleneck) * per_unit
            print(f"| {name}, bottleneck {matching} (as many in use as {options.match}) | | {in_use_then:,} | "
                  f"{in_use_then / shared:.3f}x |")


if __name__ == "__main__":
    main()
