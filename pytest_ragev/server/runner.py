"""Runs evaluation tasks: the plugin in a subprocess per task, at most ``max_parallel`` at once.

Each task gets a folder under ``<workspace>/tasks/<task id>/`` and runs there as

    python -m pytest -c pytest.ini --rootdir . --ragev-config <config> \\
        --ragev-report report.json --ragev-html report.html --ragev-samples records.jsonl

so a crashing pipeline takes down only its own process, and every engine feature
(answer cache, variants, gate, reports) is the one CI uses. The task's config is the
request's plan written as TOML beside the config whose pipeline it copies (relative
paths, ``conftest.py`` and ``module:callable`` pipelines then resolve as they do in
CI) and removed when the run ends; the folder keeps a copy with secrets hidden.

Progress comes from the report the plugin rewrites atomically and from its
per-question lines (``--ragev-samples``: the running mean). Cancel is the plugin's
SIGTERM path (status 3). The pytest cache, and with it the answer cache, lives in the
task's folder: a task restarted after a crash re-scores the answers it already had and
asks the pipeline only for the rest. Children run in their own session, so a server killed with
``kill -9`` leaves them running; the next start adopts a live one and restarts a dead
one (or, with resume off, marks it failed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from pytest_ragev.core.io import atomic_write_text
from pytest_ragev.core.types import GENERATION_METRICS, RETRIEVAL_METRICS
from pytest_ragev.server.catalog import Catalog, FieldError
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import Store, now_iso

log = logging.getLogger("ragev.server")

#: Seconds a cancelled run may take to write its report before it is killed.
CANCEL_GRACE = 30.0
#: The evaluations' niceness (their own children inherit it).
EVALUATION_NICENESS = 10
#: Environment variables of the server that must not reach the task's pytest.
_DROPPED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_AUTO_NUM_WORKERS")


class Conflict(Exception):
    """The task cannot be cancelled: it has finished."""


@dataclass
class _Means:
    """Running sums of the run's per-question lines (``--ragev-samples``), per variant."""

    sums: dict[str | None, dict[str, float]] = field(default_factory=dict)
    counts: dict[str | None, dict[str, int]] = field(default_factory=dict)
    seen: set[tuple[str | None, int]] = field(default_factory=set)

    def add(self, line: Mapping[str, Any]) -> None:
        variant = line.get("variant")
        key = (variant, int(line["qid"]))
        if key in self.seen:
            return
        self.seen.add(key)
        if line.get("error"):
            return
        sums = self.sums.setdefault(variant, {})
        counts = self.counts.setdefault(variant, {})
        for name, value in dict(line.get("metrics") or {}).items():
            sums[name] = sums.get(name, 0.0) + float(value)
            counts[name] = counts.get(name, 0) + 1

    def block(self, variant: str | None) -> dict[str, Any] | None:
        """The report's ``metric`` shape for ``variant`` over the questions so far."""
        if not any(v == variant for v, _ in self.seen):
            return None
        sums, counts = self.sums.get(variant, {}), self.counts.get(variant, {})

        def means(names: tuple[str, ...]) -> dict[str, float | None]:
            return {n: (sums[n] / counts[n] if counts.get(n) else None) for n in names}

        return {
            "retrieval_metrics": means(RETRIEVAL_METRICS),
            "generation_metrics": means(GENERATION_METRICS),
            "counts": {n: counts.get(n, 0) for n in (*RETRIEVAL_METRICS, *GENERATION_METRICS)},
        }


@dataclass
class _Job:
    """One running (or adopted) evaluation process."""

    task_id: str
    folder: Path
    pid: int
    attempt: int
    shown_variant: str | None
    process: subprocess.Popen[bytes] | None = None
    derived: Path | None = None
    cancel_at: float | None = None
    shown_config: str = ""
    report_stamp: tuple[int, int] | None = None
    records_offset: int = 0
    means: _Means = field(default_factory=_Means)
    last: dict[str, Any] = field(default_factory=dict)

    def exit_code(self) -> int | None:
        """The exit code once the process ended (``-1`` for an adopted one), else ``None``."""
        if self.process is not None:
            return self.process.poll()
        return None if _alive(self.pid) else -1

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signum)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # An orphan nobody reaps stays a zombie: it has ended all the same.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _runs_in(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` is the evaluation of the task in ``folder``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(folder / "report.json").encode() in cmdline


class Runner:
    """The queue and the running evaluations; one scheduler thread, one watcher per task."""

    def __init__(self, settings: ServerSettings, store: Store, catalog: Catalog) -> None:
        self.settings = settings
        self.store = store
        self.catalog = catalog
        self._cond = threading.Condition()
        self._jobs: dict[str, _Job] = {}
        self._watchers: list[threading.Thread] = []
        self._stopping = False
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
            job.signal(signal.SIGTERM)
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

    def _recover(self) -> None:
        for row in self.store.unfinished():
            if row["pid"] is None:
                continue  # still queued
            folder = self.settings.tasks_dir / row["id"]
            pid = int(row["pid"])
            alive = _alive(pid) and _runs_in(pid, folder)
            # The task's config (secrets in clear) the last server wrote: the adopted run
            # removes it when it ends; every other path removes it now (a restart writes
            # it again).
            derived = self._task_config(row["id"])
            if not self.settings.resume:
                if alive:
                    os.kill(pid, signal.SIGTERM)
                if derived is not None:
                    derived.unlink(missing_ok=True)
                self._fail(row, "the server stopped while this task ran (resume is off)")
                continue
            if alive:
                log.info("task %s: adopting its running evaluation (pid %d)", row["id"], pid)
                job = _Job(row["id"], folder, pid, int(row["attempts"]),
                           _shown_variant(row["variants"]), derived=derived,
                           shown_config=_shown_config(row["config"], row["knowledge_base_id"]))
                self._watch(job)
            else:
                log.info("task %s: resuming from the answer cache", row["id"])
                if derived is not None:
                    derived.unlink(missing_ok=True)
                self.store.update_task(row["id"], status=0, pid=None)

    def _task_config(self, task_id: str) -> Path | None:
        """The task config a server wrote for ``task_id`` (beside the config whose
        pipeline it copies, somewhere under the configs folder), if it is still there."""
        return next(iter(self.catalog.configs.rglob(_task_config_name(task_id))), None)

    # --------------------------------------------------------------- queueing
    def _schedule(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                free = self.settings.max_parallel - len(self._jobs)
                started = 0
                if free > 0:
                    for task_id in self.store.pending_ids()[:free]:
                        self._start(task_id)
                        started += 1
                if not started:
                    self._cond.wait(timeout=1.0)

    def _start(self, task_id: str) -> None:
        """Start one queued task (the lock is held)."""
        row = self.store.task(task_id)
        if row is None or row["status"] != 0:
            return
        try:
            plan = self.catalog.plan(
                dataset_id=row["dataset_id"], knowledge_base_id=row["knowledge_base_id"],
                chat_id=row["chat_id"], rerank_id=row["rerank_id"], config=row["config"],
                variants=row["variants"], limit=row["limit_n"], profile=row["profile"],
            )
        except FieldError as exc:
            self._fail(row, exc.message)
            return
        except Exception as exc:  # a broken ragev-server.toml, an unreadable folder
            self._fail(row, f"could not prepare the task: {exc}")
            return
        if plan.error is not None:
            self._fail(row, plan.error)
            return
        folder = self.settings.tasks_dir / task_id
        folder.mkdir(parents=True, exist_ok=True)
        attempt = int(row["attempts"]) + 1
        for stale in ("report.json", "records.jsonl"):
            (folder / stale).unlink(missing_ok=True)
        atomic_write_text(folder / "pytest.ini", "[pytest]\n")
        write_task_config(folder / "config.toml", plan.redacted_document)
        derived = plan.folder / _task_config_name(task_id)
        try:
            write_task_config(derived, plan.document)
        except (OSError, TypeError) as exc:
            self._fail(row, f"could not write the task's config beside {plan.knowledge_base_id}"
                            f".toml: {exc}")
            return
        args = [
            sys.executable, "-m", "pytest", "-c", str(folder / "pytest.ini"),
            "--rootdir", str(folder), "--ragev-config", str(derived),
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
        except OSError as exc:
            derived.unlink(missing_ok=True)
            self._fail(row, f"could not start the evaluation: {exc}")
            return
        # Evaluations are batch work: when the CPU is short, the API's answers go first.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, process.pid, EVALUATION_NICENESS)
        self.store.update_task(task_id, status=1, pid=process.pid, attempts=attempt)
        log.info("task %s: started (attempt %d, pid %d)", task_id, attempt, process.pid)
        job = _Job(task_id, folder, process.pid, attempt, _shown_variant(list(plan.variants)),
                   process=process, derived=derived,
                   shown_config=_shown_config(plan.config, plan.knowledge_base_id))
        self._watch(job)

    def _watch(self, job: _Job) -> None:
        self._jobs[job.task_id] = job
        watcher = threading.Thread(target=self._follow, args=(job,),
                                   name=f"ragev-watch-{job.task_id}", daemon=True)
        self._watchers = [w for w in self._watchers if w.is_alive()]
        self._watchers.append(watcher)
        watcher.start()

    # ---------------------------------------------------------------- cancel
    def cancel(self, task_id: str) -> None:
        """Stop a running task with SIGTERM, or drop a queued one; :class:`Conflict` when
        it has finished."""
        with self._cond:
            job = self._jobs.get(task_id)
            if job is not None:
                self.store.update_task(task_id, cancel_requested=1)
                if job.cancel_at is None:
                    job.cancel_at = time.monotonic()
                    job.signal(signal.SIGTERM)
                return
            row = self.store.task(task_id)
            if row is None:
                raise KeyError(task_id)
            if row["status"] in (2, 3):
                raise Conflict(task_id)
            self.store.update_task(task_id, cancel_requested=1)
            self._fail(row, "cancelled before it started")

    # -------------------------------------------------------------- watching
    def _follow(self, job: _Job) -> None:
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
        except Exception:  # keep the server up; the task says what happened
            log.exception("task %s: watching the evaluation failed", job.task_id)
            row = self.store.task(job.task_id)
            if row is not None and row["status"] in (0, 1):
                self._fail(row, "the server lost track of this evaluation; see the server log")
        finally:
            if job.derived is not None:  # _finish removed it, unless it never ran
                job.derived.unlink(missing_ok=True)
            with self._cond:
                self._jobs.pop(job.task_id, None)
                self._cond.notify_all()

    def _read_report(self, job: _Job) -> dict[str, Any] | None:
        path = job.folder / "report.json"
        try:
            info = path.stat()
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp == job.report_stamp:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        job.report_stamp = stamp
        return data if isinstance(data, dict) else None

    def _read_records(self, job: _Job) -> bool:
        path = job.folder / "records.jsonl"
        try:
            with open(path, "rb") as handle:
                handle.seek(job.records_offset)
                chunk = handle.read()
        except OSError:
            return False
        end = chunk.rfind(b"\n")
        if end < 0:
            return False
        job.records_offset += end + 1
        for raw in chunk[: end + 1].splitlines():
            try:
                job.means.add(json.loads(raw))
            except (ValueError, KeyError, TypeError):
                continue
        return True

    def _progress(self, job: _Job) -> None:
        fields: dict[str, Any] = {}
        report = self._read_report(job)
        if report is not None:
            data = report.get("data") or {}
            task = data.get("task") or {}
            if isinstance(task.get("total"), int):
                fields["total"] = task["total"]
            if isinstance(task.get("finished"), int):
                fields["finished"] = task["finished"]
            if task.get("id"):
                fields["run_id"] = str(task["id"])
            if data.get("params") is not None:
                fields["params"] = data["params"]
        if self._read_records(job):
            seen = len(job.means.seen)
            total = fields.get("total", job.last.get("total", 0))
            finished = max(int(fields.get("finished", job.last.get("finished", 0))), seen)
            fields["finished"] = min(finished, total) if total else finished
            fields["metric"] = job.means.block(job.shown_variant)
        changed = {k: v for k, v in fields.items() if job.last.get(k) != v}
        if changed:
            job.last.update(changed)
            self.store.update_task(job.task_id, **changed)

    def _finish(self, job: _Job, code: int | None) -> None:
        self._progress(job)
        if job.derived is not None:
            job.derived.unlink(missing_ok=True)
        row = self.store.task(job.task_id)
        if row is None:
            return
        path = job.folder / "report.json"
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            data = report["data"]
            task = data["task"]
            status = int(task["status"])
        except (OSError, ValueError, KeyError, TypeError):
            data, task, status = {}, {}, -1
        with self._cond:
            stopping = self._stopping
        cancelled = bool(row["cancel_requested"])
        if stopping and not cancelled:
            if self.settings.resume:
                log.info("task %s: stopped with the server; it resumes at the next start",
                         job.task_id)
                self.store.update_task(job.task_id, status=0, pid=None)
            else:
                self._fail(row, "the server shut down while this task ran (resume is off)")
            return
        fields: dict[str, Any] = {"pid": None}
        if status in (2, 3):
            fields.update(
                status=status,
                err_msg=str(task.get("err_msg") or ""),
                total=int(task.get("total") or 0),
                finished=int(task.get("finished") or 0),
                metric=data.get("metric"),
                verdict=data.get("verdict"),
            )
            if data.get("params") is not None:
                fields["params"] = data["params"]
            if status == 3 and not fields["err_msg"]:
                fields["err_msg"] = "the evaluation failed; see its log"
        else:
            fields.update(status=3, err_msg=_error_from_log(job, code))
        if cancelled:
            fields["status"] = 3
            fields["err_msg"] = "cancelled: " + (fields.get("err_msg") or "stopped")
        fields["err_msg"] = self._readable(job, str(fields.get("err_msg") or ""))
        self._end(job.task_id, row, fields)
        log.info("task %s: finished with status %d", job.task_id, fields["status"])

    def _readable(self, job: _Job, message: str) -> str:
        """``message`` with the hidden task config named as the user knows it and no path
        of the server's configs folder."""
        if job.derived is not None and job.shown_config:
            message = message.replace(str(job.derived), job.shown_config)
        return message.replace(str(self.catalog.configs) + os.sep, "")

    def _fail(self, row: Mapping[str, Any], message: str) -> None:
        self._end(row["id"], row, {"status": 3, "err_msg": message, "pid": None})
        log.info("task %s: failed: %s", row["id"], message)

    def _end(self, task_id: str, row: Mapping[str, Any], fields: dict[str, Any]) -> None:
        now_ms = int(time.time() * 1000)
        fields["end_time"] = now_iso()
        fields["duration"] = round(max(0, now_ms - int(row["created_ms"])) / 1000.0, 3)
        self.store.update_task(task_id, **fields)


def write_task_config(path: Path, document: Mapping[str, Any]) -> None:
    """Write a task's config as TOML, atomically; the plugin's ``tomllib`` reads it back
    equal. :class:`TypeError` for a value TOML cannot hold (``None``, an object)."""
    atomic_write_text(path, tomli_w.dumps(document))


def _task_config_name(task_id: str) -> str:
    """The file name of a task's config (hidden: the catalog does not list it)."""
    return f".ragev-serve-{task_id}.toml"


def _shown_config(config: str, knowledge_base_id: str) -> str:
    """How error messages name the task's config: as the user knows it."""
    if config == knowledge_base_id:
        return f"{config}.toml"
    return f"the task's config (from {config}.toml and {knowledge_base_id}.toml)"


def _shown_variant(variants: list[str] | tuple[str, ...]) -> str | None:
    """Which run the task's ``metric`` shows: the base config's, unless only variants run."""
    if not variants or "base" in variants:
        return None
    return variants[0]


def _error_from_log(job: _Job, code: int | None) -> str:
    """The plugin's one-line error from the run's log, else the exit code."""
    try:
        lines = (job.folder / f"pytest-{job.attempt}.log").read_text(
            encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in reversed(lines):
        text = line.strip()
        if text.startswith(("ERROR: ", "ragev: error: ")):
            return text.split(": ", 1)[1]
    if code is None or code < 0:
        return "the evaluation process ended without a report"
    return f"the evaluation process exited with code {code} without a report; see its log"
