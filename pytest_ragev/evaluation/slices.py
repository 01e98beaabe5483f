"""Slices: the questions of a language or of a tag, with their own means.

Every question belongs to one language slice (``lang:<code>``) and to one slice per tag
(``tag:<name>``, from the optional ``tags`` column of ``queries.parquet``).
:func:`question_slices` names them for a dataset, :func:`slice_tables` adds up each
slice's means from the scored records (what every report shows), and
:func:`slice_threshold_results` checks ``[thresholds.slice.<name>]``. The gate tests the
slices' paired differences itself (:mod:`pytest_ragev.gate.slices`), from the slices
each record carries.

**How a question's language is told** (:func:`question_language`): a ``lang:<code>``
tag wins. Otherwise the letters of the question are counted by script: any kana with
Han or kana the most letters is Japanese (``ja``: Japanese writes Han between kana,
Chinese writes no kana); else the script with the most letters decides: Hangul ``ko``,
Han ``zh``, Cyrillic ``ru`` (``uk`` when the text holds one of the Ukrainian letters
і ї є ґ), and one language per other script (:data:`SCRIPT_LANGUAGES`: Greek ``el``,
Arabic ``ar``, Hebrew ``he``, Devanagari ``hi``, Thai ``th``, ...). A Latin-script
question is told by its stop words: the language whose Snowball stop list (the one the
built-in keyword analyzer uses) holds the most of its words, at least one, ties going
to the more widely used language (English, German, French, Spanish, Russian, Portuguese,
Italian, Dutch, ...). A Latin question with no stop word ("Python creator?"), and a
question with no letter at all, takes the language most of the dataset's questions were
told (English when none was): a bilingual English/Chinese set shows
``en`` and ``zh`` apart with no work, and a short question joins its dataset's language
instead of a slice of its own.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import regex

from pytest_ragev.core import fmt
from pytest_ragev.core.record import Record
from pytest_ragev.core.results import MetricSummary, RunResult
from pytest_ragev.core.types import QAPair
from pytest_ragev.dataset import LANG_PREFIX, Dataset
from pytest_ragev.gate.slices import slice_label
from pytest_ragev.gate.thresholds import MaxValue, MinValue, ThresholdResult
from pytest_ragev.pipelines.builtin.analyzers import DETECTION_ORDER, LANGUAGE_CODES
from pytest_ragev.pipelines.builtin.stopwords import STOPWORDS

#: The prefix of a language slice's key.
LANG_SLICE = "lang:"
#: The prefix of a tag slice's key.
TAG_SLICE = "tag:"
#: The language of a question no rule tells, when its dataset tells none either.
DEFAULT_LANGUAGE = "en"

#: Scripts whose letters are told one language each (ISO 639-1 codes).
SCRIPT_LANGUAGES: Mapping[str, str] = {
    "Greek": "el", "Arabic": "ar", "Hebrew": "he", "Devanagari": "hi", "Bengali": "bn",
    "Gurmukhi": "pa", "Gujarati": "gu", "Tamil": "ta", "Telugu": "te", "Kannada": "kn",
    "Malayalam": "ml", "Sinhala": "si", "Thai": "th", "Lao": "lo", "Khmer": "km",
    "Myanmar": "my", "Georgian": "ka", "Armenian": "hy", "Ethiopic": "am", "Tibetan": "bo",
}
_SCRIPTS = ("Han", "Kana", "Hangul", "Cyrillic", "Latin", *SCRIPT_LANGUAGES)
_SCRIPT_RUNS = regex.compile("|".join(
    f"(?P<{name}>[\\p{{Hiragana}}\\p{{Katakana}}]+)" if name == "Kana"
    else f"(?P<{name}>\\p{{{name}}}+)" for name in _SCRIPTS))
_LATIN_WORDS = regex.compile(r"\p{Latin}+")
_UKRAINIAN = frozenset("іїєґІЇЄҐ")
#: ISO 639-1 code of each language the stop-word rule can tell, in its tie order.
_STOP_ORDER = tuple(code for name in DETECTION_ORDER for code, snowball in
                    LANGUAGE_CODES.items() if snowball == name)
_STOP_CODES: dict[str, tuple[str, ...]] = {}
for _name, _code in zip(DETECTION_ORDER, _STOP_ORDER, strict=True):
    for _word in STOPWORDS[_name]:
        _STOP_CODES[_word] = (*_STOP_CODES.get(_word, ()), _code)
_RANK = {code: rank for rank, code in enumerate(_STOP_ORDER)}


#: One character per script of :data:`_SCRIPTS`, which a text is translated into.
_SYMBOLS = {name: chr(0x41 + index) for index, name in enumerate(_SCRIPTS)}
_NAMES = {symbol: name for name, symbol in _SYMBOLS.items()}


class _ScriptTable(dict[int, str | None]):
    """``str.translate``'s table: code point -> its script's symbol, ``None`` (dropped)
    for a character of no script of :data:`_SCRIPTS`. Each code point is looked up once
    and kept: a dataset has a few thousand distinct characters."""

    def __missing__(self, code: int) -> str | None:
        match = _SCRIPT_RUNS.fullmatch(chr(code))
        name = None if match is None else match.lastgroup
        symbol = None if name is None else _SYMBOLS[name]
        self[code] = symbol
        return symbol


_TABLE = _ScriptTable()
_ASCII_WORDS = re.compile(r"[a-z]+")


def _script_letters(text: str) -> dict[str, int]:
    """Letters per script (of :data:`_SCRIPTS`) in ``text``."""
    # In C: the text becomes one symbol per letter, and the symbols are counted.
    return {_NAMES[symbol]: times for symbol, times in Counter(text.translate(_TABLE)).items()}


def _latin_language(text: str) -> str | None:
    """The language of a Latin-script text by its stop words, or ``None`` (none found)."""
    if text.isascii():
        words = _ASCII_WORDS.findall(text.lower())
    else:
        words = [unicodedata.normalize("NFKC", match.group()).casefold()
                 for match in _LATIN_WORDS.finditer(text)]
    hits: dict[str, int] = {}
    for word in words:
        for code in _STOP_CODES.get(word, ()):
            hits[code] = hits.get(code, 0) + 1
    if not hits:
        return None
    return min(hits, key=lambda code: (-hits[code], _RANK[code]))


def question_language(text: str, tags: Sequence[str] = ()) -> str | None:
    """The language code of one question (see the module's doc); ``None`` when only its
    dataset can tell (a Latin question without a stop word, a question without letters).
    A ``lang:<code>`` tag wins."""
    for tag in tags:
        if tag.startswith(LANG_PREFIX):
            return tag[len(LANG_PREFIX):]
    if text.isascii():
        # The common case, without the script scan: ASCII letters are Latin.
        return _latin_language(text)
    counts = _script_letters(text)
    if not counts:
        return None
    kana = counts.get("Kana", 0)
    if kana and kana + counts.get("Han", 0) >= max(counts.values()):
        return "ja"
    script = max(counts, key=lambda name: (counts[name], -_SCRIPTS.index(name)))
    if script == "Hangul":
        return "ko"
    if script == "Han":
        return "zh"
    if script == "Cyrillic":
        return "ru" if _UKRAINIAN.isdisjoint(text) else "uk"
    if script == "Latin":
        return _latin_language(text)
    return SCRIPT_LANGUAGES.get(script)


def question_slices(pairs: Sequence[QAPair]) -> dict[int, tuple[str, ...]]:
    """Each question's slice keys: its language slice, then a slice per tag (the
    ``lang:`` tags set the language and make no slice of their own)."""
    told = [question_language(pair.question, pair.tags) for pair in pairs]
    counts: dict[str, int] = {}
    for code in told:
        if code is not None:
            counts[code] = counts.get(code, 0) + 1
    # A question only its dataset can tell joins the language most of the others were
    # told (ties: the stop-word rule's order, then by code).
    fallback = min(counts, key=lambda code: (-counts[code], _RANK.get(code, len(_RANK)),
                                             code)) if counts else DEFAULT_LANGUAGE
    # One tuple per distinct (language, tags): most questions share a few.
    made: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
    slices: dict[int, tuple[str, ...]] = {}
    for pair, code in zip(pairs, told, strict=True):
        language = code or fallback
        keys = made.get((language, pair.tags))
        if keys is None:
            keys = made[(language, pair.tags)] = (LANG_SLICE + language, *(
                TAG_SLICE + tag for tag in pair.tags if not tag.startswith(LANG_PREFIX)))
        slices[pair.qid] = keys
    return slices


@functools.lru_cache(maxsize=4)
def _cached_slices(fingerprint: str, pairs: tuple[QAPair, ...]) -> dict[int, tuple[str, ...]]:
    return question_slices(pairs)


def dataset_slices(dataset: Dataset) -> Mapping[int, tuple[str, ...]]:
    """:func:`question_slices` of a dataset, worked out once per dataset content (the
    run scores its records in batches, on every process that scores)."""
    return _cached_slices(dataset.fingerprint, dataset.pairs)


def slice_kind(key: str) -> str:
    """``lang`` or ``tag``: the kind of a slice key (``lang:zh``, ``tag:billing``)."""
    return key.split(":", 1)[0]


@dataclass(frozen=True)
class SliceSummary:
    """One slice of a run: its questions and each metric's mean over them.

    ``questions`` counts the run's questions in the slice (those that raised included);
    ``summary`` holds, per metric, the mean and ``n`` over the slice's questions that
    have it, in the run's report order.
    """

    key: str
    questions: int
    summary: dict[str, MetricSummary]

    @property
    def kind(self) -> str:
        """``lang`` or ``tag``."""
        return slice_kind(self.key)


@dataclass(frozen=True)
class RunSlices:
    """The slices of one run (``variant``), largest first, languages before tags.

    ``slices`` holds those with at least ``min_size`` questions; ``small`` names the
    others, with their question counts (left out of the tables and the gate).
    """

    variant: str | None
    slices: tuple[SliceSummary, ...] = ()
    small: tuple[tuple[str, int], ...] = ()
    min_size: int = 1

    @property
    def keys(self) -> list[str]:
        """The reported slices' keys."""
        return [item.key for item in self.slices]

    def get(self, key: str) -> SliceSummary | None:
        """The slice ``key``, if it is reported."""
        return next((item for item in self.slices if item.key == key), None)

    @property
    def worth_showing(self) -> bool:
        """Whether the slices say more than the run's own means: more than one slice,
        or a tag slice."""
        return len(self.slices) > 1 or any(item.kind == "tag" for item in self.slices)


def run_slices(run: RunResult, min_size: int) -> RunSlices:
    """The slices of ``run`` from the slice keys its records carry (none: no slices)."""
    members: dict[str, list[int]] = {}
    for index, sample in enumerate(run.samples):
        for key in sample.slices:
            members.setdefault(key, []).append(index)
    order = sorted(members, key=lambda key: (slice_kind(key) != "lang", -len(members[key]),
                                             key))
    kept: list[SliceSummary] = []
    small: list[tuple[str, int]] = []
    names = list(run.summary)
    for key in order:
        rows = members[key]
        if len(rows) < min_size:
            small.append((key, len(rows)))
            continue
        kept.append(SliceSummary(key=key, questions=len(rows),
                                 summary=_means([run.samples[i] for i in rows], run, names)))
    return RunSlices(variant=run.variant, slices=tuple(kept), small=tuple(small),
                     min_size=min_size)


def _means(samples: Sequence[Record], run: RunResult,
           names: Sequence[str]) -> dict[str, MetricSummary]:
    sums: dict[str, list[float]] = {name: [] for name in names}
    for sample in samples:
        if sample.error is not None:
            continue
        for name, value in sample.metrics.items():
            if name in sums:
                sums[name].append(value)
    return {
        name: MetricSummary(name=name, mean=math.fsum(values) / len(values) if values else None,
                            n=len(values), direction=run.summary[name].direction)
        for name, values in sums.items()
    }


def slice_tables(runs: Sequence[RunResult], min_size: int) -> tuple[RunSlices, ...]:
    """:func:`run_slices` of every run, in the runs' order."""
    return tuple(run_slices(run, min_size) for run in runs)


@dataclass(frozen=True)
class SliceThreshold:
    """``[thresholds.slice.<name>]``: floors (ceilings for a lower-is-better metric) on
    one slice's means. ``name`` is as written: a slice key (``lang:zh``) or a bare name
    (``zh``, ``billing``) that names one slice."""

    name: str
    checks: tuple[MinValue | MaxValue, ...] = ()


def resolve_slice(name: str, keys: Sequence[str]) -> tuple[str | None, str | None]:
    """The slice key a ``[thresholds.slice.<name>]`` table means (``lang:zh``, or a bare
    ``zh`` naming one slice), or the reason it names none."""
    if ":" in name:
        return (name, None) if name in keys else (None, "no question of the run is in it")
    found = [key for key in keys if key.split(":", 1)[-1] == name]
    if len(found) == 1:
        return found[0], None
    if found:
        return None, f"it names {' and '.join(found)}; write the whole key"
    return None, "no question of the run is in it"


def slice_threshold_results(
    run: RunResult, thresholds: Sequence[SliceThreshold]
) -> list[ThresholdResult]:
    """Every ``[thresholds.slice.<name>]`` check on ``run``'s slices (whatever their
    size). A table that names no slice of the run fails each of its checks, as a metric
    with no values fails its threshold."""
    if not thresholds:
        return []
    every = run_slices(run, 1)
    keys = every.keys
    results: list[ThresholdResult] = []
    for table in thresholds:
        key, problem = resolve_slice(table.name, keys)
        found = None if key is None else every.get(key)
        label = table.name if key is None else slice_label(key, keys)
        for check in table.checks:
            is_min = isinstance(check, MinValue)
            limit = check.minimum if isinstance(check, MinValue) else check.maximum
            summary = None if found is None else found.summary.get(check.metric)
            mean = None if summary is None else summary.mean
            n = 0 if summary is None else summary.n
            name = fmt.label(check.metric, run.variant)
            if found is None:
                reason: str | None = (f"ragev: [thresholds.slice.{table.name}] {check.metric} "
                                      f"= {fmt.num(limit)}: {problem} (slices: "
                                      f"{', '.join(keys) or 'none'})")
            elif mean is None:
                reason = (f"ragev: {label}: {name} has no values (n=0), threshold "
                          f"{fmt.num(limit)} unmet")
            elif (mean < limit) if is_min else (mean > limit):
                sign = "<" if is_min else ">"
                reason = (f"ragev: {label}: {name} {fmt.num(mean)} {sign} threshold "
                          f"{fmt.num(limit)} (n={n})")
            else:
                reason = None
            results.append(ThresholdResult(
                metric=check.metric, threshold=limit, kind="min" if is_min else "max",
                value=mean, n=n, variant=run.variant, reason=reason,
                slice=key or table.name))
    return results
