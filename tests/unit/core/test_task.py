"""Task ids as the original names evaluations."""

from __future__ import annotations

import re

from pytest_ragev.core.task import TASK_USER_ENV, make_task_id, task_user


def test_a_task_id_without_an_owner() -> None:
    assert re.fullmatch(r"evaluation_\d{13}_[0-9a-f]{8}_faq", make_task_id("faq"))


def test_a_task_id_names_its_owner_in_plain_characters() -> None:
    assert make_task_id("faq", 3, now_ms=1700000000000).startswith(
        "evaluation_3_1700000000000_")
    assert make_task_id("faq", "Zoë O'Neil/ci").startswith("evaluation_Zoë-O-Neil-ci_")
    assert make_task_id("faq", "").startswith("evaluation_unknown_")
    # Two ids made in the same millisecond differ.
    assert make_task_id("faq", now_ms=1) != make_task_id("faq", now_ms=1)


def test_the_owner_is_the_environment_name_first() -> None:
    assert task_user(False, {TASK_USER_ENV: " 王小明 "}) == "王小明"
    assert task_user(False, {}) is None
    assert task_user(True, {}) not in (None, "")
