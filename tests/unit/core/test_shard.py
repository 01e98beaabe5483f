"""Which shard answers a question: stable under dataset edits, balanced, parsed in one line."""

from __future__ import annotations

import hashlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.shard import ShardSpec, assign, costs_label, owned, shard_of

qid_sets = st.sets(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=200)
totals = st.integers(min_value=1, max_value=64)


@given(qids=qid_sets, added=st.integers(min_value=0, max_value=10**12), total=totals)
def test_adding_a_question_moves_no_other(qids: set[int], added: int, total: int) -> None:
    before = assign(sorted(qids), total)
    after = assign([*sorted(qids), added], total)
    assert {qid: after[qid] for qid in before} == before


@given(qids=qid_sets, total=totals)
def test_removing_a_question_or_reordering_moves_no_other(qids: set[int], total: int) -> None:
    ordered = sorted(qids)
    whole = assign(ordered, total)
    assert assign(list(reversed(ordered)), total) == whole
    assert assign(ordered[1:], total) == {qid: whole[qid] for qid in ordered[1:]}


@given(qids=qid_sets, total=totals)
def test_the_shards_partition_the_questions(qids: set[int], total: int) -> None:
    shares = [owned(sorted(qids), ShardSpec(index, total)) for index in range(1, total + 1)]
    assert sorted(q for share in shares for q in share) == sorted(qids)
    assert all(1 <= shard_of(qid, total) <= total for qid in qids)


def test_the_hash_is_fixed_across_machines_and_versions() -> None:
    # Written down once: a change here reshuffles every sharded CI run in the world.
    assert [shard_of(qid, 3) for qid in range(1, 13)] == [1, 1, 2, 2, 3, 3, 3, 3, 1, 2, 2, 1]
    assert [shard_of(qid, 7) for qid in (1, 2, 3, 1000, 10**9)] == [4, 3, 5, 5, 6]
    assert [shard_of(qid, 7) for qid in (1, 2, 3, 1000, 10**9)] == \
        [_reference(qid, 7) for qid in (1, 2, 3, 1000, 10**9)]


def _reference(qid: int, total: int) -> int:
    """The documented rule, written again: BLAKE2b-64 of the salt and the decimal qid."""
    digest = hashlib.blake2b(b"pytest-ragev shard 1\0" + str(qid).encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") % total + 1


def test_a_large_run_spreads_evenly() -> None:
    counts = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    for qid in range(100_000):
        counts[shard_of(qid, 10) - 1] += 1
    assert all(abs(count - 10_000) < 400 for count in counts), counts


@given(costs=st.dictionaries(st.integers(min_value=0, max_value=10**6),
                             st.floats(min_value=0, max_value=100), min_size=1, max_size=80),
       total=st.integers(min_value=1, max_value=8))
def test_balanced_shards_stay_within_the_costliest_question(
    costs: dict[int, float], total: int
) -> None:
    shards = assign(sorted(costs), total, costs)
    loads = [sum(cost for qid, cost in costs.items() if shards[qid] == index)
             for index in range(1, total + 1)]
    # Longest processing time first: no shard exceeds the lightest by more than one
    # question's cost (the last one placed on it).
    assert max(loads) - min(loads) <= max(costs.values()) + 1e-9
    assert assign(list(reversed(sorted(costs))), total, dict(costs)) == shards


def test_a_question_without_a_cost_goes_by_its_hash() -> None:
    costs = {1: 5.0, 2: 4.0, 3: 3.0, 4: math.nan, 5: -1.0}
    shards = assign([1, 2, 3, 4, 5, 6], 2, costs)
    assert shards[1] == 1 and shards[2] == 2 and shards[3] == 2
    assert [shards[4], shards[5], shards[6]] == [shard_of(4, 2), shard_of(5, 2), shard_of(6, 2)]
    assert costs_label({}) == "hash"
    assert costs_label({1: 1.0, 2: 2.0}) == costs_label({2: 2.0, 1: 1.0})
    assert costs_label({1: 1.0}).startswith("costs ") and \
        costs_label({1: 1.0}) != costs_label({1: 1.5})


def test_parse() -> None:
    assert ShardSpec.parse("2/3") == ShardSpec(2, 3)
    assert ShardSpec.parse(" 1 / 1 ").words == "shard 1 of 1"
    assert ShardSpec(2, 3).label == "2/3"
    for text in ("0/3", "4/3", "1/0", "a/b", "2", "-1/3"):
        with pytest.raises(ConfigError, match=r"write K/N with 1 <= K <= N") as caught:
            ShardSpec.parse(text, where="ini key ragev_shard =")
        assert "\n" not in str(caught.value) and "ragev_shard" in str(caught.value)
    with pytest.raises(ValueError):
        ShardSpec(0, 2)
