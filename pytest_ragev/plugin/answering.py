"""Answering questions: knowledge bases, the answer cache, the prefetch pool, the records.

:class:`Answerer` builds each distinct knowledge base once (in the main thread, never in
the pool), asks the ``pytest_ragev_answer`` hook (or the answer cache) for each question,
runs pipeline calls ahead in ``--ragev-concurrency`` threads, holds each call to
``[run] timeout`` and the run to ``[run] deadline``, and attaches the question's
:class:`~pytest_ragev.core.record.Record` to the item's test report.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.record import (
    RECORD_KEY,
    Record,
    finite_meta,
    make_record,
)
from pytest_ragev.core.types import Answer, PipelineSettings, QAPair
from pytest_ragev.evaluation import AssessmentFailed
from pytest_ragev.gate.thresholds import MaxValue, MinValue, check_question
from pytest_ragev.pipelines.concurrency import IO_BOUND_CONCURRENCY
from pytest_ragev.plugin.collect import PipelineFailed, QuestionFailed, RagevItem
from pytest_ragev.plugin.defaults import DefaultPipelineHooks


class KnowledgeBaseFailed(RuntimeError):
    """Building a knowledge base raised; every question that needs it fails with this."""


class NoAnswer(RagevError):
    """A ``pytest_ragev_answer`` hook of the project returned ``None`` for a question."""


class QuestionTimeout(RagevError):
    """A question's pipeline call took longer than ``[run] timeout``; it was abandoned."""


#: One call for the pool: the future it settles, the function and its arguments.
_Task = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]

#: One answer of a run: ``(variant, qid, repeat)``, ``repeat`` numbering the question's
#: answers with ``--ragev-repeat`` (0 without it).
AnswerKey = tuple[str | None, int, int]

#: The project's first answers measured before the default concurrency is decided.
ADAPT_AFTER = 4
#: Answers quicker than this on average are not worth more threads.
ADAPT_MIN_SECONDS = 0.005
#: A pipeline whose calls spend less than this share of their time on the CPU waits on
#: something else (a model, a service): more calls at once then help. Low, because a
#: busy machine also takes CPU time from a pipeline that computes (a thread of a shared
#: 2-core runner at a load of 10 gets about a fifth); a call over a socket spends almost
#: none.
ADAPT_CPU_SHARE = 0.1
#: The calls in flight for such a pipeline: as for the pipelines known to wait.
IO_WAITING_CONCURRENCY = IO_BOUND_CONCURRENCY


def _same_record(record: Record) -> Record:
    return record


class CallPool:
    """``workers`` daemon threads running pipeline calls, none of which is ever waited for.

    Threads cannot be killed, so a call that hangs is *abandoned* instead
    (:meth:`abandon`): it keeps its thread until it returns, if ever, but no longer
    counts, and a fresh thread takes its place. :meth:`close` cancels the calls not
    started yet and leaves the running ones behind: daemon threads, which neither
    shutdown nor the interpreter's exit joins (a ``ThreadPoolExecutor`` joins its
    threads at exit, so one hung call kept a stopped run alive).
    """

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running: dict[concurrent.futures.Future[Any], tuple[threading.Thread, float]] = {}
        self._abandoned: set[threading.Thread] = set()
        self._closed = False
        for _ in range(workers):
            self._spawn()

    def _spawn(self) -> None:
        threading.Thread(target=self._work, name="ragev-call", daemon=True).start()

    def grow(self, workers: int) -> None:
        """Run up to ``workers`` calls at once from now on."""
        with self._lock:
            more = workers - self._workers
            if more <= 0 or self._closed:
                return
            self._workers = workers
        for _ in range(more):
            self._spawn()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """Queue ``fn(*args)``; its future settles with the result or the exception."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._tasks.put((future, fn, args))
        return future

    def started_at(self, future: concurrent.futures.Future[Any]) -> float | None:
        """When ``future``'s call started (``time.monotonic()``), ``None`` if it has not."""
        with self._lock:
            running = self._running.get(future)
        return None if running is None else running[1]

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """Give up on ``future``: cancelled if it has not started, else left to its thread,
        which a new thread replaces."""
        if future.cancel():
            return
        with self._lock:
            running = self._running.pop(future, None)
            if running is None or self._closed:
                return
            self._abandoned.add(running[0])
        self._spawn()

    def close(self) -> None:
        """Cancel every call not started; abandon the running ones (never join them)."""
        with self._lock:
            self._closed = True
            self._running.clear()
        while True:
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task[0].cancel()
        for _ in range(self._workers):
            self._tasks.put(None)  # wakes the idle threads, which then end

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args = task
            if not future.set_running_or_notify_cancel():
                continue
            with self._lock:
                if self._closed:
                    future.cancel()
                    return
                self._running[future] = (me, time.monotonic())
            try:
                result = fn(*args)
            except BaseException as exc:  # settled on the future, raised where it is read
                future.set_exception(exc)
            else:
                future.set_result(result)
            with self._lock:
                self._running.pop(future, None)
                if me in self._abandoned or self._closed:
                    self._abandoned.discard(me)
                    return  # replaced (or the run is over)


class Answerer:
    """Answers the run's questions (thread-safe where the pool calls it).

    ``hook`` is pytest's hook relay; ``settings`` gives each configuration's pipeline
    settings; ``corpus`` and ``index`` are the dataset's passages and their chunk-text
    lookup; ``dataset_fingerprint`` keys the answer cache; ``concurrency`` > 1 runs
    pipeline calls ahead in threads (not on xdist workers: ``prefetch`` is then off).
    ``timeout`` (``[run] timeout``) is the most seconds one question's call may take,
    ``deadline`` (``[run] deadline``) the most seconds the run may answer for, counted
    from now; with either set, calls run in a pool thread even at concurrency 1, so the
    item can stop waiting for them. ``handoff`` is given each record attached to a test
    report, with the JSON text attached, for a collector in this process (none on xdist
    workers: their reports cross the channel); ``keep`` makes the record handed over
    (and scored at item time) from the one attached: what the run needs to keep of it.
    ``full_text`` attaches the whole record to the test report (what ``--junitxml``
    writes, and what a custom metric on the controller reads); without it the report
    carries the kept record, a few KB less a question. ``assess`` computes a question's
    judged and custom metrics right after its answer, in the same thread (the pool's:
    judge calls run as concurrently as the pipeline's); a custom metric or a judge that
    cannot score stops the run at that question (:class:`AssessmentFailed`).
    ``item_ids`` keeps, in each record, the passage id each retrieved item named (for
    ``--ragev-answers-out``, whose file a replay reads back item for item).
    """

    def __init__(
        self,
        *,
        hook: Any,
        defaults: DefaultPipelineHooks,
        settings: Callable[[str | None], PipelineSettings],
        corpus: Callable[[], Mapping[int, str]],
        index: Callable[[], PassageIndex],
        dataset_fingerprint: Callable[[], str],
        concurrency: int,
        prefetch: bool,
        scorer: Callable[[Record], Record] | None = None,
        score_every_question: bool = False,
        item_checks: Sequence[MinValue | MaxValue] = (),
        timeout: float | None = None,
        deadline: float | None = None,
        handoff: Callable[[str, Record], None] | None = None,
        keep: Callable[[Record], Record] | None = None,
        full_text: bool = True,
        assess: Callable[[Record], Record] | None = None,
        repeat: int = 1,
        adaptive: bool = False,
        item_ids: bool = False,
    ) -> None:
        self._assess = assess
        self._repeat = repeat
        self._item_ids = item_ids
        self._hook = hook
        self._full_text = full_text
        self._handoff = handoff
        self._keep: Callable[[Record], Record] = keep or _same_record
        self._defaults = defaults
        self._settings = settings
        self._corpus = corpus
        self._index = index
        self._fingerprint = dataset_fingerprint
        self._concurrency = concurrency
        self._prefetch_allowed = prefetch
        self._prefetch_on = prefetch and concurrency > 1
        self._timeout = timeout
        self._deadline = deadline
        self._deadline_at = None if deadline is None else time.monotonic() + deadline
        # An item's R answers run side by side in the pool when there is room for them
        # (on an xdist worker too, where nothing runs ahead of the items).
        self._side_by_side = repeat > 1 and concurrency > 1
        self._threaded = (self._prefetch_on or self._side_by_side or timeout is not None
                          or deadline is not None)
        # The default concurrency of the project's own pipeline code, measured: see
        # _adapt. None once decided (or when the concurrency was chosen by the user).
        self._calls: list[tuple[float, float]] | None = [] if adaptive and prefetch else None
        #: The line saying how many calls run at once when the run chose it itself.
        self.note: str | None = None
        #: Set when the deadline stopped the run: what the report's interruption names.
        self.stopped_by: str | None = None
        self._lock = threading.RLock()
        self._kbs: dict[str, Any] = {}
        self._kb_settings: dict[str, PipelineSettings] = {}
        self._kb_failures: dict[str, str] = {}
        self._kb_ready: set[str | None] = set()  # configurations whose KB exists (prefetch)
        self._cached: dict[AnswerKey, bool] = {}
        self._pool: CallPool | None = None
        self._futures: dict[AnswerKey, concurrent.futures.Future[Record]] = {}
        self._positions: dict[int, int] | None = None
        # Scoring at item time: every question when -v, --junitxml or per-question
        # floors need its metrics, else the first one only (a misbehaving custom metric
        # then ends the run at once instead of after every question ran).
        self._scorer = scorer
        self._score_every_question = score_every_question
        self._scored_one = False
        self._item_checks = tuple(item_checks)
        #: Set when a question showed a usage error (a custom metric out of range).
        self.usage_error: str | None = None

    # -- knowledge bases
    def knowledge_base(self, settings: PipelineSettings) -> Any:
        """The KB for ``settings``, built once per distinct KB settings (thread-safe).

        A build that raised is not retried: every later question that needs the same KB
        fails at once with the same :class:`KnowledgeBaseFailed` line.
        """
        key = self._defaults.kb_identity(settings)
        with self._lock:
            failure = self._kb_failures.get(key)
            if failure is not None:
                raise KnowledgeBaseFailed(failure)
            if key not in self._kbs:
                try:
                    kb = self._hook.pytest_ragev_build_knowledge_base(
                        corpus=self._corpus(), settings=self._defaults.handed(settings)
                    )
                except pytest.UsageError:
                    raise
                except Exception as exc:
                    message = f"building the knowledge base raised {type(exc).__name__}: {exc}"
                    self._kb_failures[key] = message
                    raise KnowledgeBaseFailed(message) from exc
                self._kbs[key] = kb
                self._kb_settings[key] = settings
            self._defaults.kb_used(settings)
            return self._kbs[key]

    def _ensure_kb(self, variant: str | None) -> None:
        """Build the KB of ``variant`` now (main thread); cheap once it exists."""
        if variant not in self._kb_ready:
            self.knowledge_base(self._settings(variant))
            self._kb_ready.add(variant)

    # -- answers
    def answer(self, case: QAPair, variant: str | None, repeat: int = 0) -> Answer:
        """Call the pipeline for one question (or take the cached answer); ``repeat``
        numbers the answer (``--ragev-repeat``: 0 to R - 1)."""
        settings = self._settings(variant)
        cache, key = self._defaults.answer_cache_entry(settings, case, self._fingerprint(),
                                                       repeat)
        if cache is not None and key is not None:
            cached = cache.get(key)
            with self._lock:
                # Counted on the controller from the records, so the hits and misses of
                # xdist workers add up too.
                self._cached[(variant, case.qid, repeat)] = cached is not None
            if cached is not None:
                return cached
        kb = self.knowledge_base(settings)
        measuring = self._calls is not None
        if measuring:
            started, cpu = time.perf_counter(), time.thread_time()
        # The project's code gets settings whose options record the keys it reads.
        result = self._hook.pytest_ragev_answer(case=case, kb=kb,
                                                settings=self._defaults.handed(settings),
                                                repeat=repeat)
        if measuring:
            self._measured(time.perf_counter() - started, time.thread_time() - cpu)
        if result is None:
            where = self._defaults.project.names()
            if where:
                # The built-in pipeline stands aside when a conftest answers: a None is
                # this question's error, never an answer from another pipeline.
                raise NoAnswer(
                    f"pytest_ragev_answer ({', '.join(where)}) returned None for q{case.qid}; "
                    "return pytest_ragev.Answer(retrieved=[...], text='...') for every "
                    "question, or raise to fail it"
                )
            raise RuntimeError(
                "no pytest_ragev_answer implementation returned an Answer; implement the hook "
                "in conftest.py or set [pipeline] name"
            )
        if not isinstance(result, Answer):
            raise TypeError(
                f"pytest_ragev_answer returned a {type(result).__name__}; return "
                "pytest_ragev.Answer(retrieved=[...], text='...')"
            )
        self._defaults.knob_reads.answered(variant)
        if cache is not None and key is not None:
            # Stored as the record keeps it (a NaN in meta as null, warned about once).
            cache.put(key, replace(result, meta=finite_meta(result.meta)))
        return result

    def answer_record(self, case: QAPair, variant: str | None, repeat: int = 0) -> Record:
        """Answer ``case``, map the answer to passage ids and compute its judged and custom
        metrics: one answer's whole work, in the thread that runs it."""
        answer = self.answer(case, variant, repeat)
        return self._assessed(make_record(case, answer, index=self._index(), variant=variant,
                                          cached=self._take_cached(case, variant, repeat),
                                          item_ids=self._item_ids))

    def _assessed(self, record: Record) -> Record:
        return record if self._assess is None else self._assess(record)

    def _cached_answer(self, case: QAPair, variant: str | None, repeat: int) -> Answer | None:
        """The cached answer of ``case`` (counted as a hit), or ``None`` (not counted:
        :meth:`answer` looks again and counts the miss)."""
        cache, key = self._defaults.answer_cache_entry(self._settings(variant), case,
                                                       self._fingerprint(), repeat)
        if cache is None or key is None:
            return None
        cached = cache.get(key)
        if cached is not None:
            with self._lock:
                self._cached[(variant, case.qid, repeat)] = True
        return cached

    def _take_cached(self, case: QAPair, variant: str | None, repeat: int = 0) -> bool | None:
        with self._lock:
            return self._cached.pop((variant, case.qid, repeat), None)

    # -- the default concurrency of the project's code
    def _measured(self, wall: float, cpu: float) -> None:
        with self._lock:
            if self._calls is not None and len(self._calls) < ADAPT_AFTER:
                self._calls.append((wall, cpu))

    def _adapt(self) -> None:
        """Once the project's first answers are measured: raise the calls in flight to
        :data:`IO_WAITING_CONCURRENCY` when the pipeline mostly waited (on a model, a
        service), and say so in one line. Main thread, between items."""
        calls = self._calls
        if calls is None or len(calls) < ADAPT_AFTER:
            return
        self._calls = None
        wall = sum(w for w, _ in calls)
        cpu = sum(c for _, c in calls)
        if wall / len(calls) < ADAPT_MIN_SECONDS or cpu >= wall * ADAPT_CPU_SHARE:
            return  # it computes (or answers at once): one thread fewer than the CPUs
        waited = 1.0 - cpu / wall
        self._concurrency = max(self._concurrency, IO_WAITING_CONCURRENCY)
        self._prefetch_on = True
        self._side_by_side = self._repeat > 1
        self._threaded = True
        if self._pool is not None:
            self._pool.grow(self._concurrency)
        self.note = (
            f"ragev: note: the pipeline's first {len(calls)} answers waited {waited:.0%} of "
            f"their {wall:.2f} s (on a model or a service, not on the CPU): "
            f"{self._concurrency} calls now run at once; set [run] concurrency (or "
            "--ragev-concurrency) to choose"
        )

    def run_case(self, item: pytest.Item, case: QAPair, variant: str | None) -> None:
        """Answer ``case`` for ``item`` (R times with ``--ragev-repeat R``), attach the
        record, fail the item on a pipeline error (any of its answers')."""
        self._check_deadline()
        answers: list[Record] = []
        try:
            if self._threaded:
                if self._prefetch_on:
                    # The prefetch window starts at this item: its answers are taken from
                    # the cache, or its KB is built here (main thread) before they run in
                    # the pool.
                    self._prefetch(item)
                else:
                    # Build the KB synchronously, before the question runs in a thread.
                    self._ensure_kb(variant)
                # Already submitted by the prefetch, or submitted now side by side.
                futures = [self._future(case, variant, r) for r in range(self._repeat)]
                for repeat in range(self._repeat):
                    self._futures.pop((variant, case.qid, repeat), None)
                for future in futures:
                    answers.append(self._wait(future))
            else:
                for repeat in range(self._repeat):
                    answers.append(self.answer_record(case, variant, repeat))
        except (pytest.UsageError, pytest.exit.Exception):
            raise
        except AssessmentFailed as exc:
            # The question was answered, but a custom metric or the judge cannot score:
            # every question would fail alike, so the run stops here (exit status 4).
            self.usage_error = str(exc)
            item.session.shouldstop = f"ragev: {exc}"
            raise QuestionFailed([str(exc)]) from None
        except Exception as exc:
            for repeat in range(self._repeat):
                self._take_cached(case, variant, repeat)
            which = (f" (answer {len(answers) + 1} of {self._repeat})"
                     if self._repeat > 1 else "")
            record = make_record(case, None, index=self._index(), variant=variant,
                                 error=f"{type(exc).__name__}: {exc}{which}")
            self._attach(item, record)
            raise PipelineFailed(case.qid, exc) from exc
        finally:
            self._adapt()
        record = answers[0] if len(answers) == 1 else replace(answers[0],
                                                               repeats=tuple(answers[1:]))
        self._finish_question(item, record)

    def _finish_question(self, item: pytest.Item, record: Record) -> None:
        """Score ``record`` if asked, attach it, and fail the item below a floor."""
        # Scored as the run keeps it (see ``keep``): the very object the collector then
        # holds, so the end of the run knows it is scored.
        kept = self._keep(record)
        if self._scorer is not None and (self._score_every_question or not self._scored_one):
            self._scored_one = True
            try:
                kept = self._scorer(kept)
            except RagevError as exc:
                self._attach(item, record)
                self.usage_error = str(exc)
                item.session.shouldstop = f"ragev: {exc}"
                raise QuestionFailed([str(exc)]) from None
        self._attach(item, record, kept)
        below = check_question(kept, self._item_checks)
        if below:
            raise QuestionFailed(below)

    def record_manual(
        self, item: pytest.Item, case: QAPair, answer: Answer, variant: str | None = None
    ) -> Record:
        """Record an answer produced by a hand-written test (the ``ragev_record`` fixture),
        with its judged and custom metrics."""
        record = make_record(case, answer, index=self._index(), variant=variant,
                             cached=self._take_cached(case, variant), item_ids=self._item_ids)
        try:
            record = self._assessed(record)
        except AssessmentFailed as exc:
            self._attach(item, record)
            self.usage_error = str(exc)
            item.session.shouldstop = f"ragev: {exc}"
            raise QuestionFailed([str(exc)]) from None
        self._attach(item, record)
        return record

    def record_manual_error(
        self, item: pytest.Item, case: QAPair, error: str, variant: str | None = None
    ) -> None:
        """Record that a hand-written test's answer was refused: an error for its question,
        as a refused hook answer is (the report counts it, the verdict sees it)."""
        self._take_cached(case, variant)
        self._attach(item, self.error_record(case, variant, error))

    def error_record(self, case: QAPair, variant: str | None, error: str) -> Record:
        """The record of a question that failed without answering."""
        return make_record(case, None, index=self._index(), variant=variant, error=error)

    def _attach(self, item: pytest.Item, record: Record, kept: Record | None = None) -> None:
        """Attach ``record`` to ``item``'s report; hand a collector in this process
        ``kept``, the record as the run keeps it (by default ``keep(record)``), which
        may differ from ``record`` only in ``retrieved`` and its metrics."""
        # As JSON text: --junitxml writes the property as it is (readable by any tool, not
        # a Python repr), and it crosses the xdist channel as plain data: the metrics,
        # and every retrieved item when something reads them (``full_text``). Pytest
        # holds every report to the end of the run: the retrieved chunk texts nothing
        # reads would be some 300 MB over 100,000 questions. A collector in this
        # process gets the record itself, not the text to parse.
        if kept is None:
            kept = self._keep(record)
        attached = kept
        if self._full_text and kept.retrieved is not record.retrieved:
            # The kept record's metrics (when scored) with every retrieved item.
            attached = replace(kept, retrieved=record.retrieved)
        text = attached.to_json_text()
        if self._handoff is not None:
            self._handoff(text, kept)
        item.user_properties.append((RECORD_KEY, text))

    # -- time limits
    def _wait(self, future: concurrent.futures.Future[Record]) -> Record:
        """``future``'s answer, within ``[run] timeout`` of its start and the deadline."""
        if future.done():  # e.g. a cached answer: no call, perhaps no pool at all
            return future.result()
        pool = self._pool
        assert pool is not None
        while True:
            now = time.monotonic()
            limits = []
            if self._deadline_at is not None:
                limits.append(self._deadline_at - now)
            if self._timeout is not None:
                started = pool.started_at(future)
                # Not started yet (queued behind other calls): look again a timeout later.
                limits.append(self._timeout if started is None else started + self._timeout - now)
            wait = max(min(limits), 0.0) if limits else None
            # wait(), not result(timeout=): the call itself may raise a TimeoutError.
            concurrent.futures.wait([future], timeout=wait)
            if future.done():
                return future.result()
            self._check_deadline()
            started = pool.started_at(future)
            if (self._timeout is not None and started is not None
                    and time.monotonic() - started >= self._timeout):
                pool.abandon(future)
                raise QuestionTimeout(
                    f"no answer within [run] timeout = {self._timeout:g} s; the call was "
                    "abandoned (its thread may still run): raise [run] timeout, or find what "
                    "the pipeline waits for"
                )

    def _check_deadline(self) -> None:
        """Stop the run (exit status 2) once ``[run] deadline`` has passed."""
        if self._deadline_at is None or time.monotonic() < self._deadline_at:
            return
        self.stopped_by = f"[run] deadline = {self._deadline:g} s"
        if self._pool is not None:
            self._pool.close()  # the running calls are abandoned, not waited for
        pytest.exit(
            f"ragev: [run] deadline = {self._deadline:g} s passed; the run stopped and its "
            "running pipeline calls were abandoned: raise [run] deadline, set [run] timeout "
            "for slow questions, or evaluate fewer (--ragev-limit)",
            returncode=pytest.ExitCode.INTERRUPTED,
        )

    # -- running ahead
    def _future(
        self, case: QAPair, variant: str | None, repeat: int = 0
    ) -> concurrent.futures.Future[Record]:
        key = (variant, case.qid, repeat)
        future = self._futures.get(key)
        if future is None:
            if self._pool is None:
                room = self._prefetch_on or self._side_by_side
                self._pool = CallPool(self._concurrency if room else 1)
            future = self._pool.submit(self.answer_record, case, variant, repeat)
            self._futures[key] = future
        return future

    def _prefetch(self, item: pytest.Item) -> None:
        """Submit the answers of the next ``2 x concurrency`` questions after ``item``
        (each of their R answers with ``--ragev-repeat R``) to the pool."""
        items = item.session.items
        if self._positions is None:
            # Built once: a list.index per item would make a 10,000-question run quadratic.
            self._positions = {id(candidate): i for i, candidate in enumerate(items)}
        window = 0
        # Indexed from the item's position: slicing from the start each time would be
        # quadratic in the number of items.
        for position in range(self._positions.get(id(item), 0), len(items)):
            if window >= self._concurrency * 2:
                break
            upcoming = items[position]
            if not isinstance(upcoming, RagevItem):
                continue
            window += 1
            for repeat in range(self._repeat):
                self._prefetch_answer(upcoming, repeat)

    def _prefetch_answer(self, upcoming: RagevItem, repeat: int) -> None:
        """Submit one answer of ``upcoming`` (or settle it from the cache)."""
        case, variant = upcoming.case, upcoming.variant
        if (variant, case.qid, repeat) in self._futures:
            return
        # A cached answer needs no pipeline call and no KB: a fully cached rerun then
        # never builds (or loads) one, as without --ragev-concurrency.
        cached = self._cached_answer(case, variant, repeat)
        if cached is not None and self._assess is None:
            done: concurrent.futures.Future[Record] = concurrent.futures.Future()
            done.set_result(make_record(case, cached, index=self._index(), variant=variant,
                                        cached=self._take_cached(case, variant, repeat),
                                        item_ids=self._item_ids))
            self._futures[(variant, case.qid, repeat)] = done
            return
        if cached is not None:
            # The answer is cached, but judging it may call the judge: in the pool.
            self._future(case, variant, repeat)
            return
        try:
            # Knowledge bases are built here, in the main thread, never in the pool.
            self._ensure_kb(variant)
        except KnowledgeBaseFailed:
            return  # that item fails with the KB's error when it runs
        self._future(case, variant, repeat)

    # -- the end
    def close_knowledge_bases(self) -> None:
        """Stop the pool and tear down every knowledge base (the pipelines stay).

        Calls still running (a hung pipeline, an interrupted run) are abandoned, not
        waited for: Ctrl-C, SIGTERM and the deadline end the run at once. A second call
        has nothing left to do.
        """
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            self._futures.clear()
        with self._lock:
            try:
                for key, kb in list(self._kbs.items()):
                    if kb is None:
                        continue
                    settings = self._kb_settings[key]
                    try:
                        self._hook.pytest_ragev_teardown_knowledge_base(
                            kb=kb, settings=self._defaults.handed(settings))
                    finally:
                        close = getattr(kb, "close", None)
                        if callable(close):
                            close()
            finally:
                self._kbs.clear()
                self._kb_settings.clear()
                self._kb_ready.clear()

    def close(self) -> None:
        """:meth:`close_knowledge_bases`, then release the pipelines."""
        try:
            self.close_knowledge_bases()
        finally:
            self._defaults.close()
