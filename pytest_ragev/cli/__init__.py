"""The ``ragev`` command: ``ragev <group> <command> ...``.

Commands come in groups (``ragev dataset validate``, ``ragev dataset stats``, ...). A part
of the project adds its own group with :func:`register_group`::

    def configure(commands: CommandAdder) -> None:
        show = commands.add("show", help="print a report", handler=_show)
        show.add_argument("path")

    register_group("report", help="inspect reports", configure=configure)

or, to keep ``ragev --help`` fast, by naming the configure function lazily
(``configure="pytest_ragev.report._cli:configure"``) in :data:`BUILTIN_GROUPS`.
A handler receives the parsed ``argparse.Namespace`` and returns the exit code. Any
:class:`~pytest_ragev.core.errors.RagevError` it raises becomes one line on stderr,
``ragev: error: <message>``, and exit code 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_ragev.core.errors import RagevError

#: A command's implementation: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]


class CommandAdder:
    """Handed to a group's ``configure`` function to add the group's commands."""

    def __init__(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
        group_parser: argparse.ArgumentParser | None = None,
    ) -> None:
        self._subparsers = subparsers
        self._group_parser = group_parser

    def add(
        self, name: str, *, help: str, handler: Handler, description: str | None = None
    ) -> argparse.ArgumentParser:
        """Add ``ragev <group> <name>``; returns its parser for ``add_argument`` calls."""
        parser = self._subparsers.add_parser(
            name, help=help, description=description or help[:1].upper() + help[1:] + "."
        )
        parser.set_defaults(_ragev_handler=handler)
        return parser

    def run_group(self, handler: Handler) -> argparse.ArgumentParser:
        """Make ``ragev <group>`` itself a command (``ragev serve --port 8000``) beside its
        sub-commands; returns the group's parser for its options."""
        if self._group_parser is None:
            raise RuntimeError("run_group needs the group's parser")
        self._group_parser.set_defaults(_ragev_handler=handler)
        return self._group_parser


#: ``configure`` may be the function itself or a lazy ``"module:function"`` reference.
Configure = Callable[[CommandAdder], None] | str


@dataclass(frozen=True)
class CommandGroup:
    """One ``ragev <name> ...`` group."""

    name: str
    help: str
    configure: Configure

    def resolve(self) -> Callable[[CommandAdder], None]:
        """The configure function (importing its module if it was given by name)."""
        if callable(self.configure):
            return self.configure
        module_name, _, attribute = self.configure.partition(":")
        function: Callable[[CommandAdder], None] = getattr(
            importlib.import_module(module_name), attribute
        )
        return function


_GROUPS: dict[str, CommandGroup] = {}


def register_group(name: str, *, help: str, configure: Configure) -> None:
    """Add (or replace) the command group ``ragev <name>``."""
    _GROUPS[name] = CommandGroup(name=name, help=help, configure=configure)


def build_parser() -> argparse.ArgumentParser:
    """The full ``ragev`` parser with every registered group."""
    parser = argparse.ArgumentParser(
        prog="ragev", description="Tools of pytest-ragev: inspect and prepare RAG datasets, "
        "serve the evaluation API."
    )
    groups = parser.add_subparsers(title="command groups", metavar="GROUP")
    for group in _GROUPS.values():
        group_parser = groups.add_parser(group.name, help=group.help, description=group.help)
        group_parser.set_defaults(_ragev_group_parser=group_parser)
        commands = group_parser.add_subparsers(title="commands", metavar="COMMAND")
        group.resolve()(CommandAdder(commands, group_parser))
    parser.set_defaults(_ragev_group_parser=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ragev`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        # argparse exits 2 on a usage error (after printing it) and 0 for --help.
        return exit_.code if isinstance(exit_.code, int) else 2
    handler: Handler | None = getattr(args, "_ragev_handler", None)
    if handler is None:
        group_parser: argparse.ArgumentParser = args._ragev_group_parser
        group_parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except RagevError as exc:
        _error(str(exc))
        return 2
    except OSError as exc:
        # The commands turn the file errors they expect into RagevErrors; this is the net
        # under them (a disk that fails mid-read): one line, never a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        _error("interrupted")
        return 130


def _error(message: str) -> None:
    print(f"ragev: error: {message}", file=sys.stderr)


def warn(message: str) -> None:
    """``ragev: warning: <message>`` on stderr."""
    print(f"ragev: warning: {message}", file=sys.stderr)


#: The groups ``ragev`` ships with; parts of the project add theirs here or at import time.
BUILTIN_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup("dataset", "inspect, validate, sample and convert datasets",
                 "pytest_ragev.cli.dataset:configure"),
    CommandGroup("serve", "run the evaluation API and dashboard (needs pytest-ragev[server])",
                 "pytest_ragev.server.cli:configure"),
)
for _group in BUILTIN_GROUPS:
    register_group(_group.name, help=_group.help, configure=_group.configure)
