"""Runs evaluation tasks: the plugin in a subprocess per task, at most ``max_parallel`` at once.

Each task gets a folder under ``<workspace>/tasks/<task id>/`` and runs there as

    python -m pytest -c pytest.ini --rootdir . -o cache_dir=<shared cache> \\
        --ragev-config <config> --ragev-report report.json --ragev-html report.html \\
        --ragev-samples records.jsonl

so a crashing pipeline takes down only its own process, and every engine feature
(answer cache, variants, gate, reports) is the one CI uses. The task's config is the
request's plan written as TOML beside the config whose pipeline it copies (relative
paths, ``conftest.py`` and ``module:callable`` pipelines then resolve as they do in
CI) and removed when the run ends; the folder keeps a copy with secrets hidden.

Every task shares one pytest cache (``ragev serve --cache-dir``): the knowledge base
and the answers one task built, the next task on the same config and data takes from
there, as a second command-line run does. The caches are safe between concurrent runs
(the KB is built under a file lock, the answers live in SQLite). A task restarted after
a crash asks the pipeline only for the answers the cache lacks.

Progress comes from the files the plugin writes (:mod:`.follow`). Cancel is the
plugin's SIGTERM path (status 3). Children run in their own session, so a server
killed with ``kill -9`` leaves them running; the next start adopts a live one, takes
the result of one that finished meanwhile, and restarts a dead one (or, with resume
off, marks it failed).

The runner outlives trouble with its storage: a database another process holds
locked, a full or read-only disk. Its writes are retried until they go through (one
log line per episode, never a traceback), a task that cannot start for a full or
read-only disk stays queued, and the queue moves on once the cause is gone.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

from pytest_ragev.core.io import atomic_write_text
from pytest_ragev.server.catalog import DEFAULT, Catalog, FieldError, Plan
from pytest_ragev.server.follow import (
    LOADING,
    Job,
    alive,
    error_from_log,
    final_fields,
    final_report,
    runs_in,
)
from pytest_ragev.server.schemas import request_json
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import Store, now_iso, storage_problem

log = logging.getLogger("ragev.server")

#: Seconds a cancelled run may take to write its report before it is killed.
CANCEL_GRACE = 30.0
#: The evaluations' niceness (their own children inherit it).
EVALUATION_NICENESS = 10
#: Seconds between attempts at a write the storage refused, and before a task that could
#: not start for a full or read-only disk is tried again.
RETRY_EVERY = 1.0
#: Environment variables of the server that must not reach the task's pytest.
_DROPPED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_AUTO_NUM_WORKERS")
#: Errors of the disk that go away when space returns or the folder is writable again.
#: The task waits in the queue, saying why, until the folder takes it again.
_PASSING_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                             errno.EPERM, errno.EMFILE, errno.ENFILE, errno.ENOMEM,
                             errno.EAGAIN, errno.EIO})


class Conflict(Exception):
    """The task cannot be cancelled: it has finished."""


class Runner:
    """The queue and the running evaluations; one scheduler thread, one watcher per task."""

    def __init__(self, settings: ServerSettings, store: Store, catalog: Catalog) -> None:
        self.settings = settings
        self.store = store
        self.catalog = catalog
        self._cond = threading.Condition()
        self._jobs: dict[str, Job] = {}
        self._watchers: list[threading.Thread] = []
        self._stopping = False
        self._not_before = 0.0  # no start before this (a full disk refused the last one)
        self._troubles: set[str] = set()  # the storage problems logged and not yet over
        self._scheduler = threading.Thread(target=self._schedule, name="ragev-scheduler",
                                           daemon=True)

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Recover what the last server left, then start taking tasks from the queue."""
        self._recover()
        self._scheduler.start()

    def stop(self, timeout: float = 20.0) -> None:
        """Stop taking tasks; end the running ones with SIGTERM and queue them again, so
        the next start resumes them from the answer cache."""
        with self._cond:
            self._stopping = True
            jobs = list(self._jobs.values())
            self._cond.notify_all()
        for job in jobs:
            job.stop()
        deadline = time.monotonic() + timeout
        for watcher in list(self._watchers):
            watcher.join(max(0.0, deadline - time.monotonic()))
        if self._scheduler.is_alive():
            self._scheduler.join(max(0.0, deadline - time.monotonic()))

    def wake(self) -> None:
        """A task was queued."""
        with self._cond:
            self._cond.notify_all()

    def running(self) -> int:
        """How many evaluations run now."""
        with self._cond:
            return len(self._jobs)

    def queue_position(self, task_id: str) -> int | None:
        """1 for the next task to start, ``None`` when ``task_id`` does not wait."""
        pending = self.store.pending_ids()
        return pending.index(task_id) + 1 if task_id in pending else None

    # ---------------------------------------------------------------- storage
    def _stored(self, what: str, write: Callable[[], Any], *, once: bool = False) -> bool:
        """Run the store call ``write``; when the storage refuses it (locked, full,
        read-only), log one line and try again every :data:`RETRY_EVERY` seconds until it
        goes through, or until the server stops (``False``). ``once``: one attempt."""
        while True:
            try:
                write()
            except (sqlite3.Error, OSError) as exc:
                self._trouble(what, exc, again=not once)
                if once:
                    return False
                with self._cond:
                    if self._stopping:
                        return False
                    self._cond.wait(RETRY_EVERY)
                continue
            if self._troubles:
                log.info("%s: the storage works again", what)
                self._troubles.clear()
            return True

    def _trouble(self, what: str, exc: BaseException, *, again: bool = True) -> None:
        """Log a storage problem once (one line, with the fix), not at every attempt."""
        problem = storage_problem(exc, self.store.path) or f"{type(exc).__name__}: {exc}"
        if problem not in self._troubles:
            self._troubles.add(problem)
            log.warning("%s: %s; %s", what, problem, "retrying" if again else
                        "trying again in a moment")

    def _row(self, task_id: str) -> dict[str, Any] | None:
        """A task row, read again until the storage answers (``None`` if the server stops
        first, or there is no such task)."""
        found: list[dict[str, Any] | None] = []
        self._stored(f"task {task_id}", lambda: found.append(self.store.task(task_id)))
        return found[0] if found else None

    def _update(self, task_id: str, fields: Mapping[str, Any], *, once: bool = False) -> bool:
        return self._stored(f"task {task_id}",
                            lambda: self.store.update_task(task_id, **fields), once=once)

    # --------------------------------------------------------------- recovery
    def _recover(self) -> None:
        for row in self.store.unfinished():
            if row["pid"] is None:
                continue  # still queued
            folder = self.settings.tasks_dir / row["id"]
            pid = int(row["pid"])
            running = alive(pid) and runs_in(pid, folder)
            # The task's config (secrets in clear) the last server wrote: the adopted run
            # removes it when it ends; every other path removes it now (a restart writes
            # it again).
            derived = self._task_config(row["id"])
            if running and not self.settings.resume:
                os.kill(pid, signal.SIGTERM)
            if derived is not None and (not running or not self.settings.resume):
                derived.unlink(missing_ok=True)
            finished = None if running else final_report(folder)
            if finished is not None:
                # It ended while no server watched: its result stands, nothing is rerun.
                log.info("task %s: its evaluation finished while the server was down",
                         row["id"])
                self._end(row, final_fields(finished, request_json(row)))
            elif not self.settings.resume:
                self._fail(row, "the server stopped while this task ran (resume is off)")
            elif running:
                log.info("task %s: adopting its running evaluation (pid %d)", row["id"], pid)
                self._watch(self._job(row, folder, pid, int(row["attempts"]), derived=derived))
            else:
                log.info("task %s: resuming from the answer cache", row["id"])
                self._update(row["id"], {"status": 0, "pid": None, "phase": None})

    def _task_config(self, task_id: str) -> Path | None:
        """The task config a server wrote for ``task_id`` (beside the config whose
        pipeline it copies, or in the task folder), if it is still there."""
        name = _task_config_name(task_id)
        inside = self.settings.tasks_dir / task_id / name
        if inside.is_file():
            return inside
        return next(iter(self.catalog.configs.rglob(name)), None)

    def _job(self, row: Mapping[str, Any], folder: Path, pid: int, attempt: int,
             **extra: Any) -> Job:
        return Job(row["id"], folder, pid, attempt, _shown_variant(row["variants"] or []),
                   request_json(row),
                   shown_config=shown_config(row, builtin=self._is_builtin(row)),
                   **extra)

    def _is_builtin(self, row: Mapping[str, Any]) -> bool:
        """Whether the task runs the built-in config (no file of that name exists)."""
        name = str(row["knowledge_base_id"])
        return name == DEFAULT and not (self.catalog.configs / f"{name}.toml").is_file()

    # --------------------------------------------------------------- queueing
    def _schedule(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                try:
                    started = self._start_some()
                except Exception as exc:  # never let the queue die; one line, no traceback
                    log.error("the scheduler: %s: %s; trying again", type(exc).__name__, exc)
                    self._not_before = time.monotonic() + RETRY_EVERY
                    started = 0
                if not started:
                    wait = max(self._not_before - time.monotonic(), 0.0)
                    self._cond.wait(timeout=min(wait, 1.0) if wait else 1.0)

    def _start_some(self) -> int:
        """Start queued tasks while there is room (the lock is held); how many started."""
        free = self.settings.max_parallel - len(self._jobs)
        if free <= 0 or time.monotonic() < self._not_before:
            return 0
        try:
            pending = self.store.pending_ids()[:free]
        except sqlite3.Error as exc:
            self._trouble("the queue", exc, again=False)
            self._not_before = time.monotonic() + RETRY_EVERY
            return 0
        started = 0
        for task_id in pending:
            if not self._start(task_id):
                break
            started += 1
        return started

    def _start(self, task_id: str) -> bool:
        """Start one queued task (the lock is held); ``False`` when the disk refused it,
        which leaves it queued and the queue waiting a moment."""
        row = self.store.task(task_id)
        if row is None or row["status"] != 0:
            return True
        try:
            plan = self.catalog.plan(
                dataset_id=row["dataset_id"], knowledge_base_id=row["knowledge_base_id"],
                embedding_id=row["embedding_id"], chat_id=row["chat_id"],
                rerank_id=row["rerank_id"], judge_id=row.get("judge_id"),
                config=row["config"],
                variants=row["variants"], limit=row["limit_n"], profile=row["profile"],
            )
        except FieldError as exc:
            self._fail(row, exc.message)
            return True
        except Exception as exc:  # a broken ragev-server.toml, an unreadable folder
            self._fail(row, f"could not prepare the task: {exc}")
            return True
        if plan.error is not None:
            self._fail(row, plan.error)
            return True
        folder = self.settings.tasks_dir / task_id
        attempt = int(row["attempts"]) + 1
        try:
            derived, process = self._launch(task_id, folder, plan, attempt)
        except OSError as exc:
            if exc.errno in _PASSING_ERRNOS:
                # A full or read-only disk: the task waits in the queue for the disk, and
                # its err_msg says why (GET, the pages).
                self._trouble(f"task {task_id} cannot start yet", exc, again=False)
                problem = storage_problem(exc, folder) or str(exc.strerror or exc)
                waiting = f"waiting to start: {problem}"
                if row["err_msg"] != waiting:
                    self._update(task_id, {"err_msg": waiting}, once=True)
                self._not_before = time.monotonic() + RETRY_EVERY
                return False
            self._fail(row, f"could not start the evaluation: {exc}")
            return True
        except TypeError as exc:  # a value TOML cannot hold, from a model table
            self._fail(row, f"could not write the task's config: {exc}")
            return True
        # Evaluations are batch work: when the CPU is short, the API's answers go first.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, process.pid, EVALUATION_NICENESS)
        started = {"status": 1, "pid": process.pid, "attempts": attempt, "err_msg": "",
                   "phase": dict(LOADING)}
        if not self._update(task_id, started):
            process.send_signal(signal.SIGTERM)  # the server stops: the task stays queued
            derived.unlink(missing_ok=True)
            return True
        log.info("task %s: started (attempt %d, pid %d)", task_id, attempt, process.pid)
        job = self._job(row, folder, process.pid, attempt, process=process, derived=derived)
        job.written(started)
        self._watch(job)
        return True

    def _launch(self, task_id: str, folder: Path, plan: Plan,
                attempt: int) -> tuple[Path, subprocess.Popen[bytes]]:
        """Write the task's files and start its evaluation; :class:`OSError` when the disk
        refuses (nothing of the task's config is left then)."""
        folder.mkdir(parents=True, exist_ok=True)
        for stale in ("report.json", "records.jsonl"):
            (folder / stale).unlink(missing_ok=True)
        atomic_write_text(folder / "pytest.ini", "[pytest]\n")
        write_task_config(folder / "config.toml", plan.redacted_document)
        derived = (plan.folder or folder) / _task_config_name(task_id)
        try:
            write_task_config(derived, plan.document)
        except (OSError, TypeError):
            derived.unlink(missing_ok=True)
            raise
        args = [
            sys.executable, "-m", "pytest", "-c", str(folder / "pytest.ini"),
            "--rootdir", str(folder),
            # One pytest cache for every task: the knowledge bases and answers of the
            # last task on the same config and data are this one's (lastfailed and
            # nodeids mean nothing across tasks: not written there).
            "-o", f"cache_dir={self.settings.cache}", "-p", "no:lfplugin", "-p", "no:nfplugin",
            "--ragev-config", str(derived),
            "--ragev-report", str(folder / "report.json"),
            "--ragev-html", str(folder / "report.html"),
            "--ragev-samples", str(folder / "records.jsonl"), "-q",
            # The plugin's own report and HTML then carry the API's task id.
            "--ragev-task-id", task_id,
        ]
        for variant in plan.variants:
            args += ["--ragev-variant", variant]
        if plan.limit is not None:
            args += ["--ragev-limit", str(plan.limit)]
        if plan.profile is not None:
            args += ["--ragev-profile", plan.profile]
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        try:
            with open(folder / f"pytest-{attempt}.log", "wb") as output:
                process = subprocess.Popen(
                    args, cwd=folder, stdout=output, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                )
        except OSError:
            derived.unlink(missing_ok=True)
            raise
        return derived, process

    def _watch(self, job: Job) -> None:
        self._jobs[job.task_id] = job
        watcher = threading.Thread(target=self._follow, args=(job,),
                                   name=f"ragev-watch-{job.task_id}", daemon=True)
        self._watchers = [w for w in self._watchers if w.is_alive()]
        self._watchers.append(watcher)
        watcher.start()

    # ---------------------------------------------------------------- cancel
    def cancel(self, task_id: str) -> None:
        """Stop a running task with SIGTERM, or drop a queued one; :class:`Conflict` when
        it has finished. A store that cannot be written raises (the API answers 503)."""
        with self._cond:
            job = self._jobs.get(task_id)
            if job is not None:
                self.store.update_task(task_id, cancel_requested=1)
                if job.cancel_at is None:
                    job.cancel_at = time.monotonic()
                    job.stop()
                return
            row = self.store.task(task_id)
            if row is None:
                raise KeyError(task_id)
            if row["status"] in (2, 3):
                raise Conflict(task_id)
            self.store.update_task(task_id, cancel_requested=1)
            self._fail(row, "cancelled before it started", retry=False)

    # -------------------------------------------------------------- watching
    def _follow(self, job: Job) -> None:
        try:
            while True:
                code = job.exit_code()
                self._progress(job)
                if code is not None:
                    break
                if job.cancel_at is not None and time.monotonic() - job.cancel_at > CANCEL_GRACE:
                    job.signal(signal.SIGKILL)
                time.sleep(self.settings.poll_interval)
            self._finish(job, code)
        except Exception as exc:  # keep the server up; one line, and the task says so
            log.error("task %s: following the evaluation failed: %s: %s", job.task_id,
                      type(exc).__name__, exc)
            row = self._row(job.task_id)
            if row is not None and row["status"] in (0, 1):
                self._fail(row, "the server lost track of this evaluation; see the server log")
        finally:
            if job.derived is not None:  # _finish removed it, unless it never ran
                job.derived.unlink(missing_ok=True)
            with self._cond:
                self._jobs.pop(job.task_id, None)
                self._cond.notify_all()

    def _progress(self, job: Job) -> None:
        changed = job.progress()
        # Progress is best effort: a refused write is tried again at the next look.
        if changed and self._update(job.task_id, changed, once=True):
            job.written(changed)

    def _finish(self, job: Job, code: int | None) -> None:
        self._progress(job)
        if job.derived is not None:
            job.derived.unlink(missing_ok=True)
        row = self._row(job.task_id)
        if row is None:
            return  # the server stops: the next start finds the result in the folder
        data = final_report(job.folder)
        with self._cond:
            stopping = self._stopping
        cancelled = bool(row["cancel_requested"])
        # Stopped by the server's own SIGTERM (a report of status 3, or none): queued again.
        if stopping and not cancelled and (data is None or data["task"]["status"] != 2):
            if self.settings.resume:
                log.info("task %s: stopped with the server; it resumes at the next start",
                         job.task_id)
                self._update(job.task_id, {"status": 0, "pid": None, "phase": None})
            else:
                self._fail(row, "the server shut down while this task ran (resume is off)")
            return
        if data is not None:
            fields = final_fields(data, job.request)
        else:
            fields = {"status": 3, "err_msg": error_from_log(job.folder, job.attempt, code),
                      "pid": None, "phase": None}
        if cancelled:
            fields["status"] = 3
            fields["err_msg"] = "cancelled: " + (fields.get("err_msg") or "stopped")
        fields["err_msg"] = self._readable(job, str(fields.get("err_msg") or ""))
        if self._end(row, fields):
            log.info("task %s: finished with status %d", job.task_id, fields["status"])

    def _readable(self, job: Job, message: str) -> str:
        """``message`` with the hidden task config named as the user knows it and no path
        of the server's configs folder."""
        if job.derived is not None and job.shown_config:
            message = message.replace(str(job.derived), job.shown_config)
        return message.replace(str(self.catalog.configs) + os.sep, "")

    def _fail(self, row: Mapping[str, Any], message: str, *, retry: bool = True) -> None:
        fields = {"status": 3, "err_msg": message, "pid": None, "phase": None}
        if retry:
            if self._end(row, fields):
                log.info("task %s: failed: %s", row["id"], message)
            return
        self.store.update_task(row["id"], **_ended(row, fields))
        log.info("task %s: failed: %s", row["id"], message)

    def _end(self, row: Mapping[str, Any], fields: dict[str, Any]) -> bool:
        """Write a task's final fields, retrying until the storage takes them (``False``
        when the server stopped first: the next start finds the result in the folder)."""
        return self._update(row["id"], _ended(row, fields))


def _ended(row: Mapping[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    return {**fields, "end_time": now_iso(),
            "duration": round(max(0, now_ms - int(row["created_ms"])) / 1000.0, 3)}


def write_task_config(path: Path, document: Mapping[str, Any]) -> None:
    """Write a task's config as TOML, atomically; the plugin's ``tomllib`` reads it back
    equal. :class:`TypeError` for a value TOML cannot hold (``None``, an object)."""
    atomic_write_text(path, tomli_w.dumps(document))


def _task_config_name(task_id: str) -> str:
    """The file name of a task's config (hidden: the catalog does not list it)."""
    return f".ragev-serve-{task_id}.toml"


#: The request's fields that name a model of ``ragev-server.toml``.
MODEL_FIELDS = ("embedding_id", "chat_id", "rerank_id", "judge_id")


def shown_config(row: Mapping[str, Any], *, builtin: bool = False) -> str:
    """How error messages name a task's config: as the user knows it, with the models the
    request named (a bad value may come from one of them)."""
    config, knowledge_base_id = str(row["config"]), str(row["knowledge_base_id"])
    if builtin and config == knowledge_base_id:
        base = f"the built-in config {config!r}"
    elif config == knowledge_base_id:
        base = f"{config}.toml"
    else:
        base = f"{config}.toml and {knowledge_base_id}.toml"
    named = [f"{field} {row[field]!r}" for field in MODEL_FIELDS if row.get(field)]
    if not named:
        return base if config == knowledge_base_id else f"the task's config (from {base})"
    return f"the task's config (from {base} with {', '.join(named)})"


def _shown_variant(variants: list[str] | tuple[str, ...]) -> str | None:
    """Which run the task's ``metric`` shows: the base config's, unless only variants run."""
    if not variants or "base" in variants:
        return None
    return variants[0]
