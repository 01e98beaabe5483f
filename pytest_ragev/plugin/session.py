"""``RagevSession``: the plugin object of a ragev run.

On every process (serial, xdist controller, xdist worker) it holds the resolved
settings and, lazily, the dataset, the pipelines and the knowledge bases. Workers
(and serial runs) answer questions and attach one JSON-safe record per question to
the test report; the controller gathers the records, scores them in one batch,
decides the verdict, sets the exit status and writes the reports.
"""

from __future__ import annotations

import concurrent.futures
import getpass
import itertools
import os
import re
import secrets
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragev.config import RagevConfig, VariantConfig, variant_pipeline
from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.types import (
    METRIC_NAMES,
    STATUS_PENDING,
    STATUS_RUNNING,
    Answer,
    CustomMetric,
    PipelineSettings,
    QAPair,
)

if TYPE_CHECKING:
    from pytest_ragev.core.attribution import PassageIndex
    from pytest_ragev.dataset import Dataset
    from pytest_ragev.evaluation import Evaluation
    from pytest_ragev.plugin.defaults import BuiltinPipelines


#: The user property name under which records travel on test reports.
RECORD_KEY = "ragev"


#: A question of a variant: ``(variant or None, qid)``.
CaseKey = tuple[str | None, int]

# ``q17`` as one dash-separated part of a parametrize id: ``test_rag[q17]``, ``[q17-x]``.
_PARAM_QID = re.compile(r"\[(?:.*-)?q(\d+)(?:-.*)?\]$")


# The first line xdist puts in a worker's failure text: "[gw0] linux -- Python 3.11.7 ...".
_XDIST_HEADER = re.compile(r"^\[[\w.-]+\] \S+ -- Python ")


class KnowledgeBaseFailed(RuntimeError):
    """Building a knowledge base raised; every question that needs it fails with this."""


@dataclass(frozen=True)
class RunOptions:
    """Command-line and ini settings that override or complete the config file."""

    report_json: Path | None = None
    report_markdown: Path | None = None
    report_html: Path | None = None
    limit: int | None = None
    concurrency: int | None = None
    baseline: Path | None = None
    update_baseline: bool = False
    variants: tuple[str, ...] = ()
    no_cache: bool = False
    profile: str | None = None


@dataclass
class _Progress:
    """``finished/total`` counts questions (``(variant, qid)``), not test items."""

    total: int = 0
    finished: int = 0
    last_write: float = 0.0
    running: bool = False
    start_time: str = field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds")
    )


def default_concurrency() -> int:
    """The seed's default: one thread fewer than the CPUs, at least one."""
    return max((os.cpu_count() or 1) - 1, 1)


def make_task_id(dataset_id: str) -> str:
    """``evaluation_{user}_{unix_ms}_{8 hex}_{dataset_id}``, as the seed names tasks."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    user = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in user) or "unknown"
    return f"evaluation_{user}_{int(time.time() * 1000)}_{secrets.token_hex(4)}_{dataset_id}"


class RagevSession:
    """State of one pytest run with a ragev config; registered as a plugin."""

    def __init__(self, config: pytest.Config, ragev: RagevConfig, options: RunOptions) -> None:
        self.config = config
        self.ragev = ragev
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        self._dataset: Dataset | None = None
        self._index: PassageIndex | None = None
        self._lock = threading.RLock()
        self._kbs: dict[str, Any] = {}
        self._kb_settings: dict[str, PipelineSettings] = {}
        self._kb_failures: dict[str, str] = {}
        self._kb_ready: set[str | None] = set()  # variants whose KB exists (prefetch)
        self._cached: dict[CaseKey, bool] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: dict[str, concurrent.futures.Future[Answer]] = {}
        self._records: dict[CaseKey, dict[str, Any]] = {}
        self._collected: set[CaseKey] = set()
        self._question_of: dict[str, CaseKey] = {}  # node id -> question, collected items
        # Questions whose item ran to its end, recorded or not: a hand-written
        # ragev_case test that fails before recording has still finished.
        self._done: set[CaseKey] = set()
        self._cases_by_qid: dict[int, QAPair] | None = None
        self._duplicates = 0
        self._progress = _Progress()
        self.task_id: str | None = None
        self.evaluation: Evaluation | None = None
        self.cache_hits = 0
        self.cache_misses = 0
        self._builtin: BuiltinPipelines | None = None
        self._custom_metrics: tuple[CustomMetric, ...] | None = None
        self.gate_state: Any = None
        self._usage_error: str | None = None
        self._positions: dict[int, int] | None = None
        self._old_sigterm: Any = None
        self._sigterm_installed = False
        self.terminated_by: str | None = None
        self._deferred = False
        self.stopped_by: str | None = None
        self._deferred_signal = False

    # ------------------------------------------------------------------ settings
    @property
    def concurrency(self) -> int:
        value = self.options.concurrency or self.ragev.concurrency
        return value if value is not None else default_concurrency()

    @property
    def profile(self) -> str:
        return self.options.profile or self.ragev.profile

    @property
    def dataset_id(self) -> str:
        return self.dataset.dataset_id

    def selected_variants(self) -> list[str | None]:
        """``None`` (the base config) then the variants, or only those named by --ragev-variant."""
        names = [v.name for v in self.ragev.variants]
        if not self.options.variants:
            return [None, *names]
        chosen: list[str | None] = []
        for wanted in self.options.variants:
            if wanted in ("base", "default"):
                chosen.append(None)
            elif wanted in names:
                chosen.append(wanted)
            else:
                from pytest_ragev.core.tables import suggest

                raise pytest.UsageError(
                    f"--ragev-variant {wanted!r}: no such variant in {self.ragev.source}; "
                    f"{suggest(wanted, ['base', *names])}"
                )
        return chosen

    def variant_config(self, name: str | None) -> VariantConfig | None:
        if name is None:
            return None
        return next(v for v in self.ragev.variants if v.name == name)

    def pipeline_settings(self, variant: str | None) -> PipelineSettings:
        return variant_pipeline(self.ragev, self.variant_config(variant))

    # ------------------------------------------------------------------ dataset
    @property
    def dataset(self) -> Dataset:
        if self._dataset is None:
            from pytest_ragev.dataset import load_dataset

            try:
                dataset = load_dataset(self.ragev.dataset_path, dataset_id=self.ragev.dataset_id)
            except RagevError as exc:
                raise pytest.UsageError(str(exc)) from None
            if self.options.limit:
                dataset = dataset.limit(self.options.limit)
            self._dataset = dataset
        return self._dataset

    def cases(self) -> tuple[QAPair, ...]:
        return self.dataset.pairs

    @property
    def passage_index(self) -> PassageIndex:
        with self._lock:
            if self._index is None:
                from pytest_ragev.core.attribution import PassageIndex

                self._index = PassageIndex(self.dataset.corpus)
            return self._index

    def custom_metrics(self) -> tuple[CustomMetric, ...]:
        if self._custom_metrics is None:
            found: list[CustomMetric] = []
            for group in self.config.hook.pytest_ragev_metrics():
                for metric in group or ():
                    if not isinstance(metric, CustomMetric):
                        raise pytest.UsageError(
                            f"pytest_ragev_metrics returned {metric!r}; return "
                            "pytest_ragev.CustomMetric objects"
                        )
                    if metric.name in METRIC_NAMES or metric.name in {m.name for m in found}:
                        raise pytest.UsageError(
                            f"pytest_ragev_metrics: metric name {metric.name!r} is used twice; "
                            "give each custom metric its own name"
                        )
                    found.append(metric)
            self._custom_metrics = tuple(found)
        return self._custom_metrics

    # ------------------------------------------------------------------ pytest hooks
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self._reaches_config_file():
            self._activate()
        else:
            # e.g. `pytest tests/unit` with the ini twin set: most likely no question runs,
            # so the dataset is loaded (and the run validated) only if collection finds a
            # ragev_case test (see pytest_collection_finish).
            self._deferred = True

    def _reaches_config_file(self) -> bool:
        """Whether the run collects the config file (or runs under xdist: always eager)."""
        if self.is_worker or getattr(self.config.option, "dist", "no") != "no":
            return True  # validate before xdist starts workers, so a bad config is one line
        base = self.config.invocation_params.dir
        for arg in self.config.args:
            path = (base / arg.split("::", 1)[0]).resolve()
            if path == self.ragev.source or path in self.ragev.source.parents:
                return True
        return False

    def _activate(self) -> None:
        """Load the dataset and validate every setting, before any question runs."""
        from pytest_ragev.config import check_metric_names

        self._deferred = False
        _ = self.dataset
        names = [*METRIC_NAMES, *(m.name for m in self.custom_metrics())]
        try:
            check_metric_names(self.ragev, names)
            self.builtin.validate(
                [self.pipeline_settings(v) for v in self.selected_variants()]
            )
            if not self.is_worker:
                from pytest_ragev.evaluation import validate_gate

                validate_gate(self.ragev, names)
        except RagevError as exc:
            raise pytest.UsageError(str(exc)) from None
        if not self.is_worker:
            self.task_id = make_task_id(self.dataset_id)
            self._install_sigterm()

    # ------------------------------------------------------------------ signals
    def _install_sigterm(self) -> None:
        """SIGTERM (``timeout``, ``docker stop``) ends the run as Ctrl-C does: status 3."""
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._old_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError, AttributeError):  # no SIGTERM, or not allowed here
            return
        self._sigterm_installed = True

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.terminated_by = signal.Signals(signum).name
        raise KeyboardInterrupt

    def _defer_sigterm(self, signum: int, frame: FrameType | None) -> None:
        # While the reports are written: finish them, then let the signal take effect.
        self._deferred_signal = True

    def _restore_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        self._sigterm_installed = False
        # None: a handler installed from C, which Python cannot put back; default then.
        previous = signal.SIG_DFL if self._old_sigterm is None else self._old_sigterm
        signal.signal(signal.SIGTERM, previous)
        if self._deferred_signal:
            self._deferred_signal = False
            os.kill(os.getpid(), signal.SIGTERM)

    # ------------------------------------------------------------------ collection
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        # Warnings raised here are recorded by pytest's warnings plugin (-W and
        # filterwarnings apply), with the config file as their location.
        if not self.is_worker and not self._deferred:
            for name in self.selected_variants():
                if name is not None:
                    self._warn_variant(name)

    def _warn_variant(self, name: str) -> None:
        from pytest_ragev.core.tables import changed_keys

        base = self.ragev.pipeline.options
        changed = [f"pipeline.{key}" for key in
                   changed_keys(base, self.pipeline_settings(name).options)]
        if len(changed) > 1:
            warnings.warn_explicit(
                pytest.PytestWarning(
                    f"ragev: variant {name!r} changes {len(changed)} knobs "
                    f"({', '.join(changed)}); change one variable at a time to know which "
                    "one moved the metrics"
                ),
                category=None,  # taken from the warning instance
                filename=str(self.ragev.source),
                lineno=_variant_line(self.ragev.source, name),
            )

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.resolve() == self.ragev.source:
            from pytest_ragev.plugin.collect import RagevFile

            return RagevFile.from_parent(parent, path=file_path)
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "ragev_case" in metafunc.fixturenames:
            cases = self.cases()
            metafunc.parametrize(
                "ragev_case", cases, ids=[f"q{case.qid}" for case in cases], scope="function"
            )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.is_worker:
            return
        keys = [_item_key(item) for item in session.items]
        if self._deferred and any(key is not None for key in keys):
            self._activate()  # a UsageError here still ends the run with status 4
        self.set_collected(zip((item.nodeid for item in session.items), keys, strict=True))

    def set_collected(self, items: Iterable[tuple[str, CaseKey | None]]) -> None:
        """The questions the run will answer, from ``(node id, question or None)`` per
        collected item; the progress file goes to status 0 (pending)."""
        self._question_of = {nodeid: key for nodeid, key in items if key is not None}
        self._collected = set(self._question_of.values())
        self._progress.total = len(self._collected)
        if self._collected and not self.config.option.collectonly:
            self._write_progress(STATUS_PENDING)

    def key_of_nodeid(self, nodeid: str) -> CaseKey | None:
        """The question of a node id: a generated item, or a test parametrized by ragev_case."""
        generated = self._generated_key(nodeid)
        if generated is not None:
            return generated
        match = _PARAM_QID.search(nodeid)
        if match is None or int(match.group(1)) not in self._case_map():
            return None
        return (None, int(match.group(1)))

    def _generated_key(self, nodeid: str) -> CaseKey | None:
        if not self.is_case_id(nodeid):
            return None
        parts = nodeid.split("::")[2:]  # <file>::<dataset id>::[<variant>::]q<qid>
        if not parts or not parts[-1].startswith("q") or not parts[-1][1:].isdigit():
            return None
        qid = int(parts[-1][1:])
        if qid not in self._case_map():
            return None
        return (parts[0] if len(parts) == 2 else None, qid)

    def _case_map(self) -> dict[int, QAPair]:
        if self._cases_by_qid is None:
            self._cases_by_qid = {case.qid: case for case in self.cases()}
        return self._cases_by_qid

    # ------------------------------------------------------------------ reports
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.is_worker or self._progress.running or not self._collected:
            return
        self._progress.running = True
        self._write_progress(STATUS_RUNNING)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        # user_properties ride on the setup, call and teardown reports alike: read one.
        carried = False
        for name, value in report.user_properties if report.when == "call" else ():
            if name == RECORD_KEY and isinstance(value, dict):
                carried = True
                self._add_record(value)
        if report.failed and not carried:
            # A failed item without a record: a crashed xdist worker ("???" report), a
            # failing setup. Its question counts as an error, never silently missing.
            key = self._generated_key(report.nodeid)
            if key is not None and key not in self._records:
                self._add_record(self._error_record(key, report))
        if report.when in ("teardown", "???"):
            key = self._question_of.get(report.nodeid)
            if key is not None:
                self._done.add(key)
                self._progress.finished = len(self._done)
            self._maybe_write_progress()

    def _add_record(self, value: dict[str, Any]) -> None:
        key = (value.get("variant"), int(value["qid"]))
        if key in self._records:
            self._duplicates += 1
            return
        self._records[key] = value
        self._done.add(key)
        self._progress.finished = len(self._done)
        if key not in self._collected:  # e.g. a test the xdist node ids did not reveal
            self._progress.total += 1
        cached = value.get("cached")
        if cached is True:
            self.cache_hits += 1
        elif cached is False:
            self.cache_misses += 1

    def _error_record(self, key: CaseKey, report: pytest.TestReport) -> dict[str, Any]:
        from pytest_ragev.core.attribution import make_record

        variant, qid = key
        return make_record(
            self._case_map()[qid], None, index=self.passage_index, dataset_id=self.dataset_id,
            variant=variant, error=_failure_line(report),
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # tryfirst: the verdict and the JUnit properties must exist before junitxml writes.
        if self._sigterm_installed:
            signal.signal(signal.SIGTERM, self._defer_sigterm)
        try:
            self._finish(session, exitstatus)
        finally:
            self._restore_sigterm()

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        self._shutdown_executor()
        self._close_kbs()
        if self._builtin is not None:
            self._builtin.close()
        if self.is_worker:
            return
        if self.config.option.collectonly or not (self._collected or self._records):
            # No question was to be answered: no verdict, and the last report stays.
            return
        from pytest_ragev.evaluation import evaluate

        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        stopped = session.shouldfail or session.shouldstop  # -x, --maxfail, ...
        if stopped and not interrupted and self._progress.finished < self._progress.total:
            self.stopped_by = str(stopped)
            interrupted = True
        try:
            self.evaluation = evaluate(self, interrupted=interrupted)
        except RagevError as exc:
            # A baseline that cannot be compared is a usage error: say it, exit 4.
            self.evaluation = None
            self._usage_error = _unprefixed(str(exc))
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            self._write_failed_report(self._usage_error)
            return
        except Exception as exc:
            # A bug of ours must not hide the run's own summary behind an INTERNALERROR.
            import traceback

            traceback.print_exc()
            self.evaluation = None
            self._usage_error = f"internal error while evaluating: {type(exc).__name__}: {exc}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            self._write_failed_report(self._usage_error)
            return
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and self._records:
            session.exitstatus = pytest.ExitCode.OK
        if self.evaluation.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        error = self._usage_error
        if error:
            terminalreporter.write_line(f"ragev: error: {error}", red=True, bold=True)
            return
        if self.evaluation is None:
            return
        try:
            from pytest_ragev.evaluation import terminal_lines

            for line, markup in terminal_lines(self, verbose=self.config.option.verbose):
                terminalreporter.write_line(line, **markup)
        except Exception as exc:  # never raise from the terminal summary
            terminalreporter.write_line(f"ragev: could not print the summary: {exc!r}", red=True)

    # ------------------------------------------------------------------ records
    @property
    def records(self) -> Mapping[CaseKey, dict[str, Any]]:
        return self._records

    @property
    def interrupt_reason(self) -> str:
        """How an interrupted run was stopped, for ``err_msg`` and the verdict."""
        if self.terminated_by:
            return f"interrupted by {self.terminated_by}"
        if self.stopped_by:
            return f"stopped early ({self.stopped_by})"
        return "interrupted"

    @property
    def duplicates(self) -> int:
        return self._duplicates

    @property
    def progress(self) -> _Progress:
        return self._progress

    def is_case_id(self, nodeid: str) -> bool:
        """Whether ``nodeid`` is one of the generated evaluation items."""
        try:
            prefix = self.ragev.source.relative_to(self.config.rootpath).as_posix()
        except ValueError:
            prefix = self.ragev.source.as_posix()
        return nodeid.startswith(prefix + "::")

    def _maybe_write_progress(self) -> None:
        if not self._progress.running:
            return
        now = time.monotonic()
        if now - self._progress.last_write < self.ragev.progress_interval:
            return
        self._write_progress(STATUS_RUNNING)

    def _write_progress(self, status: int) -> None:
        path = self.report_path
        if path is None:
            return
        self._progress.last_write = time.monotonic()
        from pytest_ragev.core.io import atomic_write_json
        from pytest_ragev.evaluation import progress_report

        try:
            atomic_write_json(path, progress_report(self, status=status))
        except OSError as exc:  # progress is best effort; the final write reports errors
            sys.stderr.write(f"ragev: could not write progress to {path}: {exc}\n")

    def _write_failed_report(self, message: str) -> None:
        path = self.report_path
        if path is None:
            return
        from pytest_ragev.core.io import atomic_write_json
        from pytest_ragev.evaluation import progress_report

        atomic_write_json(path, progress_report(self, status=3, err_msg=message))

    @property
    def report_path(self) -> Path | None:
        return self.options.report_json or self.ragev.report_json

    # ------------------------------------------------------------------ answering
    @property
    def builtin(self) -> BuiltinPipelines:
        """The built-in pipelines' plugin object (registered on first use)."""
        if self._builtin is None:
            from pytest_ragev.plugin.defaults import BuiltinPipelines

            self._builtin = BuiltinPipelines(self)
            self.config.pluginmanager.register(self._builtin, "ragev-builtin-pipelines")
        return self._builtin

    def knowledge_base(self, settings: PipelineSettings) -> Any:
        """The KB for ``settings``, built once per distinct KB settings (thread-safe).

        A build that raised is not retried: every later question that needs the same KB
        fails at once with the same :class:`KnowledgeBaseFailed` line.
        """
        key = self.builtin.kb_identity(settings)
        with self._lock:
            failure = self._kb_failures.get(key)
            if failure is not None:
                raise KnowledgeBaseFailed(failure)
            if key not in self._kbs:
                try:
                    kb = self.config.hook.pytest_ragev_build_knowledge_base(
                        corpus=self.dataset.corpus, settings=settings
                    )
                except pytest.UsageError:
                    raise
                except Exception as exc:
                    message = f"building the knowledge base raised {type(exc).__name__}: {exc}"
                    self._kb_failures[key] = message
                    raise KnowledgeBaseFailed(message) from exc
                self._kbs[key] = kb
                self._kb_settings[key] = settings
            return self._kbs[key]

    def _close_kbs(self) -> None:
        with self._lock:
            for key, kb in list(self._kbs.items()):
                if kb is None:
                    continue
                settings = self._kb_settings[key]
                try:
                    self.config.hook.pytest_ragev_teardown_knowledge_base(kb=kb, settings=settings)
                finally:
                    close = getattr(kb, "close", None)
                    if callable(close):
                        close()
            self._kbs.clear()
            self._kb_ready.clear()

    def answer(self, case: QAPair, variant: str | None) -> Answer:
        """Call the pipeline for one question (or take the cached answer)."""
        settings = self.pipeline_settings(variant)
        cache, key = self.builtin.answer_cache_entry(settings, case)
        if cache is not None and key is not None:
            cached = cache.get(key)
            with self._lock:
                # Counted on the controller from the records (see _add_record), so the
                # hits and misses of xdist workers add up too.
                self._cached[(variant, case.qid)] = cached is not None
            if cached is not None:
                return cached
        kb = self.knowledge_base(settings)
        result = self.config.hook.pytest_ragev_answer(case=case, kb=kb, settings=settings)
        if result is None:
            raise RuntimeError(
                "no pytest_ragev_answer implementation returned an Answer; implement the hook "
                "in conftest.py or set [pipeline] name"
            )
        if not isinstance(result, Answer):
            raise TypeError(
                f"pytest_ragev_answer returned a {type(result).__name__}; return "
                "pytest_ragev.Answer(retrieved=[...], text='...')"
            )
        if cache is not None and key is not None:
            cache.put(key, result)
        return result

    def _mark_cached(self, record: dict[str, Any], case: QAPair, variant: str | None) -> None:
        with self._lock:
            cached = self._cached.pop((variant, case.qid), None)
        if cached is not None:
            record["cached"] = cached

    def _future(self, case: QAPair, variant: str | None) -> concurrent.futures.Future[Answer]:
        key = f"{variant}:{case.qid}"
        future = self._futures.get(key)
        if future is None:
            assert self._executor is not None
            future = self._executor.submit(self.answer, case, variant)
            self._futures[key] = future
        return future

    def run_case(self, item: pytest.Item, case: QAPair, variant: str | None) -> None:
        """Answer ``case`` for ``item``, attach the record, fail the item on a pipeline error."""
        from pytest_ragev.core.attribution import make_record
        from pytest_ragev.plugin.collect import PipelineFailed

        try:
            if self.concurrency > 1 and not self.is_worker:
                # Build the KB synchronously, before any question runs in a thread.
                self._ensure_kb(variant)
                self._prefetch(item)
                future = self._future(case, variant)  # already submitted by the prefetch
                self._futures.pop(f"{variant}:{case.qid}", None)
                answer = future.result()
            else:
                answer = self.answer(case, variant)
            record = make_record(
                case, answer, index=self.passage_index, dataset_id=self.dataset_id,
                variant=variant,
            )
        except pytest.UsageError:
            raise
        except Exception as exc:
            with self._lock:
                self._cached.pop((variant, case.qid), None)
            record = make_record(
                case, None, index=self.passage_index, dataset_id=self.dataset_id,
                variant=variant, error=f"{type(exc).__name__}: {exc}",
            )
            item.user_properties.append((RECORD_KEY, record))
            raise PipelineFailed(case.qid, exc) from exc
        self._mark_cached(record, case, variant)
        item.user_properties.append((RECORD_KEY, record))

    def record_manual(
        self, item: pytest.Item, case: QAPair, answer: Answer, variant: str | None = None
    ) -> dict[str, Any]:
        """Record an answer produced by a hand-written test (the ``ragev_record`` fixture)."""
        from pytest_ragev.core.attribution import make_record

        record = make_record(
            case, answer, index=self.passage_index, dataset_id=self.dataset_id, variant=variant
        )
        self._mark_cached(record, case, variant)
        item.user_properties.append((RECORD_KEY, record))
        return record

    def _prefetch(self, item: pytest.Item) -> None:
        from pytest_ragev.plugin.collect import RagevItem

        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="ragev"
            )
        items = item.session.items
        if self._positions is None:
            # Built once: a list.index per item would make a 10,000-question run quadratic.
            self._positions = {id(candidate): i for i, candidate in enumerate(items)}
        start = self._positions.get(id(item), 0)
        window = 0
        for upcoming in itertools.islice(items, start, None):
            if window >= self.concurrency * 2:
                break
            if not isinstance(upcoming, RagevItem):
                continue
            window += 1
            if f"{upcoming.variant}:{upcoming.case.qid}" in self._futures:
                continue
            try:
                # Knowledge bases are built here, in the main thread, never in the pool.
                self._ensure_kb(upcoming.variant)
            except KnowledgeBaseFailed:
                continue  # that item fails with the KB's error when it runs
            self._future(upcoming.case, upcoming.variant)

    def _ensure_kb(self, variant: str | None) -> None:
        """Build the KB of ``variant`` now (main thread); cheap once it exists."""
        if variant not in self._kb_ready:
            self.knowledge_base(self.pipeline_settings(variant))
            self._kb_ready.add(variant)

    def _shutdown_executor(self) -> None:
        if self._executor is not None:
            for future in self._futures.values():
                future.cancel()
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._futures.clear()


def _item_key(item: pytest.Item) -> CaseKey | None:
    """The question a collected item answers: a generated item, or a ragev_case test."""
    from pytest_ragev.plugin.collect import RagevItem

    if isinstance(item, RagevItem):
        return (item.variant, item.case.qid)
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("ragev_case") if callspec is not None else None
    return (None, case.qid) if isinstance(case, QAPair) else None


def _failure_line(report: pytest.TestReport) -> str:
    """One line saying why an item failed: the ``E`` line of a traceback, else the first."""
    lines = [
        line.strip() for line in report.longreprtext.splitlines()
        if line.strip() and not _XDIST_HEADER.match(line)
    ]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    text = errors[0] if errors else (lines[0] if lines else f"{report.when} failed")
    return text if len(text) <= 300 else text[:299] + "…"


def _unprefixed(message: str) -> str:
    # Errors of the computing modules start with "ragev: "; the summary adds its own.
    return message.removeprefix("ragev: ")


def _variant_line(source: Path, name: str) -> int:
    """The line of variant ``name`` (its ``name =`` key) in the config file; 1 if unknown."""
    try:
        text = source.read_text(encoding="utf-8")
    except OSError:
        return 1
    pattern = re.compile(r"^\s*name\s*=\s*([\"'])" + re.escape(name) + r"\1")
    header = 1
    in_variants = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_variants = stripped.replace(" ", "") == "[[variants]]"
            if in_variants:
                header = number
        elif in_variants and pattern.match(line):
            return number
    return header


def iter_records(
    session: RagevSession, variant: str | None
) -> Iterator[dict[str, Any]]:
    """The gathered records of one variant in qid order."""
    for (name, _qid), record in sorted(
        session.records.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
    ):
        if name == variant:
            yield record


def variants_with_records(session: RagevSession) -> Sequence[str | None]:
    """Variants in config order that have at least one record."""
    present = {name for name, _ in session.records}
    ordered: list[str | None] = [None, *(v.name for v in session.ragev.variants)]
    return [name for name in ordered if name in present]
