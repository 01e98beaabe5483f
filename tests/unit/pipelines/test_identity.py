"""What identifies a knowledge base and an answer: the pure functions behind the caches."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev.core.types import PipelineSettings
from pytest_ragev.pipelines import build_pipeline
from pytest_ragev.pipelines.identity import (
    answer_settings_key,
    cache_enabled,
    kb_identity,
    options_digest,
)


def settings(name: str = "builtin", variant: str | None = None, **options: object) -> PipelineSettings:
    return PipelineSettings(name=name, options=options, base_dir=Path("."), variant=variant)


def test_builtin_configurations_that_differ_only_in_retrieval_share_a_kb() -> None:
    base, k3 = settings(), settings(embedding_top_k=3, variant="k3")
    chunks = settings(chunk_size=128, variant="c128")
    key = kb_identity(base, build_pipeline(base))
    assert kb_identity(k3, build_pipeline(k3)) == key
    assert kb_identity(chunks, build_pipeline(chunks)) != key
    # Answers differ although the KB is shared.
    assert answer_settings_key(k3, build_pipeline(k3)) != answer_settings_key(base, build_pipeline(base))


def test_a_users_builder_shares_a_kb_only_between_identical_settings() -> None:
    a, b = settings("mine", top_k=3), settings("mine", top_k=4)
    assert kb_identity(a, None) == options_digest(a) != kb_identity(b, None)
    assert kb_identity(settings("mine", top_k=3, variant="v"), None) == kb_identity(a, None)
    assert options_digest(settings("mine", 问题="甲")) != options_digest(settings("mine", 问题="乙"))
    assert answer_settings_key(a, None).endswith(":" + options_digest(a))


@pytest.mark.parametrize(
    ("name", "no_cache", "configured", "user_answers", "expected"),
    [
        ("builtin", False, None, False, True),   # the built-in pipeline: cached by default
        ("builtin", True, None, False, False),   # --ragev-no-cache
        ("builtin", False, False, False, False),  # [run] cache = false
        ("builtin", False, None, True, False),   # a conftest answers: its code is unknown
        ("http", False, None, False, False),     # remote pipelines: opt in
        ("http", False, True, False, True),      # [run] cache = true
        ("mine", True, True, True, False),       # --ragev-no-cache wins over everything
    ],
)
def test_when_answers_are_cached(
    name: str, no_cache: bool, configured: bool | None, user_answers: bool, expected: bool
) -> None:
    assert cache_enabled(settings(name), no_cache=no_cache, configured=configured,
                         user_answers=user_answers) is expected
