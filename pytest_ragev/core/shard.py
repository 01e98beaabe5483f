"""Which questions a shard of a run answers: ``--ragev-shard K/N``.

A question belongs to one shard out of ``N`` by a stable hash of its id
(:func:`shard_of`): never by its position, so adding or removing a question moves no
other question to another shard, and every process, machine and Python version
computes the same share. Every configuration (the base one and each variant) of a
question goes to the same shard, so a shard's report pairs its variants with its base
run as an unsharded run does.

With the per-question costs of an earlier run (the seconds its answers took), the
questions that have a cost are spread by *longest processing time first* instead: the
costliest question goes to the shard with the least work so far (ties to the lowest
shard), then the next. The result depends on the costs and the question ids alone, so
every shard of a run, given the same costs, computes the same assignment; a question
without a cost (one added since) still goes by its hash, and so moves no other.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import ConfigError

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
#: The salt of the shard hash: the same qid lands in unrelated shards for unrelated N.
_SALT = b"pytest-ragev shard 1\0"


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (1-based) of ``total``."""

    index: int
    total: int

    def __post_init__(self) -> None:
        if self.total < 1 or not 1 <= self.index <= self.total:
            raise ValueError(f"shard {self.index}/{self.total}: need 1 <= K <= N")

    @property
    def label(self) -> str:
        """``2/3``, as the option is written."""
        return f"{self.index}/{self.total}"

    @property
    def words(self) -> str:
        """``shard 2 of 3``, as the lines say it."""
        return f"shard {self.index} of {self.total}"

    @classmethod
    def parse(cls, text: str, *, where: str = "--ragev-shard") -> ShardSpec:
        """``"2/3"`` -> ``ShardSpec(2, 3)``; a one-line :class:`ConfigError` naming
        ``where`` and the fix otherwise."""
        match = _SPEC.match(text)
        fix = f"write K/N with 1 <= K <= N, e.g. {where} 1/3 for the first of three shards"
        if match is None:
            raise ConfigError(f"{where} {text!r} is not K/N; {fix}")
        index, total = int(match.group(1)), int(match.group(2))
        if total < 1 or not 1 <= index <= total:
            raise ConfigError(f"{where} {text!r}: shard {index} of {total} does not exist; {fix}")
        return cls(index, total)


def shard_of(qid: int, total: int) -> int:
    """The shard (1-based) that question ``qid`` belongs to out of ``total``: a hash of
    the qid alone (BLAKE2b of its decimal text), the same on every machine."""
    digest = hashlib.blake2b(_SALT + str(int(qid)).encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % total + 1


def costs_label(costs: Mapping[int, float]) -> str:
    """What a partial report records of the costs its assignment used: ``hash`` without
    any, else ``costs <16 hex digits>`` (a digest of the qid -> seconds pairs), so shards
    assigned from different costs are told apart when their reports are merged."""
    if not costs:
        return "hash"
    pairs = sorted((int(qid), float(cost)) for qid, cost in costs.items())
    return f"costs {sha256_json(pairs)[:16]}"


def assign(
    qids: Iterable[int], total: int, costs: Mapping[int, float] | None = None
) -> dict[int, int]:
    """qid -> its shard (1-based) for each of ``qids``.

    Without ``costs`` every question goes by :func:`shard_of`. With them, the questions
    that have a finite, non-negative cost are spread longest first onto the shard with
    the least cost so far (ties: the lower shard), and the rest go by :func:`shard_of`.
    """
    wanted = list(dict.fromkeys(int(qid) for qid in qids))
    known = {qid: float(costs[qid]) for qid in wanted
             if costs is not None and qid in costs
             and math.isfinite(float(costs[qid])) and float(costs[qid]) >= 0}
    shards = {qid: shard_of(qid, total) for qid in wanted if qid not in known}
    # (load so far, shard): the least loaded first, the lower shard on a tie.
    loads = [(0.0, index) for index in range(1, total + 1)]
    for qid in sorted(known, key=lambda q: (-known[q], q)):
        load, index = heapq.heappop(loads)
        shards[qid] = index
        heapq.heappush(loads, (load + known[qid], index))
    return {qid: shards[qid] for qid in wanted}


def owned(
    qids: Iterable[int], spec: ShardSpec, costs: Mapping[int, float] | None = None
) -> tuple[int, ...]:
    """The qids of ``qids`` that shard ``spec`` answers, in their given order."""
    shards = assign(qids, spec.total, costs)
    return tuple(qid for qid, index in shards.items() if index == spec.index)
