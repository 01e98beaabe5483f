"""``ragev serve`` (start the service) and ``ragev serve keys ...`` (manage API keys).

Imported whenever ``ragev`` builds its parser, so it imports nothing heavy: uvicorn and
FastAPI load only when the server starts, by name (``app:app_from_environment``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from pytest_ragev.server import lock
from pytest_ragev.server.catalog import Catalog
from pytest_ragev.server.keys import CAPABILITIES, ROLES, new_key
from pytest_ragev.server.settings import ADMIN_KEY_FILE, ENV, ServerSettings
from pytest_ragev.server.store import Store, StoreError, storage_problem


class CommandAdder(Protocol):
    """What :func:`configure` uses of ``pytest_ragev.cli.CommandAdder``."""

    def add(self, name: str, *, help: str, handler: Callable[[argparse.Namespace], int],
            description: str | None = None) -> argparse.ArgumentParser: ...

    def run_group(
        self, handler: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser: ...


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be 1 or more")
    return number


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0-65535)")
    return number


def _workspace(args: argparse.Namespace) -> Path:
    return Path(args.workspace).resolve()


def _store(args: argparse.Namespace) -> Store:
    workspace = _workspace(args)
    try:
        return Store(workspace / "ragev-server.db")
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    except (OSError, sqlite3.Error) as exc:
        problem = storage_problem(exc, workspace) or f"cannot use it ({exc})"
        raise ConfigError(f"--workspace {args.workspace}: {problem}; or pass another "
                          "--workspace") from None


def _serve(args: argparse.Namespace) -> int:
    configs = Path(args.configs).resolve()
    if not configs.is_dir():
        raise ConfigError(f"--configs {args.configs}: not a folder; point it at the folder "
                          "with the ragev.toml files the server may run")
    if not os.access(configs, os.W_OK):
        raise ConfigError(f"--configs {args.configs}: not writable; the server writes each "
                          "task's config beside the config it copies (and removes it after)")
    workspace = _workspace(args)
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--workspace {args.workspace}: cannot create it "
                          f"({exc.strerror or exc}); pass a folder you may write to") from None
    settings = ServerSettings(
        workspace=workspace, configs=configs, host=args.host, port=args.port,
        max_parallel=args.max_parallel, resume=not args.no_resume,
        cache_dir=Path(args.cache_dir).resolve() if args.cache_dir else None,
    )
    url = f"http://{args.host}:{args.port}/"
    lock.hold(settings.lock_file, url=url)  # one server per workspace: refused here, in one line
    # Fail here, in one line, on a database of another version or a read-only workspace.
    store = _store(args)
    try:
        made = _first_key(store, settings)
    finally:
        store.close()
    try:
        import uvicorn
    except ImportError:
        raise ConfigError(f"ragev serve needs the server extra: {install_command('server')}"
                          ) from None
    for line in startup_lines(settings, Catalog(configs, exclude=(workspace, settings.cache)),
                              url=url, key_file=made):
        print(f"ragev serve: {line}", file=sys.stderr)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    os.environ[ENV] = settings.to_env()
    uvicorn.run(
        "pytest_ragev.server.app:app_from_environment", factory=True, host=args.host,
        port=args.port, access_log=False, log_level="warning", lifespan="on",
        timeout_graceful_shutdown=5,
    )
    return 0


def _first_key(store: Store, settings: ServerSettings) -> Path | None:
    """A workspace without any key gets an admin key that may run evaluations, written to
    ``admin.key`` (readable only by its owner), so the service is usable at once; the
    file's path, else ``None`` (the workspace has keys)."""
    if store.keys():
        return None
    text, stored = new_key(role="admin", capability="run_evaluations", tenant=1,
                           name="made at first start")
    path = settings.workspace / ADMIN_KEY_FILE
    partial = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(partial, path)
    except OSError as exc:
        raise ConfigError(f"--workspace {settings.workspace}: cannot write {path.name} "
                          f"({exc.strerror or exc}); make the folder writable") from None
    store.add_key(stored)
    return path


def startup_lines(settings: ServerSettings, catalog: Catalog, *, url: str,
                  key_file: Path | None = None) -> list[str]:
    """What the server says when it starts: where it answers, its folders, the configs it
    loaded and, one line each, those with an error."""
    lines = [f"{url} (the dashboard; the API under {url}api/v1/)",
             f"workspace {settings.workspace}, shared cache {settings.cache}"]
    if key_file is not None:
        lines.append(f"the workspace had no API key: an admin key that may run evaluations "
                     f"is in {key_file} (readable only by you); send it as X-API-Key")
    entries = catalog.configs_list()
    good = [entry.name for entry in entries if entry.error is None]
    bad = [entry for entry in entries if entry.error is not None]
    if entries[0].builtin:
        lines.append(f"no config in {settings.configs}: a request runs the built-in config "
                     "'default' (the built-in sample with the built-in pipeline)")
    else:
        shown = ", ".join(good[:30]) + (f" and {len(good) - 30} more" if len(good) > 30 else "")
        lines.append(f"{len(good)} config{'' if len(good) == 1 else 's'} loaded from "
                     f"{settings.configs}" + (f": {shown}" if good else ""))
    lines += [f"config {entry.name} has an error: {entry.error}" for entry in bad]
    return lines


def _create(args: argparse.Namespace) -> int:
    text, stored = new_key(role=args.role, capability=args.capability, tenant=args.tenant,
                           name=args.name or "")
    store = _store(args)
    try:
        store.add_key(stored)
    finally:
        store.close()
    print(text)
    print(f"ragev: key {stored.key_id} ({args.role}, {args.capability}, tenant {args.tenant}) "
          "stored as a salted hash; this is the only time the key is shown", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        rows = store.keys()
    finally:
        store.close()
    print(f"{'id':<13} {'role':<7} {'capability':<16} {'tenant':>6}  {'created':<29} state")
    for row in rows:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "active"
        print(f"{row['id']:<13} {row['role']:<7} {row['capability']:<16} {row['tenant']:>6}  "
              f"{row['created_at']:<29} {state}{'  ' + row['name'] if row['name'] else ''}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        done = store.revoke_key(args.key_id)
    finally:
        store.close()
    if not done:
        raise ConfigError(f"no active key {args.key_id!r}; `ragev serve keys list` shows them")
    print(f"revoked {args.key_id}")
    return 0


def configure(commands: CommandAdder) -> None:
    """The ``ragev serve`` options and the ``ragev serve keys`` commands."""
    serve = commands.run_group(_serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on "
                                                            "(default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
    serve.add_argument("--workspace", default="ragev-workspace", metavar="DIR",
                       help="the server's state: database and task folders "
                            "(default ./ragev-workspace)")
    serve.add_argument("--configs", default=".", metavar="DIR",
                       help="folder of the ragev.toml files the server may run (default .)")
    serve.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="the pytest cache every task shares: knowledge bases and answers "
                            "(default <workspace>/cache; your project's .pytest_cache shares "
                            "them with your command-line runs)")
    serve.add_argument("--max-parallel", type=_positive, default=1, metavar="N",
                       help="evaluations at once; the rest wait in order (default 1)")
    serve.add_argument("--no-resume", action="store_true",
                       help="at start-up, mark tasks that were running as failed instead of "
                            "resuming them from the answer cache")

    keys = commands.add("keys", help="create, list and revoke API keys",
                        handler=lambda args: _usage(keys))
    verbs = keys.add_subparsers(title="commands", metavar="COMMAND")
    create = verbs.add_parser("create", help="create a key and print it once",
                              description="Create an API key and print it once.")
    create.set_defaults(_ragev_handler=_create)
    create.add_argument("--role", choices=ROLES, required=True)
    create.add_argument("--capability", choices=CAPABILITIES, default="none",
                        help="run_evaluations or full_access lets an admin key create and "
                             "cancel evaluations (default none)")
    create.add_argument("--tenant", type=_positive, default=1,
                        help="the tenant whose tasks the key sees (default 1)")
    create.add_argument("--name", help="a note shown by `keys list`")
    listing = verbs.add_parser("list", help="list the keys (never their secrets)",
                               description="List the keys (never their secrets).")
    listing.set_defaults(_ragev_handler=_list)
    revoke = verbs.add_parser("revoke", help="revoke a key by its id",
                              description="Revoke a key by its id.")
    revoke.set_defaults(_ragev_handler=_revoke)
    revoke.add_argument("key_id", metavar="KEY_ID")
    for parser in (create, listing, revoke):
        parser.add_argument("--workspace", default="ragev-workspace", metavar="DIR",
                            help="the server's workspace (default ./ragev-workspace)")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
