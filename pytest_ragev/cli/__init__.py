"""The ``ragev`` command: ``ragev <group> <command> ...``.

Commands come in groups (``ragev dataset validate``, ``ragev dataset stats``, ...). A part
of the project adds its own group with :func:`register_group`::

    def configure(commands: CommandAdder) -> None:
        hello = commands.add("hello", help="greet someone", handler=_hello)
        hello.add_argument("name")

    register_group("demo", help="a demo group", configure=configure)

or, to keep ``ragev`` fast, by naming the configure function lazily
(``configure="my_package.cli:configure"``) as :data:`BUILTIN_GROUPS` does.
A handler receives the parsed ``argparse.Namespace`` and returns the exit code. Any
:class:`~pytest_ragev.core.errors.RagevError` it raises becomes one line on stderr,
``ragev: error: <message>``, and exit code 2 — never a traceback.

Only the group a command line names is configured (its module imported): ``ragev --help``
lists the groups from their names and help texts alone, and ``ragev dataset ...`` never
imports the report or server modules.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.version import __version__

#: A command's implementation: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]


class CommandAdder:
    """Handed to a group's ``configure`` function to add the group's commands.

    ``subparsers`` may be given, or made from ``group_parser`` on the first :meth:`add`:
    a group that is a command of its own (``ragev init DATASET``) and adds no sub-command
    then has no sub-command slot that would take its positional arguments.
    """

    def __init__(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser] | None = None,
        group_parser: argparse.ArgumentParser | None = None,
    ) -> None:
        if subparsers is None and group_parser is None:
            raise ValueError("CommandAdder needs subparsers or the group's parser")
        self._subparsers = subparsers
        self._group_parser = group_parser

    def add(
        self, name: str, *, help: str, handler: Handler, description: str | None = None
    ) -> argparse.ArgumentParser:
        """Add ``ragev <group> <name>``; returns its parser for ``add_argument`` calls."""
        if self._subparsers is None:
            assert self._group_parser is not None
            self._subparsers = self._group_parser.add_subparsers(
                title="commands", metavar="COMMAND")
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


def selected_group(argv: Sequence[str]) -> str | None:
    """The group a command line names: its first word that is not an option.

    The top-level options (``-h``, ``--version``) take no value, so the first other word
    is the group (or a typo, which argparse then reports).
    """
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``ragev`` parser: every registered group, with the commands of the group
    ``argv`` selects (with ``argv=None``, of every group)."""
    parser = argparse.ArgumentParser(
        prog="ragev", description="Tools of pytest-ragev: scaffold a project, inspect and "
        "prepare RAG datasets, show, compare and render saved reports, serve the "
        "evaluation API."
    )
    parser.add_argument("--version", action="version", version=f"pytest-ragev {__version__}")
    groups = parser.add_subparsers(title="command groups", metavar="GROUP")
    wanted = None if argv is None else selected_group(argv)
    for group in _GROUPS.values():
        group_parser = groups.add_parser(group.name, help=group.help, description=group.help)
        group_parser.set_defaults(_ragev_group_parser=group_parser)
        if argv is None or group.name == wanted:
            # Configuring a group imports its module: only the one that will run.
            group.resolve()(CommandAdder(group_parser=group_parser))
    parser.set_defaults(_ragev_group_parser=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ragev`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
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
        # The gate's and the baseline's messages carry the plugin's "ragev: " prefix.
        _error(str(exc).removeprefix("ragev: "))
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
    CommandGroup("init", "write a ragev.toml and a conftest.py for a dataset folder",
                 "pytest_ragev.cli.init:configure"),
    CommandGroup("dataset", "inspect, validate, sample and convert datasets",
                 "pytest_ragev.cli.dataset:configure"),
    CommandGroup("report", "show, compare (gate) and render saved JSON reports and baselines",
                 "pytest_ragev.cli.report:configure"),
    CommandGroup("cache", "merge the answer caches of a sharded run's jobs into one",
                 "pytest_ragev.cli.cache:configure"),
    CommandGroup("serve", "run the evaluation API and dashboard (needs pytest-ragev[server])",
                 "pytest_ragev.server.cli:configure"),
)
for _group in BUILTIN_GROUPS:
    register_group(_group.name, help=_group.help, configure=_group.configure)
