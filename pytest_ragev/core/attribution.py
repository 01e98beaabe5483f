"""From what a pipeline retrieved to the passage ids the metrics score.

A pipeline may return passage ids, chunk texts, or chunk objects. Texts map to
passage ids against the *whole* corpus, in this order:

1. the normalised text equals a passage's normalised text;
2. a passage contains the chunk (the chunk was cut out of it);
3. the chunk contains a passage (a chunk that spans a short passage entirely).

When several passages match, relevance decides only between passages whose texts are
identical (duplicates in the corpus: the chunk is equally theirs). Otherwise the rule
never looks at relevance, which would let junk chunks score: a chunk of fewer than
:data:`AMBIGUOUS_MIN_CHARS` characters that several *different* passages contain
("in Paris", "The") is unattributable and counts as unmatched; any other multi-match
takes the smallest passage id (and, among that passage's duplicates, a relevant one).

Unlike the original, a chunk that maps to no passage keeps its rank as a
non-relevant entry: it gets a negative placeholder id (``-1``, ``-2``, ... in order of
first appearance), so precision, MRR and MAP see it. Ids are then deduplicated, the
first occurrence kept. The placeholders never collide with a real passage: the dataset
loader refuses negative passage ids, and so does :func:`retrieved_ids` for ids a
pipeline returns, so the two id spaces are disjoint.

Lookups go through a character k-gram index built on first use, not a scan per chunk;
chunks too short for the index (under ``K + STRIDE - 1`` characters) are searched in
the whole corpus, once per distinct text.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, SupportsInt

from pytest_ragev.core.types import Chunk, ChunkLike

_SPACE = re.compile(r"\s+")
#: k-gram length of the containment index, and the stride at which passages are sampled.
#: A chunk of at least K + STRIDE - 1 characters that lies inside a passage always covers
#: one sampled k-gram of it, so the index finds it; shorter chunks use the short path.
K = 12
STRIDE = 8
#: A chunk shorter than this that several different passages contain maps to no passage.
AMBIGUOUS_MIN_CHARS = 20
#: Which rule matched: exact text, passage contains chunk, chunk contains passage.
EXACT, INSIDE, SPANS = "exact", "inside", "spans"


def normalise(text: str) -> str:
    """Whitespace runs folded to one space, ends stripped: chunkers often trim or re-wrap."""
    return _SPACE.sub(" ", text).strip()


class PassageIndex:
    """Maps chunk texts to passage ids over one corpus. Thread-safe; built lazily."""

    def __init__(self, corpus: Mapping[int, str]) -> None:
        self._corpus = corpus
        self._lock = threading.Lock()
        self._built = False
        self._exact: dict[str, list[int]] = {}
        self._grams: dict[str, list[int]] = defaultdict(list)
        self._prefix: dict[str, list[int]] = defaultdict(list)
        self._short: dict[int, dict[str, list[int]]] = defaultdict(dict)
        self._texts: dict[int, str] = {}
        self._memo: dict[str, tuple[str, tuple[int, ...]]] = {}

    def _build(self) -> None:
        with self._lock:
            if self._built:
                return
            for pid, text in self._corpus.items():
                norm = normalise(text)
                self._texts[pid] = norm
                self._exact.setdefault(norm, []).append(pid)
                if len(norm) < K:
                    self._short[len(norm)].setdefault(norm, []).append(pid)
                    continue
                self._prefix[norm[:K]].append(pid)
                last = len(norm) - K
                for start in range(0, last + 1, STRIDE):
                    self._grams[norm[start : start + K]].append(pid)
                if last % STRIDE:
                    self._grams[norm[last:]].append(pid)
            self._built = True

    def match(self, text: str, relevant: Collection[int] = ()) -> int | None:
        """The passage id a chunk text maps to, or ``None`` (see the module docstring)."""
        norm = normalise(text)
        rule, candidates = self._lookup(norm)
        if not candidates:
            return None
        first = candidates[0]
        twins = [pid for pid in candidates if self._texts[pid] == self._texts[first]]
        if (rule == INSIDE and len(twins) < len(candidates)
                and len(norm) < AMBIGUOUS_MIN_CHARS):
            return None  # several different passages hold this short text: whose is it?
        return next((pid for pid in twins if pid in relevant), first)

    def _lookup(self, norm: str) -> tuple[str, tuple[int, ...]]:
        if not self._built:
            self._build()
        cached = self._memo.get(norm)
        if cached is not None:
            return cached
        found = self._find(norm)
        self._memo[norm] = found
        return found

    def _find(self, norm: str) -> tuple[str, tuple[int, ...]]:
        if not norm:
            return EXACT, ()
        exact = self._exact.get(norm)
        if exact:
            return EXACT, tuple(sorted(exact))
        containing = self._containing(norm)
        if containing:
            return INSIDE, containing
        return SPANS, self._contained(norm)

    def _containing(self, norm: str) -> tuple[int, ...]:
        """Passages that contain ``norm``, ascending."""
        if len(norm) < K + STRIDE - 1:
            # Too short to be sure to cover a sampled k-gram of the passage it lies in:
            # k-gram hits could name other passages and miss the right one. Search all.
            return self._scan(norm)
        candidates: set[int] = set()
        for start in range(len(norm) - K + 1):
            hits = self._grams.get(norm[start : start + K])
            if hits:
                candidates.update(hits)
        return tuple(sorted(pid for pid in candidates if norm in self._texts[pid]))

    def _scan(self, norm: str) -> tuple[int, ...]:
        """Every passage containing ``norm`` (about 50 ms per 100,000 passages; memoised)."""
        return tuple(sorted(pid for pid, text in self._texts.items() if norm in text))

    def _contained(self, norm: str) -> tuple[int, ...]:
        """Passages that ``norm`` contains entirely, ascending."""
        found: set[int] = set()
        for start in range(len(norm) - K + 1):
            for pid in self._prefix.get(norm[start : start + K], ()):
                if self._texts[pid] in norm:
                    found.add(pid)
        for length, table in self._short.items():
            for start in range(len(norm) - length + 1):
                hits = table.get(norm[start : start + length])
                if hits:
                    found.update(hits)
        return tuple(sorted(found))


def retrieved_ids(
    retrieved: Iterable[Any], *, index: PassageIndex, relevant: Sequence[int] = ()
) -> list[int]:
    """Passage ids for a pipeline's retrieved items, best first, deduplicated (first kept).

    Texts map through :meth:`PassageIndex.match`: ``relevant`` only breaks ties between
    passages with identical text. Unmatched chunks get negative placeholder ids so they
    keep their rank. ``retrieved`` must be a list (or another ordered collection) of
    items: a bare string, a mapping, a set or a non-iterable raise ``TypeError`` naming
    the fix; a negative passage id raises ``ValueError`` (those are the placeholders').
    """
    check_collection(retrieved)
    relevant_set = frozenset(relevant)
    ids: list[int] = []
    unmatched: dict[str, int] = {}
    for position, item in enumerate(retrieved):
        pid = _passage_id(item, position)
        if pid is None:
            text = item if isinstance(item, str) else item.text
            pid = index.match(text, relevant_set)
            if pid is None:
                key = normalise(text)
                pid = unmatched.setdefault(key, -(len(unmatched) + 1))
        ids.append(pid)
    return list(dict.fromkeys(ids))


_HOW = "a list of passage ids (int), chunk texts (str) or chunks (.text), best first"


def check_collection(retrieved: Any, name: str = "Answer.retrieved") -> None:
    """``TypeError`` for a ``retrieved`` that is not an ordered collection of items.

    Iterating a string would make one "chunk" per character (``"Paris"`` -> five
    chunks), a mapping would give its keys and a set has no rank order: all three are
    mistakes to report, not to score. ``name`` is what the message calls the value (the
    ``ragev_record`` fixture checks its ``retrieved`` argument before it copies it).
    """
    if isinstance(retrieved, str | bytes | bytearray):
        shown = retrieved if isinstance(retrieved, str) else retrieved.decode("utf-8", "replace")
        short = shown if len(shown) <= 40 else shown[:37] + "..."
        raise TypeError(
            f"{name} is the {type(retrieved).__name__} {short!r}, not a list; wrap "
            f"it: retrieved=[{short!r}] ({_HOW})"
        )
    if isinstance(retrieved, Mapping | set | frozenset):
        raise TypeError(
            f"{name} is {_a_type(retrieved)}, which has no rank order; give {_HOW}"
        )
    if not isinstance(retrieved, Iterable):
        raise TypeError(f"{name} is of type {type(retrieved).__name__}; give {_HOW}")


def _a_type(value: Any) -> str:
    """``value``'s type name with its article: "a dict", "an int64", "an OrderedDict"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeio' else 'a'} {name}"


def _real_id(pid: SupportsInt, where: str) -> int:
    # int(): numpy integers (FAISS returns them) become the plain ints a record carries.
    number = int(pid)
    if number < 0:
        raise ValueError(
            f"{where} is {number}, a negative passage id; passage ids are 0 or more (negative "
            "ids mark unmatched chunks), so return the dataset's id or the chunk text"
        )
    return number


def is_passage_id(item: Any) -> bool:
    """Whether ``item`` is a whole number taken as a passage id: an ``int`` or another
    :class:`numbers.Integral` (``numpy.int64``), never a ``bool``."""
    return isinstance(item, Integral) and not isinstance(item, bool)


def _passage_id(item: Any, position: int) -> int | None:
    # The common cases first, checked by exact type (a cached rerun maps ten items a
    # question): a plain id, and our own Chunk naming a plain id, need no other check.
    kind = type(item)
    if kind is int and item >= 0:
        return item  # type: ignore[no-any-return]
    if kind is Chunk and type(item.passage_id) is int and item.passage_id >= 0:
        return item.passage_id
    if isinstance(item, bool):
        raise TypeError(f"Answer.retrieved[{position}] is a bool; give a passage id or a chunk")
    if isinstance(item, int):
        return _real_id(item, f"Answer.retrieved[{position}]")
    if isinstance(item, str):
        return None
    # Our own Chunk first: a runtime Protocol check walks the protocol's attributes on
    # every call (about 20 us), which was a fifth of a cached 30k-question rerun.
    if type(item) is Chunk or isinstance(item, ChunkLike):
        pid = getattr(item, "passage_id", None)
        if pid is not None:
            if not is_passage_id(pid):
                raise TypeError(
                    f"Answer.retrieved[{position}].passage_id = {pid!r} is not a whole "
                    "number; give the passage's id as an int (or leave it None)"
                )
            return _real_id(pid, f"Answer.retrieved[{position}].passage_id")
        if not isinstance(item.text, str):
            raise TypeError(f"Answer.retrieved[{position}].text is not a str")
        return None
    if is_passage_id(item):  # numpy.int64 and the like: after the common types
        return _real_id(item, f"Answer.retrieved[{position}]")
    raise TypeError(
        f"Answer.retrieved[{position}] is {_a_type(item)}; give a passage id (int), "
        "a chunk text (str) or an object with .text (and optionally .passage_id)"
    )


#: Characters of an unattributed chunk kept as the run's example (the summary quotes it).
EXAMPLE_CHARS = 120


@dataclass(frozen=True)
class ChunkCount:
    """How many retrieved items of one answer went through text matching, and how many
    of them matched no corpus passage (``first``: the first such text, shortened)."""

    chunks: int = 0
    unattributed: int = 0
    first: str | None = None


def count_unattributed(retrieved: Iterable[Any], *, index: PassageIndex) -> ChunkCount:
    """Count the chunk texts of ``retrieved`` that :meth:`PassageIndex.match` cannot place.

    Only items attributed by their text count: chunk texts, and chunk objects without a
    ``passage_id``. Every position counts (a chunk retrieved twice is two chunks). It asks
    the index itself instead of reading placeholder ids, so it does not depend on how
    :func:`retrieved_ids` numbers unmatched chunks; the index memoises its lookups, so
    the second pass costs a dictionary look-up per chunk. Call it after
    :func:`retrieved_ids`, which rejects items of the wrong type.
    """
    chunks = unattributed = 0
    first: str | None = None
    for item in retrieved:
        kind = type(item)
        if kind is int or (kind is Chunk and item.passage_id is not None):
            continue  # the common cases first: placed by their id, not by text
        if isinstance(item, bool | int):
            continue
        if isinstance(item, str):
            text = item
        elif isinstance(item, Integral):  # a numpy integer id
            continue
        elif getattr(item, "passage_id", None) is None:
            text = item.text
        else:
            continue
        chunks += 1
        # Relevance only breaks ties between passages, never decides whether one matches.
        if index.match(text) is None:
            unattributed += 1
            if first is None:
                flat = normalise(text)
                first = (flat if len(flat) <= EXAMPLE_CHARS
                         else flat[: EXAMPLE_CHARS - 1].rstrip() + "…")
    return ChunkCount(chunks=chunks, unattributed=unattributed, first=first)
