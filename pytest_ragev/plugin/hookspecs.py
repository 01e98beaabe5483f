"""The ``pytest_ragev_*`` hooks a user's ``conftest.py`` can implement.

Implementations in a conftest take precedence over the built-in pipeline, which
registers its own implementations with ``trylast=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pluggy

from pytest_ragev.core.types import Answer, CustomMetric, PipelineSettings, QAPair

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_ragev_build_knowledge_base(
    corpus: Mapping[int, str], settings: PipelineSettings
) -> Any | None:
    """Build the evaluation knowledge base from the whole corpus, once per KB settings.

    Called synchronously before the first question. Return any object: it is passed
    to :func:`pytest_ragev_answer` as ``kb`` and to the ``ragev_kb`` fixture. If it has
    a ``close()`` method, it is called when the KB is torn down (after
    :func:`pytest_ragev_teardown_knowledge_base`).

    Example::

        @pytest.hookimpl
        def pytest_ragev_build_knowledge_base(corpus, settings):
            return MyIndex(corpus.items(), chunk_size=settings.options.get("chunk_size", 512))
    """


@hookspec
def pytest_ragev_teardown_knowledge_base(kb: Any, settings: PipelineSettings) -> None:
    """Clean up a knowledge base built by :func:`pytest_ragev_build_knowledge_base`.

    Called once the last question has been answered, before the end of the run scores
    and writes the reports (at session finish when the run was interrupted).
    """


@hookspec(firstresult=True)
def pytest_ragev_answer(
    case: QAPair, kb: Any, settings: PipelineSettings, repeat: int
) -> Answer | None:
    """Answer one question: retrieve (and optionally rerank), then generate.

    Called from a worker thread when ``--ragev-concurrency`` > 1, so it must be
    thread-safe. Raise to fail the question: it is counted and excluded from the means.
    With ``--ragev-repeat R`` it is called R times per question, ``repeat`` being 0 to
    R - 1 (always 0 without it); an implementation that does not name ``repeat`` does
    not get it.

    Example::

        @pytest.hookimpl
        def pytest_ragev_answer(case, kb, settings):
            hits = kb.search(case.question, top_k=5)
            return Answer(retrieved=[h.passage_id for h in hits], text=llm(case.question, hits))
    """


@hookspec
def pytest_ragev_metrics() -> Sequence[CustomMetric]:
    """Extra metrics, scored, reported and usable in ``[thresholds]`` like the twelve.

    Example::

        @pytest.hookimpl
        def pytest_ragev_metrics():
            return [CustomMetric("short_answer", lambda m: float(len(m.generated_text) < 200))]
    """
    return ()


@hookspec(firstresult=True)
def pytest_ragev_tokenizer() -> Callable[[str], list[list[str]]] | None:
    """Replace the text metrics' tokenizer (``text -> sentences of tokens``).

    Wins over ``[metrics] tokenizer``. Its identity (``custom <module>:<name>``, plus the
    version of the package it comes from) is recorded in the report and the baseline,
    so change its name when you change what it does.

    Example (whitespace tokens, one sentence per line)::

        @pytest.hookimpl
        def pytest_ragev_tokenizer():
            return lambda text: [line.split() for line in text.splitlines()]
    """


@hookspec
def pytest_ragev_report(report: dict[str, Any]) -> None:
    """Amend the JSON report (the ``EvaluationDetail`` dict) before it is written."""
