# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The recipes' command lines, one module per command (console scripts in `setup.cfg`; `training/*.py` run them too).

Each module's `main(argv=None)` parses `argv` (default `sys.argv[1:]`) and returns what the command made (a
`RecipeResult`, the experiment's results, ...), for callers in Python. The console scripts call `console`
([`console_script`]) instead, because an entry-point wrapper passes `main()`'s return value to `sys.exit`.
"""

from __future__ import annotations

from collections.abc import Callable


def console_script(main: Callable[[list[str] | None], object]) -> Callable[[], None]:
    """The console-script form of a command's `main`: the same run, returning `None`. (An entry-point wrapper calls
    `sys.exit(console())`; a returned dict or list would be printed to stderr and turned into exit status 1.)"""

    def console() -> None:
        main(None)

    console.__doc__ = f"Run `{main.__module__}.main` on the command line's arguments (console script)."
    return console
