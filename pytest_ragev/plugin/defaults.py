"""The built-in pipelines, plugged into the ``pytest_ragev_*`` hooks with ``trylast``.

A user's ``conftest.py`` implementations run first and win (``firstresult``); these
answer only when nobody else does. :class:`ProjectHooks` is the one place that finds
the project's implementations and names them (which code answers a configuration);
:class:`DefaultPipelineHooks` also knows which pipeline object serves a configuration,
whether its answers may be cached, and where the caches live; the identities
themselves are the pure functions of :mod:`pytest_ragev.pipelines.identity`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.knobs import untracked
from pytest_ragev.core.types import Answer, PipelineSettings, QAPair
from pytest_ragev.dataset import corpus_fingerprint
from pytest_ragev.evaluation import AnsweredBy
from pytest_ragev.pipelines import Pipeline, build_pipeline
from pytest_ragev.pipelines.answer_cache import AnswerCache, answer_cache_key
from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.identity import (
    answer_settings_key,
    cache_enabled,
    kb_identity,
    project_code_digest,
)
from pytest_ragev.pipelines.remote import FactoryPipeline
from pytest_ragev.plugin.knobs import KnobReads

#: The hooks whose implementations make a conftest pipeline's answers.
USER_HOOKS = ("pytest_ragev_answer", "pytest_ragev_build_knowledge_base")
#: The hook whose implementations answer the questions.
ANSWER_HOOK = "pytest_ragev_answer"

#: Corpora with at least this many passages show the KB-build progress.
PROGRESS_MIN_PASSAGES = 20_000

#: Makes the KB-build progress printer for a corpus of this many passages (or ``None``).
ProgressFactory = Callable[[int], "Callable[[int, int], None] | None"]


class ProjectHooks:
    """The project's implementations of the plugin's hooks, found and named in one place.

    Every implementation but the built-in one (``builtin``, the plugin object of
    :class:`DefaultPipelineHooks`) is the project's: a ``conftest.py``'s, another
    plugin's. Each is named by its file relative to ``root`` (the rootdir:
    ``eval/conftest.py``), a file outside it by its name, a plugin without a file by
    its plugin name. ``hook`` is pytest's hook relay.
    """

    def __init__(self, hook: Any, *, builtin: object, root: Path) -> None:
        self._hook = hook
        self._builtin = builtin
        self._root = root

    def implements(self, hook_name: str) -> bool:
        """Whether the project implements ``hook_name``."""
        caller = getattr(self._hook, hook_name)
        return any(impl.plugin is not self._builtin for impl in caller.get_hookimpls())

    def implementations(self, hook_name: str) -> list[Any]:
        """The project's implementations of ``hook_name``, in the order pytest calls them."""
        caller = getattr(self._hook, hook_name)
        return [impl for impl in reversed(caller.get_hookimpls())
                if impl.plugin is not self._builtin]

    def names(self, hook_name: str = ANSWER_HOOK) -> list[str]:
        """Where the project's implementations of ``hook_name`` live, in the order pytest
        calls them: ``["eval/conftest.py"]``."""
        found = []
        for impl in self.implementations(hook_name):
            path = getattr(impl.plugin, "__file__", None)
            if path is None:
                found.append(str(impl.plugin_name))
                continue
            try:
                found.append(Path(path).resolve().relative_to(self._root).as_posix())
            except ValueError:
                found.append(Path(path).name)
        return found

    def files(self) -> list[Path]:
        """The files of the project's implementations of :data:`USER_HOOKS` (the code
        whose digest keys a conftest pipeline's cached answers)."""
        return [Path(str(impl.plugin.__file__)) for name in USER_HOOKS
                for impl in self.implementations(name)
                if getattr(impl.plugin, "__file__", None)]

    def answered_by(self, settings: PipelineSettings) -> AnsweredBy:
        """Which code answers ``settings``' questions: the project's hooks (``conftest
        hooks (eval/conftest.py)``) or the configured pipeline (``builtin``,
        ``pkg.module:make``)."""
        where = self.names(ANSWER_HOOK)
        if not where:
            return AnsweredBy(settings.name)
        conftests = all(Path(w).name == "conftest.py" for w in where)
        return AnsweredBy(f"{'conftest hooks' if conftests else 'hooks'} ({', '.join(where)})",
                          hooks=True)

    def code(self, settings: PipelineSettings) -> str | None:
        """The project's code that answers ``settings``' questions, named as
        :meth:`answered_by` names it (its hooks, a factory's ``module:callable``), whose
        knob reads are recorded; ``None`` for the plugin's own pipelines, which check
        their knobs themselves."""
        answered = self.answered_by(settings)
        return answered.label if answered.hooks or ":" in answered.label else None


class DefaultPipelineHooks:
    """Builds and memoises one pipeline object per configuration; implements the hooks last.

    ``hook`` is the pytest hook relay (to see whether a conftest implements a hook),
    ``cache_root`` the plugin's folder in pytest's cache (``None``: no cache),
    ``source`` the config file errors name.
    """

    def __init__(
        self,
        *,
        hook: Any,
        source: Path,
        cache_root: Callable[[], Path | None],
        no_cache: bool,
        cache_setting: bool | None,
        progress: ProgressFactory,
        project_root: Path | None = None,
    ) -> None:
        self._project_root = project_root or source.parent
        #: The project's own implementations of the hooks, and their names.
        self.project = ProjectHooks(hook, builtin=self, root=self._project_root)
        self._code_memo: dict[str | None, str] = {}
        # The settings part of the answer-cache key, per variant: it hashes every resolved
        # knob, which cost 110 us a question on a cached 30k rerun when done per question.
        self._settings_key_memo: dict[str | None, str] = {}
        # The KB identity, per variant: a conftest pipeline's is a digest of every knob,
        # some 12 us a question when hashed per question (1.8% of a constant-answer run).
        self._kb_identity_memo: dict[str | None, str] = {}
        self._source = source
        self._cache_root = cache_root
        self._no_cache = no_cache
        self._cache_setting = cache_setting
        self._progress = progress
        self._pipes: dict[str | None, Pipeline] = {}
        # Guards the lazily made values below: --ragev-concurrency threads ask for them
        # at once (a cache made twice, or seen before it is made, loses answers).
        self._lazy = threading.RLock()
        self._cache: AnswerCache | None = None
        self._cache_ready = False
        # The corpus the last fingerprint was computed for (identity, not equality).
        self._corpus_memo: tuple[Mapping[int, str], str] | None = None
        #: The [pipeline] keys the project's code read (conftest hooks, a factory).
        self.knob_reads = KnobReads()
        self._kb_knobs_marked: set[str | None] = set()

    def pipeline(self, settings: PipelineSettings) -> Pipeline:
        """The pipeline object of ``settings`` (built and validated once per configuration).

        A factory (``name = "module:callable"``) gets settings whose reads are recorded
        (:meth:`handed`); the plugin's own pipelines check their knobs themselves.
        """
        with self._lazy:
            pipe = self._pipes.get(settings.variant)
            if pipe is None:
                factory = ":" in settings.name and settings.name not in ("builtin", "http")
                given = self.handed(settings) if factory else untracked(settings)
                pipe = build_pipeline(given, source=self._source)
                self._pipes[settings.variant] = pipe
            return pipe

    def handed(self, settings: PipelineSettings) -> PipelineSettings:
        """``settings`` as the project's code gets them: ``options`` record each key read."""
        return self.knob_reads.track(settings)

    def kb_used(self, settings: PipelineSettings) -> None:
        """A conftest answers from the built-in pipeline's knowledge base: its knobs that
        shape the KB were read (by the plugin, for the conftest)."""
        if settings.variant in self._kb_knobs_marked:
            return
        self._kb_knobs_marked.add(settings.variant)
        if self.project.implements(ANSWER_HOOK) and self._builtin_builds_kb(settings):
            pipe = self.pipeline(settings)
            if isinstance(pipe, BuiltinPipeline):
                self.knob_reads.mark(settings.variant, (*pipe.config.kb_knobs(), "retrieval"))

    def validate(self, all_settings: Sequence[PipelineSettings]) -> None:
        """Build (validate) every selected pipeline up front: bad knobs fail before any item.

        When a conftest answers the questions, the ``[pipeline]`` table holds the user's
        own knobs, which only their hooks understand: nothing to validate here.
        """
        if self.project.implements(ANSWER_HOOK):
            return
        for settings in all_settings:
            self.pipeline(settings)

    def snapshot(self, settings: PipelineSettings) -> dict[str, Any]:
        """The resolved knobs: the built-in pipeline's (with defaults) or the table as written."""
        if self.project.implements(ANSWER_HOOK):
            return dict(settings.options)
        return dict(self.pipeline(settings).snapshot())

    def _builtin_builds_kb(self, settings: PipelineSettings) -> bool:
        if self.project.implements("pytest_ragev_build_knowledge_base"):
            return False
        # A conftest answering for a pipeline of its own (name not "builtin"): a built-in
        # KB of its knobs would mean nothing. With name "builtin" it may use ours.
        return settings.name == "builtin" or not self.project.implements(ANSWER_HOOK)

    def kb_identity(self, settings: PipelineSettings) -> str:
        """Configurations whose KB-affecting knobs are equal share one knowledge base
        (computed once per configuration of the run)."""
        known = self._kb_identity_memo.get(settings.variant)
        if known is None:
            builder = self.pipeline(settings) if self._builtin_builds_kb(settings) else None
            known = self._kb_identity_memo[settings.variant] = kb_identity(settings, builder)
        return known

    # -- caches
    def answer_cache_entry(
        self, settings: PipelineSettings, case: QAPair, dataset_fingerprint: str,
        repeat: int = 0,
    ) -> tuple[AnswerCache | None, str | None]:
        """The answer cache and the key of ``case``'s answer (its answer number
        ``repeat + 1`` with ``--ragev-repeat``), or ``(None, None)``."""
        user_answers = self.project.implements(ANSWER_HOOK)
        pipe = None if user_answers else self.pipeline(settings)
        remote_model = isinstance(pipe, BuiltinPipeline) and pipe.config.chat_model != "extractive"
        if not cache_enabled(settings, no_cache=self._no_cache, configured=self._cache_setting,
                             user_answers=user_answers, remote_model=remote_model):
            return None, None
        cache = self._answer_cache()
        if cache is None:
            return None, None
        settings_key = self._settings_key_memo.get(settings.variant)
        if settings_key is None:
            settings_key = answer_settings_key(settings, pipe, code=self._user_code(pipe))
            self._settings_key_memo[settings.variant] = settings_key
        return cache, answer_cache_key(dataset_fingerprint, settings_key, case.qid, repeat)

    def _user_code(self, pipe: Pipeline | None) -> str:
        """The digest of the project code that answers (a conftest's hooks, a factory's
        module, with the project modules they import); empty for the built-in pipeline,
        whose own key covers its code. Computed once: the code cannot change mid-run."""
        if pipe is not None and not isinstance(pipe, FactoryPipeline):
            return ""
        memo_key = None if pipe is None else pipe.name
        with self._lazy:
            return self._code_digest(pipe, memo_key)

    def _code_digest(self, pipe: FactoryPipeline | None, memo_key: str | None) -> str:
        if memo_key not in self._code_memo:
            if pipe is None:
                files = self.project.files()
            else:
                files = [pipe.source_file] if pipe.source_file is not None else []
            self._code_memo[memo_key] = project_code_digest(files, self._project_root)
        return self._code_memo[memo_key]

    def _answer_cache(self) -> AnswerCache | None:
        with self._lazy:
            if not self._cache_ready:
                root = self._cache_root()
                if root is not None:
                    self._cache = AnswerCache(root / "answers")
                self._cache_ready = True
            return self._cache

    def text_score_store(self) -> AnswerCache | None:
        """Where the text metrics of scored pairs are kept between runs: the answer
        cache's database, unless ``--ragev-no-cache`` or ``[run] cache = false``."""
        if self._no_cache or self._cache_setting is False:
            return None
        return self._answer_cache()

    def kb_cache_dir(self) -> Path | None:
        """Where built knowledge bases are cached (``None``: nowhere)."""
        if self._no_cache:
            return None
        root = self._cache_root()
        return None if root is None else root / "kb"

    # -- the hooks, last
    @pytest.hookimpl(trylast=True)
    def pytest_ragev_build_knowledge_base(
        self, corpus: Mapping[int, str], settings: PipelineSettings
    ) -> Any | None:
        if not self._builtin_builds_kb(settings):
            return None
        pipe = self.pipeline(settings)
        if not isinstance(pipe, BuiltinPipeline):
            return None  # remote pipelines retrieve on their side
        return pipe.build_knowledge_base(
            corpus,
            fingerprint=self._corpus_fingerprint(corpus),
            cache_dir=self.kb_cache_dir(),
            progress=self._progress(len(corpus)),
        )

    def _corpus_fingerprint(self, corpus: Mapping[int, str]) -> str:
        """The corpus-only fingerprint the KB is keyed on, computed once per corpus."""
        memo = self._corpus_memo
        if memo is None or memo[0] is not corpus:
            memo = self._corpus_memo = (corpus, corpus_fingerprint(corpus))
        return memo[1]

    @pytest.hookimpl(trylast=True)
    def pytest_ragev_answer(
        self, case: QAPair, kb: Any, settings: PipelineSettings, repeat: int
    ) -> Answer | None:
        if self.project.implements(ANSWER_HOOK):
            # pluggy calls this one only when every conftest implementation returned
            # None: that is the conftest's error for this question, not a cue for the
            # built-in pipeline to answer it (metrics from two pipelines, exit 0).
            return None
        return self.pipeline(settings).answer(case, kb)

    def close(self) -> None:
        """Release every pipeline's models and clients."""
        for pipe in self._pipes.values():
            pipe.close()
        self._pipes.clear()


class KbProgress:
    """The knowledge-base build progress, written past pytest's output capture.

    The KB is built inside the first item's call, where pytest captures output; the
    lines are written with capture suspended so they show without ``-s``. On a terminal
    one line is rewritten in place (every percent); elsewhere (CI logs, pipes) one line
    per quarter. The final line is written once, with the elapsed time.
    """

    def __init__(self, reporter: Any, capture: Any, *, passages: int) -> None:
        self._reporter = reporter
        self._capture = capture
        self._passages = passages
        self._tty = bool(reporter.isatty)
        self._started = time.perf_counter()
        self._shown = -1  # the last percent (tty) or quarter (plain) written
        self._done = False

    def __call__(self, done: int, of: int) -> None:
        if self._done:
            return
        if done >= of:
            self._done = True
            elapsed = time.perf_counter() - self._started
            self._write(f"ragev: knowledge base built from {self._passages} passages "
                        f"in {elapsed:.1f} s", final=True)
            return
        percent = 100 * done // max(of, 1)
        step = percent if self._tty else percent // 25
        if step == self._shown:
            return
        self._shown = step
        if done == 0:
            line = f"ragev: building knowledge base of {self._passages} passages ..."
        else:
            line = f"ragev: building knowledge base of {self._passages} passages: {percent}%"
        self._write(line, final=False)

    def _write(self, line: str, final: bool) -> None:
        suspended = (self._capture.global_and_fixture_disabled() if self._capture is not None
                     else contextlib.nullcontext())
        with suspended:
            if self._tty:
                self._reporter.ensure_newline()
                self._reporter.rewrite(line, erase=True)
                if final:
                    self._reporter.line("")
            else:
                self._reporter.write_line(line)
            self._reporter.flush()


def kb_progress_factory(
    config: pytest.Config, phase: Callable[[str | None, int, int], None] | None = None,
) -> ProgressFactory:
    """KB-build progress for ``config``: printed on the terminal for corpora of at least
    :data:`PROGRESS_MIN_PASSAGES` (not on xdist workers), and told to ``phase`` for every
    corpus (``phase("building_kb", done, total)``, ``phase(None, ...)`` once built)."""
    def make(passages: int) -> Callable[[int, int], None] | None:
        printer = _printer(passages)
        if phase is None:
            return printer

        def both(done: int, of: int) -> None:
            phase("building_kb" if done < of else None, done, of)
            if printer is not None:
                printer(done, of)

        return both

    def _printer(passages: int) -> Callable[[int, int], None] | None:
        if passages < PROGRESS_MIN_PASSAGES:
            return None
        if hasattr(config, "workerinput"):
            return None  # an xdist worker's output never reaches the terminal
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return None
        capture = config.pluginmanager.get_plugin("capturemanager")
        return KbProgress(reporter, capture, passages=passages)

    return make
