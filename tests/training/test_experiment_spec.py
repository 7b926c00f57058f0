# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The experiment file (`headsel_recipes.experiment.spec`): the rules a file must follow, sweeps, and the shipped
experiment files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import transformers.training_args
import yaml

from headsel_recipes.cli.experiment import main as run_experiment_command
from headsel_recipes.experiment.runner import plan_runs, run_flags
from headsel_recipes.experiment.spec import load_experiment, parse_experiment


@pytest.mark.parametrize(
    "change, rule",
    [
        ({"tables": ["table_7"]}, "unknown table layout"),
        ({"systems": [{"name": "A", "init_from": "B"}]}, "init_from 'B' is not a system"),
        ({"systems": [{"name": "A", "init_from": "B"}, {"name": "B", "init_from": "A"}]}, "cycle"),
        ({"systems": [{"name": "Group (H'=8)"}, {"name": "group h 8"}]}, "share the folder"),
        ({"tables": ["avg_high_low"]}, "groups.high"),
        ({"tables": ["components"]}, "no system has"),
        ({"seeds": []}, "seeds"),
        ({"seeds": [1, 2, 1]}, "`seeds` must be a non-empty list of distinct integers"),  # a seed trained twice
        ({"budget": {"seed": 3}}, "sets output_dir, seed and data_seed"),
        ({"flags": {"data_seed": 3}}, r"`flags` sets \['data_seed'\]"),  # the runner sets it per run, over this
        # a typo in `split` would read no results file: every run retrained, no scores
        ({"split": "test"}, "`split` must be 'predict' .* or 'eval'"),
        # one cell shows one system: the other's scores would be left out of the table
        ({"systems": [{"name": "A", "labels": {"strategy": "group", "components": "encoder"}},
                      {"name": "B", "labels": {"strategy": "group", "components": "encoder"}}],
          "tables": ["components"]}, r"systems 'A' and 'B' both label the components table's cell"),
        ({"systems": [{"name": "A", "flags": {"model_name_or_path": "x"}}]}, "init_from"),
        # a typo, or a value of the wrong shape, is an error naming the rule, not a default or a traceback
        ({"tables": [{"layout": "per_task", "vaule": "low"}]}, r"the per_task table: unknown keys \['vaule'\]"),
        ({"tables": [{"layout": "sweep", "plot": "no"}]}, "`plot` must be true or false"),
        ({"groups": {"high": "en-de"}}, r"`groups.high` must be a list of group names"),
        ({"groups": {"high": None}}, r"`groups.high` must be a list of group names"),
        ({"groups": ["en-de"]}, r"`groups` must be a mapping"),
        ({"systems": {"name": "A"}}, r"`systems` must be a list"),
        ({"systems": ["A"]}, "every system is a mapping with a `name`"),
        ({"flags": ["use_cpu"]}, r"`flags` must be a mapping"),
        ({"systems": [{"name": "A", "flags": ["use_cpu"]}]}, r"`systems\[A\].flags` must be a mapping"),
        ({"systems": [{"name": "A", "parts": ["tedx", "covost"]}]}, r"`systems\[A\].parts` must be a mapping"),
        ({"systems": [{"name": "A", "parts": {"p": {"seed": 7}}}]}, r"system 'A', part 'p', sets \['seed'\]"),
        # parts named alike as folders: the second's runs were skipped as finished, reporting the first's scores
        ({"systems": [{"name": "A", "parts": {"en-de": {}, "en_de": {}}}]},
         r"system 'A': parts 'en-de' and 'en_de' would share the folder"),
        ({"systems": [{"name": "A", "sweep": {"label": "s", "values": [7, 8], "flags": ["seed"]}}]},
         r"system 'A''s sweep sets \['seed'\]"),
        ({"systems": [{"name": "A", "sweep": {"label": "H'", "values": [8], "flags": "total_heads"}}]},
         "the sweep's `flags` must be a non-empty list of flag names"),
        ({"systems": [{"name": "A", "zero_shot": "false"}]}, "`zero_shot` must be true or false"),
        ({"metric": "belu"}, r"`metric` must be a metric the recipes score, one of \['bleu', 'wer'\]"),
        # a run starts from its source's run of the same part: both systems have the same parts, or none
        ({"systems": [{"name": "J"}, {"name": "A", "init_from": "J", "parts": {"tedx": {}}}]}, "the same parts"),
        ({"systems": [{"name": "J", "parts": {"tedx": {}}}, {"name": "A", "init_from": "J"}]}, "the same parts"),
        ({"seedz": [1, 2]}, r"unknown experiment keys \['seedz'\]; the keys are \['budget', "),
        ({"systems": [{"name": "A", "labelz": {}}]}, r"system 'A': unknown keys \['labelz'\]; the keys are"),
        ({"systems": [{"name": "?!"}]}, r"system name '\?!' has no letter or digit to name its folder"),
        ({"systems": [{"name": "A", "init_from": 3}]}, "system 'A': `init_from` names a system, got 3"),
        ({"systems": [{"name": "A", "sweep": [8]}]},
         r"system 'A': a sweep is \{label: \.\.\., values: \[\.\.\.\], flags: \[\.\.\.\]\}, got \[8\]"),
        ({"systems": [{"name": "A", "sweep": {"label": "H'", "values": [], "flags": ["total_heads"]}}]},
         "system 'A': the sweep has no `values`"),
        ({"tables": [{"layout": "per_task", "value": "median"}]},
         r"table value must be one of \['avg', 'avg_t', 'avg_z', 'high', 'low'\] or 'task:<group>', got 'median'"),
        ({"tables": [{"layout": "pivot", "rows": "strategy"}]},
         r"the pivot table needs `rows` and `columns` \(system labels\)"),
    ],
)
def test_invalid_experiments_name_the_rule(change, rule, tmp_path):
    values = {"recipe": "mt", "output_dir": str(tmp_path), "systems": [{"name": "A"}], **change}
    with pytest.raises(ValueError, match=rule):
        parse_experiment(values)


@pytest.mark.parametrize("key", ["recipe", "systems", "output_dir"])
def test_an_experiment_without_a_required_key_names_it(key, tmp_path):
    values = {"recipe": "mt", "output_dir": str(tmp_path), "systems": [{"name": "A"}]}
    del values[key]
    with pytest.raises(ValueError, match=f"an experiment needs `{key}`"):
        parse_experiment(values)
    if key == "output_dir":  # the command line's --output_dir stands in for the file's
        assert parse_experiment(values, output_dir=tmp_path).output_dir == tmp_path


def test_an_experiment_file_that_is_no_mapping_is_refused(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- recipe: mt\n- systems: []\n")
    with pytest.raises(ValueError, match=f"{re.escape(str(path))}: an experiment file is a YAML mapping"):
        load_experiment(path)


def test_sweep_expands_into_labelled_systems(tmp_path):
    experiment = parse_experiment({
        "recipe": "asr", "output_dir": str(tmp_path), "systems": [{
            "name": "Group", "labels": {"strategy": "group"}, "flags": {"head_selection_strategy": "group"},
            "sweep": {"label": "H'", "values": [4, 8],
                      "flags": ["total_encoder_attention_heads", "total_decoder_attention_heads"]}}],
        "tables": ["sweep"]})
    assert [s.name for s in experiment.systems] == ["Group (H'=4)", "Group (H'=8)"]
    assert experiment.systems[1].flags == {"head_selection_strategy": "group", "total_encoder_attention_heads": 8,
                                           "total_decoder_attention_heads": 8}
    assert experiment.systems[1].labels == {"strategy": "group", "H'": 8}


def test_a_swept_system_keeps_its_parts_and_source_and_the_swept_value_wins(tmp_path):
    """Each system of a sweep trains the sweep's parts from its `init_from` source's run of the same seed and part, and
    the swept flags take the sweep's value, also over a value the system's own flags give."""
    experiment = parse_experiment({
        "recipe": "st", "output_dir": str(tmp_path), "seeds": [1],
        "systems": [{"name": "Joint", "parts": {"tedx": {}, "covost": {}}},
                    {"name": "Group", "init_from": "Joint", "parts": {"tedx": {}, "covost": {}},
                     "flags": {"head_selection_strategy": "group", "total_encoder_attention_heads": 2},
                     "sweep": {"label": "H'", "values": [4, 8], "flags": ["total_encoder_attention_heads"]}}]})
    flags = {(run.system.name, run.part): run_flags(experiment, run) for run in plan_runs(experiment)
             if run.system.name != "Joint"}
    assert list(flags) == [("Group (H'=4)", "tedx"), ("Group (H'=4)", "covost"),
                           ("Group (H'=8)", "tedx"), ("Group (H'=8)", "covost")]
    assert [run["total_encoder_attention_heads"] for run in flags.values()] == [4, 4, 8, 8]
    assert flags["Group (H'=8)", "covost"]["model_name_or_path"] == str(tmp_path / "runs/joint/seed1/covost")


# training/README.md: `seeds` defaults to `[42]`.
def test_seeds_default_to_42(tmp_path):
    experiment = parse_experiment({"recipe": "mt", "output_dir": str(tmp_path), "systems": [{"name": "A"}]})
    assert [run.output_dir for run in plan_runs(experiment)] == [tmp_path / "runs/a/seed42"]


EXPERIMENTS_DIR = Path(__file__).resolve().parents[2] / "training" / "experiments"


@pytest.mark.parametrize("path", sorted(EXPERIMENTS_DIR.glob("*/*.yaml")),
                         ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_shipped_experiments_parse_and_their_run_flags_are_recipe_flags(path, tmp_path, capsys, monkeypatch):
    if path.parent.name == "benchmark_gpu":  # bf16 files: check their flags here, where no GPU says bf16 works
        monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    assert run_experiment_command([str(path), "--dry_run", "--output_dir", str(tmp_path)]) is None  # parses every run
    listed = capsys.readouterr().out.splitlines()
    experiment = load_experiment(path, tmp_path)
    assert len(listed) == len(plan_runs(experiment)) >= 4


RECORDED_EXPERIMENTS = sorted((EXPERIMENTS_DIR.parents[1] / "benchmarks" / "results").glob("**/*.yaml"))


@pytest.mark.parametrize("path", RECORDED_EXPERIMENTS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_recorded_experiments_still_load(path):
    """The experiment files beside the benchmark results (some `extends` others) are what reruns them."""
    assert load_experiment(path).systems


def write_yaml(path: Path, values: dict) -> Path:
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


BASE = {
    "name": "base", "recipe": "mt", "output_dir": "out/base", "seeds": [1, 2],
    "flags": {"vocab_size": 1000, "use_cpu": True, "config_overrides": "d_model=64"},
    "budget": {"max_steps": 1000, "learning_rate": 0.005},
    "groups": {"high": ["en-de"], "low": ["en-ar"]},
    "systems": [{"name": "Shared", "flags": {"shared_baseline": True}},
                {"name": "Adapters", "init_from": "Shared", "flags": {"task_adapter_dim": 32}},
                {"name": "Group", "flags": {"head_selection_strategy": "group"},
                 "sweep": {"label": "H'", "values": [8, 16], "flags": ["total_decoder_attention_heads"]}}],
    "tables": ["avg_high_low"],
}


def test_extends_merges_the_settings_and_picks_the_systems(tmp_path):
    write_yaml(tmp_path / "base.yaml", BASE)
    (tmp_path / "longer").mkdir()
    path = write_yaml(tmp_path / "longer" / "longer.yaml", {
        "extends": "../base.yaml", "output_dir": "out/longer",
        "flags": {"use_cpu": None, "bf16": True}, "budget": {"max_steps": 3000},
        "systems": ["Shared", "Adapters", "Group", {"name": "Subset", "flags": {"head_selection_strategy": "subset"}}],
    })
    base, longer = load_experiment(tmp_path / "base.yaml"), load_experiment(path)
    assert longer.flags == {"vocab_size": 1000, "config_overrides": "d_model=64", "bf16": True}
    assert longer.budget == {"max_steps": 3000, "learning_rate": 0.005}
    assert longer.output_dir == Path("out/longer")
    assert (longer.name, longer.seeds, longer.groups, longer.tables) == (base.name, base.seeds, base.groups, base.tables)
    assert longer.systems[:4] == base.systems  # taken whole: init_from, flags and the sweep's expansion
    assert [system.name for system in longer.systems] == ["Shared", "Adapters", "Group (H'=8)", "Group (H'=16)",
                                                          "Subset"]
    # A chain: a file may extend a file that extends another.
    chained = write_yaml(tmp_path / "chained.yaml", {"extends": "longer/longer.yaml", "seeds": [3],
                                                     "systems": ["Shared"]})
    experiment = load_experiment(chained)
    assert (experiment.seeds, experiment.budget["max_steps"], [s.name for s in experiment.systems]) == ([3], 3000,
                                                                                                      ["Shared"])


def test_extends_removes_a_key_only_for_null_and_merges_the_groups(tmp_path):
    """`false` and `0` are values, not removals (e.g. `use_cpu: false` in a GPU file); `groups` is merged key by key
    like `flags` and `budget`."""
    write_yaml(tmp_path / "base.yaml", BASE)
    path = write_yaml(tmp_path / "child.yaml", {
        "extends": "base.yaml", "output_dir": "out/child", "flags": {"use_cpu": False, "vocab_size": 0},
        "budget": {"learning_rate": None}, "groups": {"zero_shot": ["de-fr"]}})
    experiment = load_experiment(path)
    assert experiment.flags == {"vocab_size": 0, "use_cpu": False, "config_overrides": "d_model=64"}
    assert experiment.budget == {"max_steps": 1000}
    assert experiment.groups == {"high": ["en-de"], "low": ["en-ar"], "zero_shot": ["de-fr"]}


@pytest.mark.parametrize(
    "changes, rule",
    [
        ({"systems": ["Subset"]}, r"system 'Subset' is not a system of the file it extends; its systems are "
                                  r"\['Shared', 'Adapters', 'Group'\]"),
        ({"systems": ["Adapters"]}, "init_from 'Shared' is not a system"),
        ({"budget": {"max_steps": 3000}}, "keeps its output_dir 'out/base'"),
        ({"flags": {"use_cpu": None}}, "changes the flags of the file it extends"),
        ({"extends": "missing.yaml"}, r"`extends: missing.yaml` is not a file"),
        ({"extends": "child.yaml"}, "`extends` makes a cycle"),
        ({"flags": ["use_cpu"]}, "`flags` is merged key by key into the file it extends: it must be a mapping"),
        # what else decides a run folder's content: the recipe, the split, a system redefined in the base's folder
        ({"recipe": "st", "split": "eval"}, "it changes the recipe and split of the file it extends but keeps"),
        ({"systems": [{"name": "Shared", "flags": {"shared_baseline": True, "max_steps": 9000}}]},
         r"changes the systems \['Shared'\] of the file it extends but keeps its output_dir 'out/base'"),
        ({"systems": [{"name": "shared", "flags": {"head_selection_strategy": "group"}}]},  # the same folder
         r"changes the systems \['shared'\]"),
        ({"systems": ["Shared", {"name": "Adapters", "init_from": "Shared", "flags": {"task_adapter_dim": 32},
                                 "parts": {"a": {}}}]}, r"changes the systems \['Adapters'\]"),
    ],
)
def test_extends_names_the_rule_a_file_breaks(changes, rule, tmp_path):
    write_yaml(tmp_path / "base.yaml", BASE)
    path = write_yaml(tmp_path / "child.yaml", {"extends": "base.yaml", **changes})
    with pytest.raises(ValueError, match=rule):
        load_experiment(path)


def test_extends_may_keep_the_output_dir_when_the_runs_are_the_same(tmp_path):
    """Labels, seeds and tables do not change what a run folder holds; a system taken whole, or given again with the
    same flags, neither."""
    write_yaml(tmp_path / "base.yaml", BASE)
    path = write_yaml(tmp_path / "child.yaml", {
        "extends": "base.yaml", "seeds": [3], "tables": ["per_task"],
        "systems": ["Shared", {"name": "Adapters", "init_from": "Shared", "flags": {"task_adapter_dim": 32},
                               "labels": {"strategy": "adapters"}}]})
    assert load_experiment(path).output_dir == Path("out/base")
    # an empty mapping where the base sets nothing is no change either (it asked for an output_dir of its own)
    write_yaml(tmp_path / "bare.yaml", {key: value for key, value in BASE.items() if key != "budget"})
    path = write_yaml(tmp_path / "child.yaml", {"extends": "bare.yaml", "budget": {}, "groups": {}})
    assert load_experiment(path).output_dir == Path("out/base")


def test_the_command_prints_a_file_resolved(tmp_path, capsys):
    write_yaml(tmp_path / "base.yaml", BASE)
    output_dir = str(tmp_path / "out")
    path = write_yaml(tmp_path / "longer.yaml", {"extends": "base.yaml", "output_dir": output_dir,
                                                 "budget": {"max_steps": 3000}, "systems": ["Shared"]})
    assert run_experiment_command([str(path), "--resolved"]) is None
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved == {**BASE, "output_dir": output_dir, "budget": {"max_steps": 3000, "learning_rate": 0.005},
                        "systems": BASE["systems"][:1]}
    assert load_experiment(write_yaml(tmp_path / "copy.yaml", resolved)) == load_experiment(path)  # the same
    assert not (tmp_path / "out").exists()  # nothing trained or written
    # --output_dir is what the runs would use: the resolved file says so
    assert run_experiment_command([str(path), "--resolved", "--output_dir", str(tmp_path / "moved")]) is None
    assert yaml.safe_load(capsys.readouterr().out)["output_dir"] == str(tmp_path / "moved")


def test_extends_needs_the_file_it_is_read_from(tmp_path):
    with pytest.raises(ValueError, match="read the file with load_experiment"):
        parse_experiment({"extends": "base.yaml", **BASE})
