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
import secrets
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragev._errors import RagevError
from pytest_ragev._types import METRIC_NAMES, Answer, CustomMetric, PipelineSettings, QAPair
from pytest_ragev.settings import RagevConfig, VariantConfig, variant_pipeline

if TYPE_CHECKING:
    from pytest_ragev._builtin import BuiltinPipelines
    from pytest_ragev.dataset import Dataset
    from pytest_ragev.evaluate import Evaluation
    from pytest_ragev.recorder import PassageIndex


#: The user property name under which records travel on test reports.
RECORD_KEY = "ragev"


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
    total: int = 0
    finished: int = 0
    last_write: float = 0.0
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
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: dict[str, concurrent.futures.Future[Answer]] = {}
        self._records: dict[tuple[str | None, int], dict[str, Any]] = {}
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
                from pytest_ragev.settings import suggest

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
                from pytest_ragev.recorder import PassageIndex

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
        # Validate everything before xdist starts workers, so a bad config is one line.
        from pytest_ragev.settings import check_metric_names

        _ = self.dataset
        names = [*METRIC_NAMES, *(m.name for m in self.custom_metrics())]
        try:
            check_metric_names(self.ragev, names)
            self.builtin.validate(
                [self.pipeline_settings(v) for v in self.selected_variants()]
            )
            if not self.is_worker:
                from pytest_ragev.evaluate import validate_gate

                validate_gate(self.ragev, names)
        except RagevError as exc:
            raise pytest.UsageError(str(exc)) from None
        if not self.is_worker:
            self.task_id = make_task_id(self.dataset_id)
            for name in self.selected_variants():
                if name is not None:
                    self._warn_variant(name)

    def _warn_variant(self, name: str) -> None:
        from pytest_ragev.settings import flatten

        base = flatten(self.ragev.pipeline.options)
        variant = self.variant_config(name)
        assert variant is not None
        changed = sorted(
            key for key, value in flatten(variant.pipeline).items() if base.get(key) != value
        )
        if len(changed) > 1:
            self.config.issue_config_time_warning(
                pytest.PytestWarning(
                    f"ragev: variant {name!r} changes {len(changed)} knobs "
                    f"({', '.join(changed)}); change one variable at a time to know which "
                    "one moved the metrics"
                ),
                stacklevel=2,
            )

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.resolve() == self.ragev.source:
            from pytest_ragev.collect import RagevFile

            return RagevFile.from_parent(parent, path=file_path)
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "ragev_case" in metafunc.fixturenames:
            cases = self.cases()
            metafunc.parametrize(
                "ragev_case", cases, ids=[f"q{case.qid}" for case in cases], scope="function"
            )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._progress.total = sum(1 for item in session.items if _is_ragev_item(item))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        # user_properties ride on the setup, call and teardown reports alike: read one.
        for name, value in report.user_properties if report.when == "call" else ():
            if name == RECORD_KEY and isinstance(value, dict):
                key = (value.get("variant"), int(value["qid"]))
                if key in self._records:
                    self._duplicates += 1
                    continue
                self._records[key] = value
                self._progress.finished += 1
        if report.when == "teardown":
            self._maybe_write_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # tryfirst: the verdict and the JUnit properties must exist before junitxml writes.
        self._shutdown_executor()
        self._close_kbs()
        if self._builtin is not None:
            self._builtin.close()
        if self.is_worker:
            return
        from pytest_ragev.evaluate import evaluate

        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        try:
            self.evaluation = evaluate(self, interrupted=interrupted)
        except RagevError as exc:
            # A baseline that cannot be compared is a usage error: say it, exit 4.
            self.evaluation = None
            self._usage_error = str(exc)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            self._write_failed_report(str(exc))
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
        if self.evaluation.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and self._records:
            session.exitstatus = pytest.ExitCode.OK

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
            from pytest_ragev.evaluate import terminal_lines

            for line, markup in terminal_lines(self, verbose=self.config.option.verbose):
                terminalreporter.write_line(line, **markup)
        except Exception as exc:  # never raise from the terminal summary
            terminalreporter.write_line(f"ragev: could not print the summary: {exc!r}", red=True)

    # ------------------------------------------------------------------ records
    @property
    def records(self) -> Mapping[tuple[str | None, int], dict[str, Any]]:
        return self._records

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
        path = self.report_path
        if path is None:
            return
        now = time.monotonic()
        if now - self._progress.last_write < self.ragev.progress_interval:
            return
        self._progress.last_write = now
        from pytest_ragev._io import atomic_write_json
        from pytest_ragev.evaluate import progress_report

        try:
            atomic_write_json(path, progress_report(self))
        except OSError as exc:  # progress is best effort; the final write reports errors
            sys.stderr.write(f"ragev: could not write progress to {path}: {exc}\n")

    def _write_failed_report(self, message: str) -> None:
        path = self.report_path
        if path is None:
            return
        from pytest_ragev._io import atomic_write_json
        from pytest_ragev.evaluate import progress_report

        atomic_write_json(path, progress_report(self, status=3, err_msg=message))

    @property
    def report_path(self) -> Path | None:
        return self.options.report_json or self.ragev.report_json

    # ------------------------------------------------------------------ answering
    @property
    def builtin(self) -> BuiltinPipelines:
        """The built-in pipelines' plugin object (registered on first use)."""
        if self._builtin is None:
            from pytest_ragev._builtin import BuiltinPipelines

            self._builtin = BuiltinPipelines(self)
            self.config.pluginmanager.register(self._builtin, "ragev-builtin-pipelines")
        return self._builtin

    def knowledge_base(self, settings: PipelineSettings) -> Any:
        """The KB for ``settings``, built once per distinct KB settings (thread-safe)."""
        key = self.builtin.kb_identity(settings)
        with self._lock:
            if key not in self._kbs:
                kb = self.config.hook.pytest_ragev_build_knowledge_base(
                    corpus=self.dataset.corpus, settings=settings
                )
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

    def answer(self, case: QAPair, variant: str | None) -> Answer:
        """Call the pipeline for one question (or take the cached answer)."""
        settings = self.pipeline_settings(variant)
        cache, key = self.builtin.answer_cache_entry(settings, case)
        if cache is not None and key is not None:
            cached = cache.get(key)
            if cached is not None:
                with self._lock:
                    self.cache_hits += 1
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
            with self._lock:
                self.cache_misses += 1
            cache.put(key, result)
        return result

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
        from pytest_ragev.collect import PipelineFailed
        from pytest_ragev.recorder import make_record

        try:
            if self.concurrency > 1 and not self.is_worker:
                # Build the KB synchronously, before any question runs in a thread.
                self.knowledge_base(self.pipeline_settings(variant))
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
            record = make_record(
                case, None, index=self.passage_index, dataset_id=self.dataset_id,
                variant=variant, error=f"{type(exc).__name__}: {exc}",
            )
            item.user_properties.append((RECORD_KEY, record))
            raise PipelineFailed(case.qid, exc) from exc
        item.user_properties.append((RECORD_KEY, record))

    def record_manual(
        self, item: pytest.Item, case: QAPair, answer: Answer, variant: str | None = None
    ) -> dict[str, Any]:
        """Record an answer produced by a hand-written test (the ``ragev_record`` fixture)."""
        from pytest_ragev.recorder import make_record

        record = make_record(
            case, answer, index=self.passage_index, dataset_id=self.dataset_id, variant=variant
        )
        item.user_properties.append((RECORD_KEY, record))
        return record

    def _prefetch(self, item: pytest.Item) -> None:
        from pytest_ragev.collect import RagevItem

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
            if isinstance(upcoming, RagevItem):
                self._future(upcoming.case, upcoming.variant)
                window += 1

    def _shutdown_executor(self) -> None:
        if self._executor is not None:
            for future in self._futures.values():
                future.cancel()
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._futures.clear()


def _is_ragev_item(item: pytest.Item) -> bool:
    from pytest_ragev.collect import RagevItem

    return isinstance(item, RagevItem) or "ragev_case" in getattr(item, "fixturenames", ())


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
