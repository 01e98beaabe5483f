"""The built-in pipelines, plugged into the ``pytest_ragev_*`` hooks with ``trylast``.

A user's ``conftest.py`` implementations run first and win (``firstresult``); these
answer only when nobody else does. The answer cache is used for pipelines whose
answers are a function of their settings: the built-in one, or any pipeline when
``[run] cache = true``; never when a conftest hook answers, since its code cannot be
hashed, unless the user opts in.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import pytest_ragev
from pytest_ragev.core.types import Answer, PipelineSettings, QAPair

if TYPE_CHECKING:
    from pytest_ragev.pipelines import Pipeline
    from pytest_ragev.pipelines.answer_cache import AnswerCache
    from pytest_ragev.plugin.session import RagevSession


class BuiltinPipelines:
    """Builds and memoises one pipeline object per variant; implements the hooks last."""

    def __init__(self, session: RagevSession) -> None:
        self._session = session
        self._pipes: dict[str | None, Pipeline] = {}
        self._cache: AnswerCache | None = None
        self._cache_ready = False
        self._corpus_memo: tuple[Mapping[int, str], str] | None = None

    def pipeline(self, settings: PipelineSettings) -> Pipeline:
        pipe = self._pipes.get(settings.variant)
        if pipe is None:
            from pytest_ragev.pipelines import build_pipeline

            built = build_pipeline(settings, source=self._session.ragev.source)
            self._pipes[settings.variant] = pipe = built
        return pipe

    def validate(self, all_settings: Sequence[PipelineSettings]) -> None:
        """Build (validate) every selected pipeline up front: bad knobs fail before any item.

        When a conftest answers the questions, the ``[pipeline]`` table holds the user's
        own knobs, which only their hooks understand: nothing to validate here.
        """
        if self._user_implements("pytest_ragev_answer"):
            return
        for settings in all_settings:
            self.pipeline(settings)

    def snapshot(self, settings: PipelineSettings) -> dict[str, Any]:
        """The resolved knobs: the built-in pipeline's (with defaults) or the table as written."""
        if self._user_implements("pytest_ragev_answer"):
            return dict(settings.options)
        return dict(self.pipeline(settings).snapshot())

    def kb_identity(self, settings: PipelineSettings) -> str:
        """Variants whose KB-affecting knobs are equal share one knowledge base."""
        if self._builtin_builds_kb(settings):
            key = self.pipeline(settings).kb_key()
            if key is not None:
                return key
        # A user's builder may read any knob: only identical settings share a KB.
        return self._options_digest(settings)

    @staticmethod
    def _options_digest(settings: PipelineSettings) -> str:
        canonical = json.dumps(dict(settings.options), sort_keys=True, default=str)
        return hashlib.sha256(f"{settings.name}\0{canonical}".encode()).hexdigest()

    def _builtin_builds_kb(self, settings: PipelineSettings) -> bool:
        if self._user_implements("pytest_ragev_build_knowledge_base"):
            return False
        # A conftest answering for a pipeline of its own (name not "builtin"): a built-in
        # KB of its knobs would mean nothing. With name "builtin" it may use ours.
        return settings.name == "builtin" or not self._user_implements("pytest_ragev_answer")

    def _user_implements(self, hook_name: str) -> bool:
        caller = getattr(self._session.config.hook, hook_name)
        return any(impl.plugin is not self for impl in caller.get_hookimpls())

    def cache_enabled(self, settings: PipelineSettings) -> bool:
        session = self._session
        if session.options.no_cache:
            return False
        if session.ragev.cache is not None:
            return session.ragev.cache
        return settings.name == "builtin" and not self._user_implements("pytest_ragev_answer")

    def answer_cache_entry(
        self, settings: PipelineSettings, case: QAPair
    ) -> tuple[AnswerCache | None, str | None]:
        if not self.cache_enabled(settings):
            return None, None
        cache = self._answer_cache()
        if cache is None:
            return None, None
        from pytest_ragev.pipelines.answer_cache import answer_cache_key

        if self._user_implements("pytest_ragev_answer"):
            # A conftest pipeline (opted in with [run] cache = true): its knobs are all we know.
            answer_key = self._options_digest(settings)
        else:
            answer_key = self.pipeline(settings).answer_key()
        settings_key = f"{pytest_ragev.__version__}:{answer_key}"
        key = answer_cache_key(self._session.dataset.fingerprint, settings_key, case.qid)
        return cache, key

    def _answer_cache(self) -> AnswerCache | None:
        if not self._cache_ready:
            self._cache_ready = True
            cache_provider = getattr(self._session.config, "cache", None)
            if cache_provider is not None:
                from pytest_ragev.pipelines.answer_cache import AnswerCache

                self._cache = AnswerCache(Path(cache_provider.mkdir("ragev")) / "answers")
        return self._cache

    def kb_cache_dir(self) -> Path | None:
        cache_provider = getattr(self._session.config, "cache", None)
        if cache_provider is None or self._session.options.no_cache:
            return None
        return Path(cache_provider.mkdir("ragev")) / "kb"

    @pytest.hookimpl(trylast=True)
    def pytest_ragev_build_knowledge_base(
        self, corpus: Mapping[int, str], settings: PipelineSettings
    ) -> Any | None:
        if not self._builtin_builds_kb(settings):
            return None
        from pytest_ragev.pipelines.builtin import BuiltinPipeline

        pipe = self.pipeline(settings)
        if not isinstance(pipe, BuiltinPipeline):
            return None  # remote pipelines retrieve on their side
        return pipe.build_knowledge_base(
            corpus,
            fingerprint=self._corpus_fingerprint(corpus),
            cache_dir=self.kb_cache_dir(),
            progress=self._progress_printer(len(corpus)),
        )

    def _corpus_fingerprint(self, corpus: Mapping[int, str]) -> str:
        """The corpus-only fingerprint the KB is keyed on, computed once per corpus."""
        memo = self._corpus_memo
        if memo is None or memo[0] is not corpus:
            from pytest_ragev.dataset import corpus_fingerprint

            memo = self._corpus_memo = (corpus, corpus_fingerprint(corpus))
        return memo[1]

    @pytest.hookimpl(trylast=True)
    def pytest_ragev_answer(self, case: QAPair, kb: Any, settings: PipelineSettings) -> Answer:
        return self.pipeline(settings).answer(case, kb)

    def _progress_printer(self, total: int) -> Callable[[int, int], None] | None:
        # Only worth showing on large corpora, and only where a terminal shows it.
        if total < PROGRESS_MIN_PASSAGES:
            return None
        config = self._session.config
        if hasattr(config, "workerinput"):
            return None  # an xdist worker's output never reaches the terminal
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return None
        capture = config.pluginmanager.get_plugin("capturemanager")
        return KbProgress(reporter, capture, passages=total)

    def close(self) -> None:
        for pipe in self._pipes.values():
            pipe.close()
        self._pipes.clear()


#: Corpora with at least this many passages show the KB-build progress.
PROGRESS_MIN_PASSAGES = 20_000


class KbProgress:
    """The knowledge-base build progress, written past pytest's output capture.

    The KB is built inside the first item's call, where pytest captures output; the
    lines are written with capture suspended so they show without ``-s``. On a terminal
    one line is rewritten in place (every percent); elsewhere (CI logs, pipes) one line
    per quarter. The final line is written once, with the elapsed time.
    """

    def __init__(self, reporter: Any, capture: Any, *, passages: int) -> None:
        import time

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
            import time

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
