"""The public API of the metric engine: options, bad input, aggregation, lazy loading."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from enum import IntEnum

import numpy as np
import pytest

import pytest_ragev
from pytest_ragev import (
    GENERATION_METRICS,
    METRIC_NAMES,
    RETRIEVAL_METRICS,
    MetricInput,
    aggregate,
    score,
)
from pytest_ragev.core.results import MetricSummary
from pytest_ragev.metrics import Tokenizer, tokenize

SAMPLE = MetricInput([[1, 2, 3]], [2, 5, 1, 3], "The cat sat on the mat.", "The cat is on the mat.")


def test_lazy_reexports_are_the_engine() -> None:
    import pytest_ragev.metrics as metrics

    assert pytest_ragev.score is metrics.score
    assert pytest_ragev.aggregate is metrics.aggregate


def test_importing_the_package_loads_no_heavy_module() -> None:
    code = textwrap.dedent(
        """
        import sys
        import pytest_ragev
        heavy = {"numpy", "pyarrow", "jieba", "regex"} & set(sys.modules)
        assert not heavy, heavy
        from pytest_ragev import MetricInput, score
        score([MetricInput([[1]], [1], "an answer", "the answer")])
        assert "jieba" not in sys.modules  # English text needs no segmenter
        score([MetricInput([[1]], [1], "今天天气很好", "天气很好")])
        assert "jieba" in sys.modules
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_metrics_selects_and_orders_the_keys() -> None:
    row = score([SAMPLE], metrics=["rougel", "precision", "bleu1"])[0]
    assert list(row) == ["precision", "bleu1", "rougel"]
    assert list(score([SAMPLE], metrics=GENERATION_METRICS)[0]) == list(GENERATION_METRICS)
    full = score([SAMPLE])[0]
    assert list(full) == list(METRIC_NAMES)
    for half in (RETRIEVAL_METRICS, GENERATION_METRICS):
        assert score([SAMPLE], metrics=half)[0] == {name: full[name] for name in half}
    assert score([SAMPLE], metrics=[]) == [{}]


def test_a_half_that_is_not_asked_for_is_not_validated() -> None:
    no_texts = MetricInput([[1]], [1], None, None)  # type: ignore[arg-type]
    assert score([no_texts], metrics=RETRIEVAL_METRICS)[0]["precision"] == 1.0
    no_ids = MetricInput(None, None, "a", "a")  # type: ignore[arg-type]
    assert score([no_ids], metrics=["bleu1"])[0]["bleu1"] == 1.0


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="profile: unknown profile 'trec'"):
        score([SAMPLE], profile="trec")
    with pytest.raises(ValueError, match="metrics: unknown metric 'bleu3'"):
        score([SAMPLE], metrics=["bleu3"])
    with pytest.raises(TypeError, match=r"metrics=\['bleu1'\]"):
        score([SAMPLE], metrics="bleu1")
    with pytest.raises(TypeError, match="wrap a single sample in a list"):
        score(SAMPLE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tokenizer: expected a callable"):
        score([SAMPLE], tokenizer="jieba")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        ({"retrieval_ids": [1]}, r"inputs\[1\]: expected a MetricInput, got dict"),
        (MetricInput([[1]], [1, True], "", ""), r"inputs\[1\]\.retrieval_ids\[1\]: .* got bool"),
        (MetricInput([[1]], [1.0], "", ""), r"inputs\[1\]\.retrieval_ids\[0\]: .* got float"),
        (MetricInput([[1]], ["7"], "", ""), r"inputs\[1\]\.retrieval_ids\[0\]: .* got str '7'"),
        (MetricInput([[1]], {1, 2}, "", ""), r"inputs\[1\]\.retrieval_ids: .* got set"),  # type: ignore[arg-type]
        (MetricInput([1, 2], [1], "", ""), r"inputs\[1\]\.retrieval_gt\[0\]: .*\[\[1, 2\]\]"),  # type: ignore[list-item]
        (MetricInput("12", [1], "", ""), r"inputs\[1\]\.retrieval_gt: .* got str"),  # type: ignore[arg-type]
        (MetricInput([[1, None]], [1], "", ""), r"inputs\[1\]\.retrieval_gt\[0\]: .* NoneType"),  # type: ignore[list-item]
        # Nested lists: numpy would read them as a 2-d or ragged array, not as ids.
        (MetricInput([[1]], [[1]], "", ""), r"inputs\[1\]\.retrieval_ids\[0\]: .* got list \[1\]"),  # type: ignore[list-item]
        (MetricInput([[1, 2]], [[1, 2], [3, 4]], "", ""), r"inputs\[1\]\.retrieval_ids\[0\]: .* got list"),  # type: ignore[list-item]
        (MetricInput([[1]], [1, [2, 3]], "", ""), r"inputs\[1\]\.retrieval_ids\[1\]: .* got list \[2, 3\]"),  # type: ignore[list-item]
        (MetricInput([[1]], [(1,)], "", ""), r"inputs\[1\]\.retrieval_ids\[0\]: .* got tuple"),  # type: ignore[list-item]
        (MetricInput([[[1], [2]]], [1, 2], "", ""), r"inputs\[1\]\.retrieval_gt\[0\]: .* got list \[1\]"),  # type: ignore[list-item]
        (MetricInput([[1, [2, 3]]], [1], "", ""), r"inputs\[1\]\.retrieval_gt\[0\]: .* got list \[2, 3\]"),  # type: ignore[list-item]
        (MetricInput([[1]], [1], None, ""), r"inputs\[1\]\.generated_text: expected str, got NoneType"),  # type: ignore[arg-type]
        (MetricInput([[1]], [1], "", b"x"), r"inputs\[1\]\.generated_gt: expected str, got bytes"),  # type: ignore[arg-type]
    ],
)  # fmt: skip
def test_bad_samples_are_named_by_index_and_field(sample: object, message: str) -> None:
    good = MetricInput([[1]], [1], "a", "a")
    with pytest.raises(TypeError, match=message):
        score([good, sample, good])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        (MetricInput([[1]], [[1]], "", ""), r"inputs\[0\]\.retrieval_ids\[0\]: .* got list"),  # type: ignore[list-item]
        (MetricInput([[[1], [2]]], [1, 2], "", ""), r"inputs\[0\]\.retrieval_gt\[0\]: .* got list"),  # type: ignore[list-item]
        (MetricInput([[1, 2]], [[1, 2], [3, 4]], "", ""), r"inputs\[0\]\.retrieval_ids\[0\]: .* got list"),  # type: ignore[list-item]
    ],
)  # fmt: skip
def test_a_lone_nested_sample_is_named_too(sample: MetricInput, message: str) -> None:
    # Alone in the batch, a nested list makes a rectangular 2-d array, not a ragged one.
    for profile in ("weknora", "standard"):
        with pytest.raises(TypeError, match=message):
            score([sample], profile=profile, metrics=RETRIEVAL_METRICS)


def test_other_integer_types_are_ids() -> None:
    class Pid(IntEnum):
        ONE = 1
        TWO = 2

    plain = score([MetricInput([[1, 2]], [2, 9, 1], "", "")], metrics=RETRIEVAL_METRICS)
    for ids, gt in (
        ([np.int64(2), np.int32(9), np.uint8(1)], [[np.int16(1), np.int64(2)]]),
        ((Pid.TWO, 9, Pid.ONE), ((Pid.ONE, Pid.TWO),)),
        ((2, 9, 1), ({1, 2},)),
    ):
        sample = MetricInput(gt, ids, "", "")  # type: ignore[arg-type]
        assert score([sample], metrics=RETRIEVAL_METRICS) == plain


def test_ids_beyond_64_bits_take_the_exact_path() -> None:
    big = 2**70
    rows = score(
        [MetricInput([[big, 1]], [big, 5], "", ""), MetricInput([[1, 2, 3]], [2, 5, 1, 3], "", "")],
        metrics=RETRIEVAL_METRICS,
    )
    assert rows[0]["precision"] == 0.5
    assert rows[0]["mrr"] == 1.0
    assert rows[1]["map"] == pytest.approx(0.8055555556, abs=1e-10)


def test_grades_give_graded_ndcg_in_the_standard_profile() -> None:
    sample = MetricInput([[1, 2, 3]], [3, 2, 1, 8], "", "")
    grades = [{1: 2.0, 2: 1.0, 3: 0.0}]
    row = score([sample], profile="standard", grades=grades, metrics=RETRIEVAL_METRICS)[0]
    # trec_eval: gains 0, 1, 2 at ranks 1-3 against the ideal 2, 1.
    dcg = 1 / np.log2(3) + 2 / np.log2(4)
    idcg = 2 + 1 / np.log2(3)
    assert row["ndcg3"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert row["precision"] == 0.5  # passage 3 has grade 0: not relevant
    assert row["recall"] == 1.0
    assert row["mrr"] == 0.5
    # Missing pids grade 1, None means all 1, and the weknora profile ignores grades.
    assert score([sample], profile="standard", grades=[None]) == score([sample], profile="standard")
    partial = score([sample], profile="standard", grades=[{1: 1.0}])
    assert partial == score([sample], profile="standard")
    assert score([sample], grades=grades) == score([sample])


@pytest.mark.parametrize(
    ("grades", "error", "message"),
    [
        ({1: 1.0}, TypeError, "grades: expected a list"),
        ([{1: 1.0}, None], ValueError, "grades: has 2 entries but there are 1 inputs"),
        ([{9: 1.0}], ValueError, r"grades\[0\]: passage 9 is not in inputs\[0\]\.retrieval_gt"),
        ([{1: -1.0}], ValueError, r"grades\[0\]\[1\]: grade must be a finite number >= 0"),
        ([{1: float("nan")}], ValueError, r"grades\[0\]\[1\]: grade must be a finite number"),
        ([{1: True}], TypeError, r"grades\[0\]\[1\]: expected a number, got bool"),
        ([{"1": 1.0}], TypeError, r"grades\[0\] key: expected an int passage id, got str"),
        ([[1.0]], TypeError, r"grades\[0\]: expected a \{pid: grade\} mapping or None"),
    ],
)
def test_bad_grades(grades: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        score([MetricInput([[1, 2]], [1], "", "")], profile="standard", grades=grades)  # type: ignore[arg-type]


def test_custom_tokenizer_is_used_once_per_distinct_text() -> None:
    calls: list[str] = []

    def characters(text: str) -> list[list[str]]:
        calls.append(text)
        return [list(text.replace(" ", ""))]

    tokenizer: Tokenizer = characters
    inputs = [MetricInput([], [], "abcd", "abce"), MetricInput([], [], "abcd", "abce")]
    rows = score(inputs, tokenizer=tokenizer, metrics=["rouge1"])
    assert sorted(calls) == ["abcd", "abce"]
    assert rows[0]["rouge1"] == pytest.approx(2 * 0.75 * 0.75 / (1.5 + 1e-8))
    # The spec tokenizer satisfies the protocol too.
    assert score(inputs, tokenizer=tokenize) == score(inputs)


@pytest.mark.parametrize("returned", ["a b", ["a", "b"], [["a", 1]], None])
def test_a_tokenizer_returning_the_wrong_shape_is_reported(returned: object) -> None:
    with pytest.raises(TypeError, match="tokenizer: must return a list of sentences"):
        score([MetricInput([], [], "x", "y")], tokenizer=lambda text: returned)  # type: ignore[arg-type, return-value]


def test_aggregate_means_and_counts() -> None:
    rows = [
        {"precision": 1.0, "bleu1": 0.5},
        {"precision": 0.0},  # no reference answer: no generation metrics
        {"precision": 0.5, "bleu1": 0.25, "latency": 3.0},
    ]
    summary = aggregate(rows)
    assert list(summary) == [*METRIC_NAMES, "latency"]
    assert summary["precision"] == MetricSummary("precision", 0.5, 3)
    assert summary["bleu1"] == MetricSummary("bleu1", 0.375, 2)
    assert summary["recall"] == MetricSummary("recall", None, 0)
    assert summary["latency"].mean == 3.0
    chosen = aggregate(rows, ["latency", "bleu1"], directions={"latency": "lower"})
    assert list(chosen) == ["latency", "bleu1"]
    assert chosen["latency"] == MetricSummary("latency", 3.0, 1, "lower")
    assert aggregate([]) == {name: MetricSummary(name, None, 0) for name in METRIC_NAMES}


def test_aggregate_of_scores_is_the_plain_mean() -> None:
    inputs = [SAMPLE, MetricInput([[7]], [], "", ""), MetricInput([[4, 9]], [1, 2, 3, 9], "", "")]
    summary = aggregate(score(inputs, metrics=RETRIEVAL_METRICS), RETRIEVAL_METRICS)
    assert summary["precision"].mean == pytest.approx((0.75 + 0 + 0.25) / 3)
    assert summary["map"].n == 3


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([{"bleu1": float("nan")}], ValueError, r"rows\[0\]\['bleu1'\]: expected a finite number"),
        ([{}, {"bleu1": "0.5"}], TypeError, r"rows\[1\]\['bleu1'\]: expected a number, got str"),
        ([{"bleu1": True}], TypeError, "got bool"),
        ([[0.5]], TypeError, r"rows\[0\]: expected a mapping"),
    ],
)
def test_aggregate_rejects_bad_values(rows: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        aggregate(rows)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="directions"):
        aggregate([], directions={"bleu1": "up"})  # type: ignore[dict-item]
