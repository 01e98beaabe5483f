"""Numbers, shares and lists as every report writes them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core import fmt


@pytest.mark.parametrize(("share", "text"), [
    (None, "n/a"), (0.0, "0%"), (0.001, "<1%"), (0.004, "<1%"), (0.005, "0%"),
    (0.52, "52%"), (0.995, "100%"), (0.996, ">99%"), (1.0, "100%"),
])
def test_percent_never_rounds_a_share_to_none_or_all(share: float | None, text: str) -> None:
    assert fmt.percent(share) == text


def test_listed_cuts_after_the_limit_and_counts_the_rest() -> None:
    assert fmt.listed([]) == ""
    assert fmt.listed([3, 1, 2]) == "3, 1, 2"
    assert fmt.listed(list(range(1, 23))) == (
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, … (2 more)")
    assert fmt.listed(["q1", "q2 [k10]", "q3"], 2) == "q1, q2 [k10], … (1 more)"


@given(st.lists(st.integers(), max_size=60), st.integers(min_value=1, max_value=30))
def test_listed_shows_at_most_limit_items_and_counts_every_other(items: list[int],
                                                                 limit: int) -> None:
    text = fmt.listed(items, limit)
    shown = text.split(", … (")[0]
    assert len([part for part in shown.split(", ") if part]) == min(len(items), limit)
    if len(items) > limit:
        assert text.endswith(f"({len(items) - limit} more)")
    else:
        assert "more)" not in text
