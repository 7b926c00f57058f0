"""The docstring examples of the library (the `>>>` lines of `hf_headsel`'s modules) run and print what they show.

Run with `doctest`; the Markdown fences around them, which the Hugging Face docs render as code blocks, are not
part of any expected output.
"""

from __future__ import annotations

import copy
import doctest
import importlib
import pkgutil
import re

import pytest

import hf_headsel

FENCE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$", re.MULTILINE)


class FencedDocTestParser(doctest.DocTestParser):
    """A doctest parser that reads a Markdown fence line as the end of an example's expected output."""

    def parse(self, string: str, name: str = "<string>"):
        return super().parse(FENCE.sub("", string), name)


def docstring_examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(parser=FencedDocTestParser())
    examples = []
    for module in pkgutil.iter_modules(hf_headsel.__path__):
        found = finder.find(importlib.import_module(f"hf_headsel.{module.name}"))
        examples += [test for test in found if test.examples]
    return sorted(examples, key=lambda test: test.name)


EXAMPLES = docstring_examples()


def test_the_public_classes_have_examples():
    names = {test.name.rsplit(".", 1)[-1] for test in EXAMPLES}
    assert {"HeadSelMarianConfig", "HeadSelMarianMTModel", "HeadSelSpeech2TextForConditionalGeneration"} <= names


def test_fence_ends_expected_output():
    test = FencedDocTestParser().get_doctest(">>> 1 + 1\n2\n```\n", {}, "fenced", None, 0)
    assert [example.want for example in test.examples] == ["2\n"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda test: test.name.removeprefix("hf_headsel."))
def test_docstring_example(example):
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(copy.copy(example), out=report.append)
    assert result.failed == 0, "".join(report)
