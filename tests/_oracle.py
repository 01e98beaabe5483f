"""A deterministic conftest pipeline the end-to-end tests install with ``makeconftest``."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

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


def set_quality(config: Path, quality: str, *, variant: bool = False) -> None:
    """Set the oracle's ``quality`` option in ``config`` (a ``make_project`` ragev.toml).

    By default in the base ``[pipeline]`` table: an existing ``quality`` line is changed,
    or one is added after ``name = "oracle"``. With ``variant`` every ``pipeline.quality``
    of the ``[[variants]]`` tables is changed instead. Fails when there is nothing to set.
    """
    text = config.read_text(encoding="utf-8")
    base, marker, variants = text.partition("[[variants]]")
    if variant:
        variants, count = re.subn(r'(?m)^pipeline\.quality = "[^"]*"$',
                                  f'pipeline.quality = "{quality}"', variants)
    else:
        base, count = re.subn(r'(?m)^quality = "[^"]*"$', f'quality = "{quality}"', base)
        if not count and 'name = "oracle"\n' in base:
            base, count = base.replace('name = "oracle"\n',
                                       f'name = "oracle"\nquality = "{quality}"\n', 1), 1
    assert count, f"{config}: no {'variant ' if variant else ''}quality to set:\n{text}"
    config.write_text(base + marker + variants, encoding="utf-8")
