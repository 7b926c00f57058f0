# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The recipes' command lines, one module per command (console scripts in `setup.cfg`; `training/*.py` run them too).

Each module's `main(argv=None)` parses `argv` (default `sys.argv[1:]`) and returns what the command made (a
`RecipeResult`, the experiment's results, ...), for callers in Python. The console scripts call `console`
([`console_script`]) instead, because an entry-point wrapper passes `main()`'s return value to `sys.exit`; they are
the [`command`]s below, which import a command's module only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

# The packages of this distribution: a module missing from any other is a dependency not installed.
OWN_PACKAGES = ("headsel_recipes", "offline_corpus", "hf_headsel")


def console_script(main: Callable[[list[str] | None], object]) -> Callable[[], None]:
    """The console-script form of a command's `main`: the same run, returning `None`. (An entry-point wrapper calls
    `sys.exit(console())`; a returned dict or list would be printed to stderr and turned into exit status 1.)"""

    def console() -> None:
        main(None)

    console.__doc__ = f"Run `{main.__module__}.main` on the command line's arguments (console script)."
    return console


def command(module: str, name: str) -> Callable[[], None]:
    """The console script `name`: imports `module` when run and calls its `console`. A package it needs that is
    not installed (the library installs without the commands' packages) ends the command with the line that installs
    them, not a traceback."""

    def console() -> None:
        try:
            importlib.import_module(module).console()
        except ModuleNotFoundError as error:
            if not error.name or error.name.split(".")[0] in OWN_PACKAGES:
                raise
            raise SystemExit(f"{name}: the package {error.name!r} is not installed; the headsel-* commands need the "
                             "training extras: pip install 'hf-headsel[train]'") from error

    console.__doc__ = f"`{name}`: run `{module}.console` (console script)."
    return console


# Named as the scripts (a name of a module here would be replaced by the module once imported).
headsel_train = command("headsel_recipes.cli.train", "headsel-train")
headsel_experiment = command("headsel_recipes.cli.experiment", "headsel-experiment")
headsel_demo = command("headsel_recipes.cli.demo", "headsel-demo")
headsel_build_corpus = command("offline_corpus.cli", "headsel-build-corpus")
headsel_push_to_hub = command("headsel_recipes.cli.push_to_hub", "headsel-push-to-hub")
headsel_export_tasks = command("headsel_recipes.cli.export_task_models", "headsel-export-tasks")
