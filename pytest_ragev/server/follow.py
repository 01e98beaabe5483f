"""Following one evaluation process: what the runner reads of its files, as task fields.

An evaluation (the plugin, in a subprocess) tells how it goes through files in its task
folder: the JSON report it rewrites atomically (``finished/total``, ``params``, what it
does now: ``data.phase``), its per-question lines (``records.jsonl``: the running mean)
and, when it ends, the final report (status, metrics, verdict). A :class:`Job` is one
such process; :meth:`Job.progress` and :func:`final_fields` turn its files into the
columns of its task row.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragev.core.types import (
    BUILTIN_METRICS,
    GENERATION_METRICS,
    QUALITY_METRICS,
    RETRIEVAL_METRICS,
)
from pytest_ragev.server.params import chat_manage

#: The phase of an evaluation that has not written its first report yet.
LOADING: Mapping[str, Any] = {"name": "loading"}


@dataclass
class Means:
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

        def means(names: Sequence[str]) -> dict[str, float | None]:
            return {n: (sums[n] / counts[n] if counts.get(n) else None) for n in names}

        block: dict[str, Any] = {
            "retrieval_metrics": means(RETRIEVAL_METRICS),
            "generation_metrics": means(GENERATION_METRICS),
        }
        # The final report's other blocks, for the metrics the questions have so far.
        quality = [n for n in QUALITY_METRICS if n in counts]
        custom = [n for n in counts if n not in BUILTIN_METRICS]
        if quality:
            block["quality_metrics"] = means(quality)
        if custom:
            block["custom_metrics"] = means(custom)
        block["counts"] = {n: counts.get(n, 0)
                           for n in (*RETRIEVAL_METRICS, *GENERATION_METRICS, *quality, *custom)}
        return block


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie nobody reaps has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def runs_in(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` is the evaluation of the task in ``folder``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(folder / "report.json").encode() in cmdline


@dataclass
class Job:
    """One running (or adopted) evaluation process and what was read of it so far.

    ``request`` is the task's request (for the ``ChatManage`` keys of ``params``).
    """

    task_id: str
    folder: Path
    pid: int
    attempt: int
    shown_variant: str | None
    request: Mapping[str, Any]
    process: subprocess.Popen[bytes] | None = None
    derived: Path | None = None
    cancel_at: float | None = None
    shown_config: str = ""
    report_stamp: tuple[int, int] | None = None
    records_offset: int = 0
    means: Means = field(default_factory=Means)
    #: The task fields as last written to the store (only changes are written).
    last: dict[str, Any] = field(default_factory=dict)

    def exit_code(self) -> int | None:
        """The exit code once the process ended (``-1`` for an adopted one), else ``None``."""
        if self.process is not None:
            return self.process.poll()
        return None if alive(self.pid) else -1

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the evaluation (nothing when it has ended)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signum)

    def stop(self) -> None:
        """SIGTERM: the plugin writes its report of the questions answered and ends."""
        self.signal(signal.SIGTERM)

    # ------------------------------------------------------------- progress
    def progress(self) -> dict[str, Any]:
        """The task fields that changed since :attr:`last` (not yet marked written)."""
        fields: dict[str, Any] = {}
        report = self._read_report()
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
                fields["params"] = chat_manage(data["params"], self.request)
            if task.get("status") in (0, 1):
                phase = data.get("phase")
                fields["phase"] = dict(phase) if isinstance(phase, Mapping) else None
        elif "phase" not in self.last:
            fields["phase"] = dict(LOADING)
        if self._read_records():
            seen = len(self.means.seen)
            total = fields.get("total", self.last.get("total", 0))
            finished = max(int(fields.get("finished", self.last.get("finished", 0))), seen)
            fields["finished"] = min(finished, total) if total else finished
            fields["metric"] = self.means.block(self.shown_variant)
        return {k: v for k, v in fields.items() if self.last.get(k) != v}

    def written(self, fields: Mapping[str, Any]) -> None:
        """``fields`` reached the store."""
        self.last.update(fields)

    def _read_report(self) -> dict[str, Any] | None:
        path = self.folder / "report.json"
        try:
            info = path.stat()
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp == self.report_stamp:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        self.report_stamp = stamp
        return data if isinstance(data, dict) else None

    def _read_records(self) -> bool:
        path = self.folder / "records.jsonl"
        try:
            with open(path, "rb") as handle:
                handle.seek(self.records_offset)
                chunk = handle.read()
        except OSError:
            return False
        end = chunk.rfind(b"\n")
        if end < 0:
            return False
        self.records_offset += end + 1
        for raw in chunk[: end + 1].splitlines():
            try:
                self.means.add(json.loads(raw))
            except (ValueError, KeyError, TypeError):
                continue
        return True


def final_report(folder: Path) -> dict[str, Any] | None:
    """The ``data`` of a task folder's report when it is final (status 2 or 3)."""
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        data = report["data"]
        status = int(data["task"]["status"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if status in (2, 3) and isinstance(data, dict) else None


def final_fields(data: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """The task fields of a final report's ``data``."""
    task = data["task"]
    fields: dict[str, Any] = {
        "status": int(task["status"]),
        "err_msg": str(task.get("err_msg") or ""),
        "total": int(task.get("total") or 0),
        "finished": int(task.get("finished") or 0),
        "metric": data.get("metric"),
        "verdict": data.get("verdict"),
        "phase": None,
        "pid": None,
    }
    if data.get("params") is not None:
        fields["params"] = chat_manage(data["params"], request)
    if fields["status"] == 3 and not fields["err_msg"]:
        fields["err_msg"] = "the evaluation failed; see its log"
    return fields


def error_from_log(folder: Path, attempt: int, code: int | None) -> str:
    """The plugin's one-line error from the run's log, else the exit code."""
    try:
        lines = (folder / f"pytest-{attempt}.log").read_text(
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
