# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The recipes' flags (`headsel_recipes.arguments`): the head-selection flags derive from the config keywords."""

from __future__ import annotations

import dataclasses
import sys
import threading

import pytest

from headsel_recipes.arguments import HeadSelectionArguments, parse_arguments
from hf_headsel.configuration_head_selection import head_selection_keywords


def test_every_settable_config_keyword_is_a_flag_documented_by_the_keyword():
    flags = {f.name: f for f in dataclasses.fields(HeadSelectionArguments)}
    keywords = head_selection_keywords("tasks", "structure", "runtime")
    assert keywords and {"encoder_tasks", "head_selection_strategy", "head_selection_temperature"} <= set(flags)
    for keyword in keywords:
        flag = flags[keyword.name]
        assert flag.default is None  # unset: the checkpoint's or the package's value
        assert flag.metadata["help"].startswith(keyword.help)
        assert flag.metadata.get("choices") == (list(keyword.choices) if keyword.choices else None)
    assert not set(flags) & {k.name for k in head_selection_keywords("default")}  # not a training flag


def test_a_value_outside_the_keyword_choices_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        parse_arguments(["--output_dir", "out", "--head_selection_strategy", "grop"])
    assert "head_selection_strategy" in capsys.readouterr().err


def test_threads_parse_at_once(tmp_path):
    # experiment lanes in threads of one process: `HfArgumentParser` rewrites the dataclasses' field types while it
    # builds, and a parser built beside another read a half-rewritten one
    errors = []

    def parse_many():
        try:
            for _ in range(20):
                parse_arguments(["--output_dir", str(tmp_path)])
        except Exception as error:  # noqa: BLE001 - any error in a thread fails the test
            errors.append(repr(error))

    threads = [threading.Thread(target=parse_many) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the window is a few bytecodes wide
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
