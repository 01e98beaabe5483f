"""Answering questions: knowledge bases, the answer cache, the prefetch pool, the records.

:class:`Answerer` builds each distinct knowledge base once (in the main thread, never in
the pool), asks the ``pytest_ragev_answer`` hook (or the answer cache) for each question,
runs pipeline calls ahead in ``--ragev-concurrency`` threads, and attaches the question's
:class:`~pytest_ragev.core.record.Record` to the item's test report.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.record import RECORD_KEY, QuestionKey, Record, make_record
from pytest_ragev.core.types import Answer, PipelineSettings, QAPair
from pytest_ragev.gate.thresholds import MaxValue, MinValue, check_question
from pytest_ragev.plugin.collect import PipelineFailed, QuestionFailed, RagevItem
from pytest_ragev.plugin.defaults import DefaultPipelineHooks


class KnowledgeBaseFailed(RuntimeError):
    """Building a knowledge base raised; every question that needs it fails with this."""


class Answerer:
    """Answers the run's questions (thread-safe where the pool calls it).

    ``hook`` is pytest's hook relay; ``settings`` gives each configuration's pipeline
    settings; ``corpus`` and ``index`` are the dataset's passages and their chunk-text
    lookup; ``dataset_fingerprint`` keys the answer cache; ``concurrency`` > 1 runs
    pipeline calls ahead in threads (not on xdist workers: ``prefetch`` is then off).
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
    ) -> None:
        self._hook = hook
        self._defaults = defaults
        self._settings = settings
        self._corpus = corpus
        self._index = index
        self._fingerprint = dataset_fingerprint
        self._concurrency = concurrency
        self._prefetch_on = prefetch and concurrency > 1
        self._lock = threading.RLock()
        self._kbs: dict[str, Any] = {}
        self._kb_settings: dict[str, PipelineSettings] = {}
        self._kb_failures: dict[str, str] = {}
        self._kb_ready: set[str | None] = set()  # configurations whose KB exists (prefetch)
        self._cached: dict[QuestionKey, bool] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: dict[QuestionKey, concurrent.futures.Future[Answer]] = {}
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
                        corpus=self._corpus(), settings=settings
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

    def _ensure_kb(self, variant: str | None) -> None:
        """Build the KB of ``variant`` now (main thread); cheap once it exists."""
        if variant not in self._kb_ready:
            self.knowledge_base(self._settings(variant))
            self._kb_ready.add(variant)

    # -- answers
    def answer(self, case: QAPair, variant: str | None) -> Answer:
        """Call the pipeline for one question (or take the cached answer)."""
        settings = self._settings(variant)
        cache, key = self._defaults.answer_cache_entry(settings, case, self._fingerprint())
        if cache is not None and key is not None:
            cached = cache.get(key)
            with self._lock:
                # Counted on the controller from the records, so the hits and misses of
                # xdist workers add up too.
                self._cached[(variant, case.qid)] = cached is not None
            if cached is not None:
                return cached
        kb = self.knowledge_base(settings)
        result = self._hook.pytest_ragev_answer(case=case, kb=kb, settings=settings)
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

    def _cached_answer(self, case: QAPair, variant: str | None) -> Answer | None:
        """The cached answer of ``case`` (counted as a hit), or ``None`` (not counted:
        :meth:`answer` looks again and counts the miss)."""
        cache, key = self._defaults.answer_cache_entry(self._settings(variant), case,
                                                       self._fingerprint())
        if cache is None or key is None:
            return None
        cached = cache.get(key)
        if cached is not None:
            with self._lock:
                self._cached[(variant, case.qid)] = True
        return cached

    def _take_cached(self, case: QAPair, variant: str | None) -> bool | None:
        with self._lock:
            return self._cached.pop((variant, case.qid), None)

    def run_case(self, item: pytest.Item, case: QAPair, variant: str | None) -> None:
        """Answer ``case`` for ``item``, attach the record, fail the item on a pipeline error."""
        try:
            if self._prefetch_on:
                # The prefetch window starts at this item: its answer is taken from the
                # cache, or its KB is built here (main thread) before it runs in a thread.
                self._prefetch(item)
                future = self._future(case, variant)  # already submitted by the prefetch
                self._futures.pop((variant, case.qid), None)
                answer = future.result()
            else:
                answer = self.answer(case, variant)
            record = make_record(case, answer, index=self._index(), variant=variant,
                                 cached=self._take_cached(case, variant))
        except pytest.UsageError:
            raise
        except Exception as exc:
            self._take_cached(case, variant)
            record = make_record(case, None, index=self._index(), variant=variant,
                                 error=f"{type(exc).__name__}: {exc}")
            _attach(item, record)
            raise PipelineFailed(case.qid, exc) from exc
        self._finish_question(item, record)

    def _finish_question(self, item: pytest.Item, record: Record) -> None:
        """Score ``record`` if asked, attach it, and fail the item below a floor."""
        if self._scorer is not None and (self._score_every_question or not self._scored_one):
            self._scored_one = True
            try:
                record = self._scorer(record)
            except RagevError as exc:
                _attach(item, record)
                self.usage_error = str(exc)
                item.session.shouldstop = f"ragev: {exc}"
                raise QuestionFailed([str(exc)]) from None
        _attach(item, record)
        below = check_question(record, self._item_checks)
        if below:
            raise QuestionFailed(below)

    def record_manual(
        self, item: pytest.Item, case: QAPair, answer: Answer, variant: str | None = None
    ) -> Record:
        """Record an answer produced by a hand-written test (the ``ragev_record`` fixture)."""
        record = make_record(case, answer, index=self._index(), variant=variant,
                             cached=self._take_cached(case, variant))
        _attach(item, record)
        return record

    def error_record(self, case: QAPair, variant: str | None, error: str) -> Record:
        """The record of a question that failed without answering."""
        return make_record(case, None, index=self._index(), variant=variant, error=error)

    # -- running ahead
    def _future(self, case: QAPair, variant: str | None) -> concurrent.futures.Future[Answer]:
        key = (variant, case.qid)
        future = self._futures.get(key)
        if future is None:
            assert self._executor is not None
            future = self._executor.submit(self.answer, case, variant)
            self._futures[key] = future
        return future

    def _prefetch(self, item: pytest.Item) -> None:
        """Submit the next ``2 x concurrency`` questions after ``item`` to the pool."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._concurrency, thread_name_prefix="ragev"
            )
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
            key = (upcoming.variant, upcoming.case.qid)
            if key in self._futures:
                continue
            # A cached answer needs no pipeline call and no KB: a fully cached rerun
            # then never builds (or loads) one, as without --ragev-concurrency.
            cached = self._cached_answer(upcoming.case, upcoming.variant)
            if cached is not None:
                done: concurrent.futures.Future[Answer] = concurrent.futures.Future()
                done.set_result(cached)
                self._futures[key] = done
                continue
            try:
                # Knowledge bases are built here, in the main thread, never in the pool.
                self._ensure_kb(upcoming.variant)
            except KnowledgeBaseFailed:
                continue  # that item fails with the KB's error when it runs
            self._future(upcoming.case, upcoming.variant)

    # -- the end
    def close(self) -> None:
        """Stop the pool, tear down every knowledge base, release the pipelines."""
        if self._executor is not None:
            for future in self._futures.values():
                future.cancel()
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._futures.clear()
        with self._lock:
            try:
                for key, kb in list(self._kbs.items()):
                    if kb is None:
                        continue
                    settings = self._kb_settings[key]
                    try:
                        self._hook.pytest_ragev_teardown_knowledge_base(kb=kb, settings=settings)
                    finally:
                        close = getattr(kb, "close", None)
                        if callable(close):
                            close()
            finally:
                self._kbs.clear()
                self._kb_ready.clear()
                self._defaults.close()


def _attach(item: pytest.Item, record: Record) -> None:
    # As JSON text: --junitxml writes the property as it is (readable by any tool, not a
    # Python repr), and it crosses the xdist channel as plain data.
    item.user_properties.append((RECORD_KEY, json.dumps(record.to_json(), ensure_ascii=False)))
