"""The active part of a ragev run: dataset, plan, pipelines, records, the finish.

Created by the session only when the run answers questions (xdist's controller is
created the same way: lazily, and only when needed), so a pytest run that merely has
the plugin installed imports none of this: no pyarrow, numpy or jieba.
:class:`ActiveRun` is the composition root: it builds the components of
:mod:`.answering`, :mod:`.records`, :mod:`.progress`, :mod:`.defaults` and
:mod:`.finish`, registers the plugin objects among them and hands each the values it
needs (none of them knows this module). The checks it runs when the run becomes active
are :mod:`.preflight`'s and :mod:`.knobs`'.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.config import RagevConfig, RunOptions
from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.errors import CacheWarning, RagevError
from pytest_ragev.core.io import WRITE_ERRORS, write_error_cause, write_error_fix
from pytest_ragev.core.record import QuestionKey, Record
from pytest_ragev.core.shard import costs_label, owned
from pytest_ragev.core.task import make_task_id, task_user
from pytest_ragev.core.types import STATUS_RUNNING, QAPair
from pytest_ragev.core.version import __version__
from pytest_ragev.dataset import SPILL_TEXT_BYTES, Dataset, load_dataset
from pytest_ragev.evaluation import (
    Assessor,
    EvalInputs,
    Judge,
    RecordScorer,
    RunFacts,
    RunningMeans,
    RunPlan,
    ShardPart,
    SimilarityScorer,
    TextScoreMemo,
    VerdictStore,
    run_params,
    write_store,
)
from pytest_ragev.pipelines import Pipeline, PipelineKind, pipeline_kind
from pytest_ragev.plugin.answering import Answerer
from pytest_ragev.plugin.collect import CollectionPlan, NodeIds
from pytest_ragev.plugin.defaults import ANSWER_HOOK, DefaultPipelineHooks, kb_progress_factory
from pytest_ragev.plugin.finish import Finisher
from pytest_ragev.plugin.knobs import (
    KnobReadsExchange,
    same_as_base_lines,
    unread_knob_lines,
    unused_builtin_knob_lines,
)
from pytest_ragev.plugin.preflight import (
    check_answer_rows,
    check_baseline_target,
    check_judge,
    check_services,
    custom_metrics,
)
from pytest_ragev.plugin.progress import ProgressFile, XdistProgress
from pytest_ragev.plugin.records import ItemStatus, RecordCollector, RecordHandoff
from pytest_ragev.plugin.samples import SamplesFile
from pytest_ragev.plugin.signals import SigtermGuard
from pytest_ragev.report import progress_report
from pytest_ragev.report.shards import question_costs

#: The names under which the run's plugin objects are registered (and unregistered).
PLUGIN_NAMES = ("ragev-defaults", "ragev-records", "ragev-xdist", "ragev-finish",
                "ragev-item-status", "ragev-knobs")


def _usage(error: RagevError) -> pytest.UsageError:
    return pytest.UsageError(str(error))


class ActiveRun:
    """Everything a run that answers questions holds, on every process."""

    def __init__(self, config: pytest.Config, ragev: RagevConfig, options: RunOptions) -> None:
        self.config = config
        self.ragev = ragev
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        self.signals = SigtermGuard()
        self.task_id = ""
        self.start_time = datetime.now(UTC).isoformat(timespec="milliseconds")
        self._started = time.monotonic()
        self._dataset: Dataset | None = None
        self._plan: RunPlan | None = None
        self._index: PassageIndex | None = None
        self._node_ids: NodeIds | None = None
        self._cases: dict[int, QAPair] | None = None
        self._pairs: tuple[QAPair, ...] | None = None
        #: Every question id of the dataset, before --ragev-limit.
        self._all_qids: tuple[int, ...] = ()
        self._params: dict[str | None, dict[str, Any]] = {}
        self._warnings: tuple[str, ...] = ()
        self._cache_dir: tuple[Path | None] | None = None  # memo of _cache_root
        self.defaults = DefaultPipelineHooks(
            hook=config.hook,
            source=ragev.source,
            cache_root=self._cache_root,
            no_cache=options.no_cache,
            cache_setting=ragev.cache,
            progress=kb_progress_factory(config, phase=self._kb_phase),
            project_root=config.rootpath,
        )
        self.progress = ProgressFile(options.report_json or ragev.report_json,
                                     interval=ragev.progress_interval, report=self._progress)
        self.samples = (SamplesFile(options.samples, scorer=self._score,
                                    hash_of=self._question_hash)
                        if options.samples is not None else None)
        self.handoff = RecordHandoff(keep=self.kept_record)
        self.records = RecordCollector(
            node_ids=lambda: self.node_ids, error_record=self._error_record,
            progress=self.progress, collect_only=bool(config.option.collectonly),
            on_record=self.samples.add if self.samples is not None else None,
            handoff=self.handoff,
        )
        self.finisher = Finisher(
            config=config, is_worker=self.is_worker, records=self.records,
            progress=self.progress, signals=self.signals,
            answerer=lambda: self._answerer, close_pipelines=self._close_pipelines,
            node_ids=lambda: self.node_ids, inputs=self.inputs, params=self.params,
            save_verdicts=self.save_verdicts, empty_shard=lambda: self.empty_shard,
        )
        self._answerer: Answerer | None = None
        self._scorer: RecordScorer | None = None
        # The running means of the progress report, and how many records they count.
        self._running: RunningMeans | None = None
        self._running_seen = 0

    def register(self) -> None:
        """Register the run's plugin objects (the defaults first: hooks are checked on use)."""
        manager = self.config.pluginmanager
        manager.register(self.defaults, "ragev-defaults")
        if not self.is_worker:
            manager.register(self.records, "ragev-records")
            if manager.hasplugin("xdist"):
                xdist = XdistProgress(lambda: self.node_ids, self.records.set_collected)
                manager.register(xdist, "ragev-xdist")
        manager.register(self.finisher, "ragev-finish")
        manager.register(KnobReadsExchange(self.defaults.knob_reads, is_worker=self.is_worker),
                         "ragev-knobs")
        if not self.is_worker and self.config.option.verbose > 0:
            manager.register(ItemStatus(), "ragev-item-status")

    # -- lazily built values
    @property
    def dataset(self) -> Dataset:
        """The dataset (limited by ``--ragev-limit``), loaded on first use."""
        if self._dataset is None:
            try:
                dataset = load_dataset(self.ragev.dataset_path, dataset_id=self.ragev.dataset_id)
            except RagevError as exc:
                raise _usage(exc) from None
            self._all_qids = tuple(pair.qid for pair in dataset.pairs)
            if self.options.limit:
                dataset = dataset.limit(self.options.limit)
            if dataset.corpus.text_bytes >= SPILL_TEXT_BYTES:
                # A run holds the corpus to its end but reads it whole only to build the
                # KB: its texts wait in a mapped temporary file, not in the heap.
                dataset.corpus.spill_texts()
            self._dataset = dataset
        return self._dataset

    @property
    def plan(self) -> RunPlan:
        """The run plan: settings resolved once, with the hooks' custom metrics."""
        if self._plan is None:
            try:
                metrics = custom_metrics(self.config.hook.pytest_ragev_metrics())
                self._plan = RunPlan.build(self.ragev, self.options, metrics,
                                           self.config.hook.pytest_ragev_tokenizer())
            except RagevError as exc:
                raise _usage(exc) from None
        return self._plan

    @property
    def pairs(self) -> tuple[QAPair, ...]:
        """The questions this run answers, in qid order: the dataset's, or with
        ``--ragev-shard K/N`` the shard's share of them (the same on every xdist worker)."""
        if self._pairs is None:
            self._pairs = self._select_pairs()
        return self._pairs

    def _select_pairs(self) -> tuple[QAPair, ...]:
        pairs = self.dataset.pairs
        spec = self.options.shard
        if spec is None:
            return pairs
        mine = set(owned([pair.qid for pair in pairs], spec, self.shard_costs))
        return tuple(pair for pair in pairs if pair.qid in mine)

    @property
    def empty_shard(self) -> bool:
        """Whether this is a shard that owns no question (more shards than questions): it
        still writes its partial report, so that the merge sees every shard."""
        return self.options.shard is not None and not self.pairs

    @functools.cached_property
    def shard_costs(self) -> dict[int, float]:
        """qid -> seconds from ``--ragev-shard-balance``'s report (empty: by hash)."""
        path = self.options.shard_balance
        if path is None or self.options.shard is None:
            return {}
        try:
            return question_costs(path)
        except RagevError as exc:
            raise _usage(exc) from None

    def shard_part(self) -> ShardPart | None:
        """What a sharded run answered, for its partial report (``None``: not sharded)."""
        spec = self.options.shard
        if spec is None:
            return None
        return ShardPart(
            spec=spec,
            questions=tuple(pair.qid for pair in self.pairs),
            dataset_questions=len(self.dataset.pairs),
            assignment=costs_label(self.shard_costs),
            configurations=self.plan.variants,
            plugin_version=__version__,
            config=self.node_ids.prefix,
            custom_metrics=tuple(
                {"name": m.name, "direction": m.direction, "kind": m.kind,
                 "bounds": list(m.bounds)}
                for m in self.plan.custom_metrics),
        )

    @property
    def passage_index(self) -> PassageIndex:
        if self._index is None:
            self._index = PassageIndex(self.dataset.corpus)
        return self._index

    @property
    def node_ids(self) -> NodeIds:
        if self._node_ids is None:
            self._node_ids = NodeIds.of(self.ragev.source, self.config.rootpath,
                                      self.dataset.dataset_id, self.cases)
        return self._node_ids

    @property
    def cases(self) -> dict[int, QAPair]:
        """The dataset's questions by qid."""
        if self._cases is None:
            self._cases = {case.qid: case for case in self.dataset.pairs}
        return self._cases

    @property
    def answerer(self) -> Answerer:
        if self._answerer is None:
            self._answerer = Answerer(
                hook=self.config.hook,
                defaults=self.defaults,
                settings=self.plan.settings,
                corpus=lambda: self.dataset.corpus,
                index=lambda: self.passage_index,
                dataset_fingerprint=lambda: self.dataset.fingerprint,
                concurrency=self.plan.concurrency_for(self._pipeline_kind()),
                prefetch=not self.is_worker,
                scorer=self._score if (self.score_items or self.plan.custom_metrics) else None,
                score_every_question=self.score_items,
                item_checks=self.plan.item_thresholds,
                timeout=self.ragev.timeout,
                deadline=self.ragev.deadline,
                handoff=None if self.is_worker else self.handoff.leave,
                keep=self.kept_record,
                full_text=self.attach_whole_records,
                assess=self.assessor.assess if self.assessor.active else None,
                repeat=self.plan.repeat,
                # The project's own code: measured, and given more threads when it waits.
                adaptive=(self.plan.options.concurrency is None
                          and self.plan.config.concurrency is None
                          and self.plan.judge is None
                          and self._pipeline_kind() == "project"),
                item_ids=self.options.answers_out is not None,
            )
        return self._answerer

    @functools.cached_property
    def verdict_store(self) -> VerdictStore | None:
        """The judge's verdicts of earlier runs: ``[judge] store``, else a file in the
        plugin's cache folder (``None``: no judge, or no cache and no store named)."""
        judge = self.plan.judge
        if judge is None:
            return None
        path = judge.store
        if path is None:
            root = None if self.options.no_cache else self._cache_root()
            if root is None:
                return None
            path = root / "verdicts.jsonl"
        try:
            return VerdictStore.load(path)
        except RagevError as exc:
            raise _usage(exc) from None

    @functools.cached_property
    def judge(self) -> Judge | None:
        """The ``[judge]`` of the run (``None`` when no metric is judged)."""
        config = self.plan.judge
        if config is None:
            return None
        return Judge(config, store=self.verdict_store, rejudge=self.options.rejudge)

    @functools.cached_property
    def assessor(self) -> Assessor:
        """Computes each question's judged and custom metrics as it is answered."""
        return Assessor(judge=self.judge, judged=self.plan.judged,
                        custom=self.plan.custom_metrics, cases=self.cases,
                        corpus=self.dataset.corpus)

    @functools.cached_property
    def similarity(self) -> SimilarityScorer | None:
        """Scores ``similarity`` when the run measures it, keeping each pair's score in
        the answer cache's database."""
        if not self.plan.similarity:
            return None
        return SimilarityScorer(store=self.defaults.text_score_store())

    def save_verdicts(self, finished: bool) -> list[str]:
        """Write the verdicts the run made or replayed into the verdict store (on the
        controller, at the end): the lines to print when it cannot be written.

        A complete run (``finished``, every question of every configured configuration
        answered, no ``--ragev-limit``) keeps only its own verdicts, so the store holds
        what the current answers were judged by; any other run keeps the others too.
        """
        if self.plan.judge is None:
            return []
        judge, store = self.judge, self.verdict_store
        if judge is None or store is None or store.path is None:
            return []
        every = len(self.dataset.pairs) * len(self.plan.configured)
        complete = (finished and not self.options.limit
                    and self.plan.variants == self.plan.configured
                    and len({r.key for r in self.records.records}) == every)
        # Every answer's verdicts: with --ragev-repeat the other R - 1 answers were
        # judged too, and a rerun replays them from here.
        entries = [judge.stored(verdict, record.question)
                   for record in self.records.records for answer in record.every_answer
                   for verdict in answer.verdicts if verdict.key and verdict.score is not None]
        if not store.changed_by(entries, prune=complete):
            return []
        try:
            write_store(store.path, store.merged(entries, prune=complete))
        except WRITE_ERRORS as exc:
            cause, _ = write_error_cause(exc)
            return [f"could not write the verdict store {store.path}: {cause}; the previous "
                    f"file, if any, is untouched: {write_error_fix(exc)}"]
        return []

    def kept_record(self, record: Record) -> Record:
        """What the run keeps of a question's record until its end.

        The retrieved chunk texts (a few KB a question: 300 MB over 100,000 questions)
        are read only by custom metrics: without any, the kept record drops them, and
        nothing the run writes shows them. The test report carries them only where
        they are read (:attr:`attach_whole_records`).
        """
        if not record.retrieved or self.plan.custom_metrics or self.options.answers_out:
            return record  # read by custom metrics, or written to the answers file
        return dataclasses.replace(record, retrieved=())

    @property
    def attach_whole_records(self) -> bool:
        """Whether each test report carries the whole record, retrieved chunk texts
        included: for ``--junitxml``, which writes them. (With custom metrics, which read
        them where the records are gathered, the kept record already holds them.) Also
        for ``--ragev-answers-out``, whose file the controller writes from the records."""
        return (bool(getattr(self.config.option, "xmlpath", None))
                or self.options.answers_out is not None)

    @property
    def score_items(self) -> bool:
        """Whether each question is scored when it is answered: for its ``-v`` line, its
        JUnit properties or its ``[item_thresholds]``."""
        option = self.config.option
        return bool(self.plan.item_thresholds) or option.verbose > 0 or bool(
            getattr(option, "xmlpath", None))

    @functools.cached_property
    def text_memo(self) -> TextScoreMemo | None:
        """The text metrics of pairs scored before, kept in the answer cache's database
        (``None`` without caches)."""
        store = self.defaults.text_score_store()
        return None if store is None else TextScoreMemo(
            store, profile=self.plan.profile, tokenizer=self.plan.tokenizer)

    @property
    def scorer(self) -> RecordScorer:
        """Scores the run's records once: while the run goes and at its end alike."""
        if self._scorer is None:
            # A worker's records are scored again on the controller: nothing to keep.
            self._scorer = RecordScorer(self.plan, self.dataset, remember=not self.is_worker,
                                        memo=self.text_memo, similarity=self.similarity)
        return self._scorer

    def _kb_phase(self, name: str | None, done: int, total: int) -> None:
        """The knowledge base's build, as the running report's phase (the controller's)."""
        if not self.is_worker:
            self.progress.phase(name, done, total)

    def _score(self, record: Record) -> Record:
        return self.scorer.score([record])[0]

    def _question_hash(self, qid: int) -> str | None:
        """The content hash of question ``qid`` (computed for the whole dataset once)."""
        return self.dataset.question_hashes.get(qid)

    def _cache_root(self) -> Path | None:
        """The plugin's folder in pytest's cache, made once; ``None``: run without caches.

        The caches are an optimisation: a ``.pytest_cache`` that is read-only or full
        (or not a folder) warns once, and every question is answered without them.
        """
        if self._cache_dir is None:
            cache_provider = getattr(self.config, "cache", None)
            root = None
            if cache_provider is not None:
                try:
                    root = Path(cache_provider.mkdir("ragev"))
                except OSError as exc:
                    where = exc.filename or "pytest's cache directory"
                    with contextlib.suppress(Exception):  # never fails a run, not under -W error
                        warnings.warn(CacheWarning(
                            f"ragev: the cache folder cannot be created ({where}: "
                            f"{exc.strerror or exc}); the knowledge-base and answer caches "
                            "are off for this run: make the folder writable, free space, or "
                            "pass -p no:cacheprovider"
                        ), stacklevel=2)
            self._cache_dir = (root,)
        return self._cache_dir[0]

    # -- activation
    def activate(self, session: pytest.Session) -> None:
        """Load the dataset and validate every setting, before any question runs."""
        self.records.bind(session)
        plan = self.plan
        try:
            self.defaults.validate([plan.settings(v) for v in plan.variants])
        except RagevError as exc:
            raise _usage(exc) from None
        if plan.options.update_baseline and not self.is_worker:
            check_baseline_target(plan.baseline_path, self.ragev.source)
        # A shard's share, now: a balance report that cannot be read is a usage error
        # before any question runs.
        self._pairs = self._select_pairs()
        if not self.is_worker:
            self.task_id = plan.options.task_id or make_task_id(
                self.dataset.dataset_id, task_user(self.ragev.task_user))
            pipelines = self._configured_pipelines()
            self._warnings = (*unused_builtin_knob_lines(
                [(plan.settings(variant), pipe) for variant, pipe in pipelines],
                source=self.ragev.source.name,
                overrides={v.name: v.pipeline for v in self.ragev.variants}),
                *same_as_base_lines([plan.settings(v) for v in plan.variants],
                                    source=self.ragev.source.name))
            if not self.config.option.collectonly:
                pairs = self.dataset.pairs
                check_services(pipelines, source=self.ragev.source,
                               first=pairs[0] if self.ragev.preflight and pairs else None,
                               cached=self._answer_is_cached)
                check_judge(self.judge, source=self.ragev.source,
                            preflight=self.ragev.preflight)
                check_answer_rows(pipelines, qids=self._all_qids,
                                  configurations=plan.configured, source=self.ragev.source)
                if self.samples is not None:
                    problem = self.samples.open()
                    if problem is not None:
                        raise pytest.UsageError(problem)
            self.signals.install()

    def _configured_pipelines(self) -> list[tuple[str | None, Pipeline]]:
        """The selected configurations' pipelines, unless the project's hooks answer."""
        if self.defaults.project.implements(ANSWER_HOOK):
            return []
        return [(variant, self.defaults.pipeline(self.plan.settings(variant)))
                for variant in self.plan.variants]

    def _pipeline_kind(self) -> PipelineKind:
        """What the default concurrency is chosen for (``pipelines.pipeline_kind``)."""
        return pipeline_kind([pipe for _, pipe in self._configured_pipelines()])

    def _answer_is_cached(self, variant: str | None, case: QAPair) -> bool:
        settings = self.plan.settings(variant)
        cache, key = self.defaults.answer_cache_entry(settings, case, self.dataset.fingerprint)
        return cache is not None and key is not None and cache.get(key) is not None

    def _unread_project_knobs(self) -> list[str]:
        """Knobs that the project's code (hooks, a factory) never read in this run."""
        return unread_knob_lines(
            variants=self.plan.variants,
            settings=self.plan.settings,
            overrides={v.name: v.pipeline for v in self.ragev.variants},
            reads=self.defaults.knob_reads,
            who=lambda variant: self.defaults.project.code(self.plan.settings(variant)),
            source=self.ragev.source.name,
        )

    def collection_plan(self) -> CollectionPlan:
        """What the collectors read."""
        return CollectionPlan(
            dataset_id=self.dataset.dataset_id,
            cases=self.pairs,
            variants=self.plan.variants,
            run_case=self.answerer.run_case,
        )

    # -- what the end of the run reads
    def _close_pipelines(self) -> None:
        """Release every pipeline: through the answerer (its knowledge bases first)
        when the run answered, else directly."""
        if self._answerer is not None:
            self._answerer.close()
        else:
            self.defaults.close()

    def params(self, variant: str | None) -> Mapping[str, Any]:
        """The settings snapshot of a configuration (memoised: it builds the pipeline)."""
        if variant not in self._params:
            settings = self.plan.settings(variant)
            self._params[variant] = run_params(
                self.plan, self.dataset, self.defaults.snapshot(settings), variant,
                answered_by=self.defaults.project.answered_by(settings),
            )
        return self._params[variant]

    def facts(self, interrupted: str | None = None) -> RunFacts:
        records = self.records
        return RunFacts(
            task_id=self.task_id, start_time=self.start_time, total=records.total,
            finished=records.finished, interrupted=interrupted,
            duplicates=records.duplicates, cache_hits=records.cache_hits,
            cache_misses=records.cache_misses, rootdir=str(self.config.rootpath),
            warnings=self._warnings, duration_s=time.monotonic() - self._started,
            notes=(self._answerer.note,) if self._answerer is not None
            and self._answerer.note is not None else (),
        )

    def inputs(self, interrupted: str | None) -> EvalInputs:
        """The values :func:`~pytest_ragev.evaluation.evaluate` reads, at session end."""
        # The records scored while the run went (running means, -v lines) keep their
        # metrics: each record is scored once.
        records, scored = self.scorer.carried(self.records.records)
        variants = {record.variant for record in records}
        facts = self.facts(interrupted)
        unread = self._unread_project_knobs()
        if unread:
            facts = dataclasses.replace(facts, warnings=(*facts.warnings, *unread))
        return EvalInputs(
            plan=self.plan,
            dataset=self.dataset,
            records=records,
            facts=facts,
            params={v: self.params(v) for v in self.plan.variants if v in variants},
            scored=scored,
            memo=self.text_memo,
            similarity=self.similarity,
            shard=self.shard_part(),
        )

    def _progress(self, status: int, err_msg: str) -> dict[str, Any]:
        running = None
        if status == STATUS_RUNNING:
            if self._running is None:
                self._running = RunningMeans(self.plan)
            new = self.records.since(self._running_seen)
            self._running_seen += len(new)
            # A misbehaving custom metric: the end of the run says so, in one line.
            with contextlib.suppress(RagevError):
                self._running.add(self.scorer.score(new))
            running = self._running.summary()
        return progress_report(self.facts(), dataset_id=self.dataset.dataset_id,
                               params=self.params(None), status=status, err_msg=err_msg,
                               running=running)

    def _error_record(self, key: QuestionKey, error: str) -> Record:
        variant, qid = key
        return self.answerer.error_record(self.cases[qid], variant, error)
