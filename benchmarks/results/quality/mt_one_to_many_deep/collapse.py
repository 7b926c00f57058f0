# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""What saved MT runs learned to do with their inputs (session 39): for every run under a folder, the teacher-forced
loss on the first test pairs of three directions in evaluation mode and in training mode (dropout on, the mean of a
few draws), and how much the states of one sentence differ between its positions at the encoder's output and the
decoder's output (evaluation mode, relative to their norm: 0 means one vector at every position).

    python benchmarks/results/quality/mt_one_to_many_deep/collapse.py outputs/benchmark/mt_one_to_many_deep
    python benchmarks/results/quality/mt_one_to_many_deep/collapse.py --layers RUN       # one run, decoder sublayers
    python benchmarks/results/quality/mt_one_to_many_deep/collapse.py --checkpoints RUN  # one run, every checkpoint

The directions are en-de, en-fr, en-ru in a one-to-many run (de-en, fr-en, ru-en in a many-to-one run), the
spread is on the first of them; the pairs are tagged as the run's recipe tagged them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoConfig

from hf_headsel.families import family_of  # (importing hf_headsel registers its Auto classes)
from hf_headsel.model_card import language_token
from headsel_recipes.tokenizer import load_tokenizer, task_tag

DIRECTIONS = ("de", "fr", "ru")
PAIRS, DRAWS = 32, 4
FRESH = Path("fresh")  # `load`'s stand-in for an untrained model


def batch(run: Path, tokenizer, model, lang: str, pairs: int | None = PAIRS) -> dict[str, torch.Tensor]:
    """The first `pairs` (`None`: all) test pairs of the run's test files with `lang` for `*` (en-`lang` in
    one-to-many, `lang`-en in many-to-one), tagged as the run was (target-language token, source tag), as model
    keywords."""
    run_config = json.loads((run / "run_config.json").read_text())
    path = Path(run_config["test_file"][0].replace("*", lang))
    source_lang, target_lang = path.name.split("_")[1:3]
    prefix = f"{language_token(target_lang)} " if run_config.get("target_lang_token") else ""
    prefix += f"{task_tag('lang', source_lang)} " if run_config.get("encoder_task_tag") else ""
    rows = [json.loads(line) for line in open(path)][:pairs]
    encoded = tokenizer([prefix + row["source"] for row in rows], text_target=[row["target"] for row in rows],
                        return_tensors="pt", padding=True)
    labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)
    inputs = dict(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], labels=labels)
    if hasattr(model.config, "decoder_tasks"):
        config = model.config
        inputs["encoder_task_ids"] = torch.full((len(rows),), config.encoder_tasks.index(source_lang))
        inputs["decoder_task_ids"] = torch.full((len(rows),), config.decoder_tasks.index(target_lang))
    return inputs


@torch.no_grad()
def losses(model, inputs) -> tuple[float, float]:
    """The loss in evaluation mode and the mean over `DRAWS` dropout draws in training mode."""
    model.eval()
    evaluated = model(**inputs).loss.item()
    model.train()
    trained = []
    for draw in range(DRAWS):
        torch.manual_seed(draw)
        trained.append(model(**inputs).loss.item())
    model.eval()
    return evaluated, sum(trained) / DRAWS


def load(run: Path, weights: Path | None = None):
    """The model of a run (or of one of its checkpoints, `weights`; `FRESH`: freshly initialised from the run's
    config with seed 1) and the run's tokenizer (a speech model's is its family's)."""
    config = AutoConfig.from_pretrained(run)
    auto_class = family_of(config.model_type).auto_class  # Marian's, or Speech2Text's (a speech run)
    if weights == FRESH:
        torch.manual_seed(1)
        model = auto_class.from_config(config)
    else:
        model = auto_class.from_pretrained(weights or run)
    model.config.output_hidden_states = True
    return model, load_tokenizer(str(run), is_speech(model))


def is_speech(model) -> bool:
    return model.main_input_name == "input_features"


@torch.no_grad()
def output_spreads(model, inputs) -> tuple[float, float]:
    """The relative spread ([`spread`] over the mean norm) of the encoder's and the decoder's last states."""
    model.eval()
    outputs = model(**inputs)
    source, target = inputs["attention_mask"].bool(), inputs["labels"] != -100
    return tuple(spread(states, mask) / states[mask].norm(dim=-1).mean().item() for states, mask in (
        (outputs.encoder_last_hidden_state, source), (outputs.decoder_hidden_states[-1], target)))


def row(run: Path, weights: Path | None = None) -> str:
    """One table row's cells: the losses of every direction, then the encoder's and the decoder's output spread."""
    model, tokenizer = load(run, weights)
    batches = {lang: batch(run, tokenizer, model, lang) for lang in DIRECTIONS}
    cells = [losses(model, batches[lang]) for lang in DIRECTIONS]
    encoder, decoder = output_spreads(model, batches[DIRECTIONS[0]])
    return " | ".join(f"{e:.2f} / {t:.2f}" for e, t in cells) + f" | {encoder:.3f} | {decoder:.3f} |"


def header(first: str) -> str:
    return (f"| {first} | " + " | ".join(f"{lang}: eval / train mode" for lang in DIRECTIONS)
            + " | encoder output spread | decoder output spread |\n|---|" + "---:|" * (len(DIRECTIONS) + 2))


def gap_table(runs: Path) -> None:
    print(header("run"))
    for run in sorted(path.parent for path in runs.glob("**/seed*/config.json")):
        has_weights = any(run.glob("model*.safetensors"))  # runs unpacked from a GPU call's tarball have none
        print(f"| {run.relative_to(runs)} | " + (row(run) if has_weights else "no saved weights |"))


def checkpoint_table(run: Path) -> None:
    print(header("checkpoint"))
    print("| initialisation (seed 1) | " + row(run, FRESH))
    for checkpoint in sorted(run.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1])):
        print(f"| {checkpoint.name} | " + row(run, checkpoint))


def spread(hidden: torch.Tensor, mask: torch.Tensor) -> float:
    """How much a sentence's states differ: the norm of their standard deviation over the sentence's positions
    (those `mask` keeps), averaged over sentences (0: every position holds the same vector)."""
    return sum(hidden[row][mask[row]].std(0).norm().item() for row in range(len(hidden))) / len(hidden)


@torch.no_grad()
def layer_table(run: Path, lang: str = "de") -> None:
    """Each decoder layer's sublayer outputs in evaluation mode: their spread over positions and mean norm."""
    model, tokenizer = load(run)
    inputs = batch(run, tokenizer, model, lang)
    mask = inputs["labels"] != -100
    records = {}
    for index, layer in enumerate(model.get_decoder().layers):
        for name in ("self_attn", "encoder_attn", "fc2", "final_layer_norm", "task_adapter"):
            if hasattr(layer, name):
                getattr(layer, name).register_forward_hook(
                    lambda module, args, output, key=(index, name): records.__setitem__(
                        key, output[0] if isinstance(output, tuple) else output))
    model.eval()
    loss = model(**inputs).loss.item()
    print(f"{run}: evaluation mode, loss {loss:.2f} on {PAIRS} test pairs ({lang} for `*`)\n")
    print("| layer | sublayer | spread over positions | mean norm |\n|---:|---|---:|---:|")
    for (index, name), hidden in records.items():
        print(f"| {index} | {name} | {spread(hidden, mask):.3f} | {hidden[mask].norm(dim=-1).mean().item():.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="the experiment's runs folder, or one run with --layers")
    parser.add_argument("--layers", action="store_true", help="one run: its decoder sublayers' spread")
    parser.add_argument("--checkpoints", action="store_true", help="one run: the table's row for every checkpoint")
    arguments = parser.parse_args()
    table = layer_table if arguments.layers else checkpoint_table if arguments.checkpoints else gap_table
    table(arguments.runs)
