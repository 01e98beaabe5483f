"""A deterministic conftest pipeline the end-to-end tests install with ``makeconftest``."""

from __future__ import annotations

import textwrap

#: A deterministic pipeline for the tests: retrieves the gold passages of odd
#: questions first, a distractor first for even ones, and answers with the reference.
ORACLE_CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return {"corpus": dict(corpus)}

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        quality = settings.options.get("quality", "good")
        if quality == "bad":
            return Answer(retrieved=[7, 6], text="I do not know.")
        retrieved = list(case.pids) if case.qid % 2 else [6, *case.pids]
        return Answer(retrieved=retrieved, text=case.answer or "")
    """
)
