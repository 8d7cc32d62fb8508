"""``memsys-bench``: one console command for what the harness's ``python -m`` modules do.

``memsys-bench COMMAND [ARGS ...]`` hands ``ARGS`` unchanged to the module that
:data:`~benchmarks.console.commands.COMMANDS` names: a Hydra app runs as ``python -m`` runs it
(so ``-m`` sweeps, ``--cfg job`` and Hydra's flags behave the same), any other module gets
``main(ARGS)``. Only a Hydra app's ``--help`` is answered here, with a one-screen usage
(:mod:`benchmarks.console.hydra_usage`); every ``python -m`` form keeps working.
"""

from __future__ import annotations

import difflib
import importlib
import runpy
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from benchmarks.console.commands import COMMANDS, Command, Group

PROG = "memsys-bench"
HELP = ("-h", "--help")
#: Where an unknown or missing subcommand exits, like argparse's usage errors.
USAGE_ERROR = 2
NOT_INSTALLED = "(not installed: pip install -e .)"
#: Longer subcommand names (a group's with its words) get their help on the next line.
WIDEST_NAME = 24


def main(argv: Sequence[str] | None = None) -> int:
    """The console entry point; returns the exit status (a ``SystemExit`` inside a subcommand
    becomes its status, so callers in process get a number either way)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        print(f"{PROG} {package_version()}")
        return 0
    try:
        return dispatch(PROG, COMMANDS, args)
    except SystemExit as exit_:
        return exit_status(exit_.code)


def dispatch(prog: str, table: dict[str, Command | Group], args: list[str]) -> int:
    """Find ``args[0]`` in ``table`` and run it with the rest (a group looks one word further)."""
    if not args or args[0] in HELP:
        print(listing(prog, table), file=sys.stdout if args else sys.stderr)
        return 0 if args else USAGE_ERROR
    name, rest = args[0], args[1:]
    entry = table.get(name)
    if entry is None:
        close = difflib.get_close_matches(name, table, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        print(f"{prog}: unknown command {name!r}{hint}; {prog} --help lists them", file=sys.stderr)
        return USAGE_ERROR
    if isinstance(entry, Group):
        return dispatch(f"{prog} {name}", entry.commands, rest)
    return run_command(f"{prog} {name}", entry, rest)


def run_command(prog: str, command: Command, args: list[str]) -> int:
    """Run one subcommand with ``args``."""
    module, _, function = command.target.partition(":")
    if command.config is not None:
        if any(arg in HELP for arg in args):
            from benchmarks.console.hydra_usage import usage

            print(usage(prog.removeprefix(f"{PROG} "), module, command.config))
            return 0
        run_as_main(module, args)
        return 0
    try:
        target = getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        print(f"{prog}: not in this checkout ({module} is missing)", file=sys.stderr)
        return USAGE_ERROR
    return exit_status(target([*command.prefix, *args]))


def run_as_main(module: str, args: list[str]) -> None:
    """Run ``module`` as ``python -m module ARGS`` would: as ``__main__``, with ``sys.argv``
    holding its file and ``args`` (restored after)."""
    saved = sys.argv
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved


def listing(prog: str, table: dict[str, Command | Group]) -> str:
    """The help of ``prog``: one line per subcommand (a group's with its words)."""
    rows = []
    for name, entry in table.items():
        if isinstance(entry, Group):
            rows.append((f"{name} {'|'.join(entry.commands)}", entry.help))
        else:
            rows.append((name, entry.help))
    width = max(len(name) for name, _ in rows if len(name) <= WIDEST_NAME) + 2
    lines = [
        f"usage: {prog} {'[--version] ' if prog == PROG else ''}COMMAND [ARGS ...]",
        "",
        "commands:",
    ]
    for name, text in rows:
        if len(name) > WIDEST_NAME:
            lines += [f"  {name}", f"  {'':<{width}}{text}"]
        else:
            lines.append(f"  {name:<{width}}{text}")
    lines += ["", f"{prog} COMMAND --help: that command's arguments (docs/cli.md)"]
    return "\n".join(lines)


def package_version() -> str:
    """The installed distribution's version (``python -m benchmarks.console`` also runs from a
    checkout that was never installed, which has none)."""
    try:
        return version(PROG)
    except PackageNotFoundError:
        return NOT_INSTALLED


def exit_status(code: object) -> int:
    """A ``SystemExit`` code as a process status, as the interpreter reads it: None is 0, a
    number is itself, anything else is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
