"""Running the Python examples of a Markdown document (the README, a model card) as tests: the ```python blocks, as
written, one after another in one namespace."""

from __future__ import annotations

import re
import textwrap

FENCE = re.compile(r"^( *)```python\n(.*?)^\1```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[str]:
    """Every ```python block of a Markdown text, dedented (a block inside a list item is indented)."""
    return [textwrap.dedent(match.group(2)) for match in FENCE.finditer(text)]


def run_blocks(blocks: list[str], namespace: dict, source: str = "<markdown>") -> dict:
    """Execute `blocks` in order in `namespace` (which they extend) and return it."""
    for block in blocks:
        exec(compile(block, source, "exec"), namespace)
    return namespace
