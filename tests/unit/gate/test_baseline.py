"""Baseline snapshots: round trip, byte stability, compatibility errors, merging."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.gate.baseline import (
    SCHEMA_VERSION,
    Snapshot,
    check_compatible,
    load_snapshot,
    merge_snapshot,
    obtained_path,
    write_snapshot,
)


def make_run(
    qids: range | list[int] = range(1, 6),
    *,
    variant: str | None = None,
    shift: float = 0.0,
    fingerprint: str = "a" * 64,
    profile: str = "weknora-0.9",
) -> RunResult:
    samples = [
        SampleResult(
            qid=qid,
            question=f"第{qid}个问题：什么是 RAG？",
            retrieval_gt=[[qid * 10, qid * 10 + 1]],
            retrieval_ids=[qid * 10 + 1, 99, qid * 10],
            generated_text=f"答案 {qid} — “quoted”",
            generated_gt="reference",
            metrics={"recall": 0.5 + shift, "ndcg10": 1 / 3, "bleu4": 0.25},
            error=None,
            variant=variant,
            meta={"latency_ms": 12.5},
        )
        for qid in qids
    ]
    n = len(samples)
    return RunResult(
        dataset_id="samples",
        fingerprint=fingerprint,
        dataset_stats={"questions": n, "passages": 3 * n, "answers": n},
        profile=profile,
        params={"pipeline": {"top_k": 5, "name": "builtin", "chat": {"api_key": "***"}}},
        params_hash="d" * 64,
        samples=samples,
        summary={
            "recall": MetricSummary("recall", 0.5 + shift, n),
            "ndcg10": MetricSummary("ndcg10", 1 / 3, n),
            "bleu4": MetricSummary("bleu4", 0.25, n),
            "latency": MetricSummary("latency", None, 0, direction="lower"),
        },
        variant=variant,
    )


def snapshot(*variants: str) -> Snapshot:
    runs = [make_run(variant=name, shift=0.1) for name in variants]
    return Snapshot.from_runs([*runs, make_run()], plugin_version="0.1.0")


def test_layout_and_key_order(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snapshot("zeta", "alpha"))
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert list(data) == [
        "schema", "schema_version", "plugin_version", "profile", "dataset", "base", "variants",
    ]
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["dataset"] == {
        "id": "samples",
        "fingerprint": "a" * 64,
        "stats": {"answers": 5, "passages": 15, "questions": 5},
    }
    assert list(data["variants"]) == ["alpha", "zeta"]
    base = data["base"]
    assert list(base) == ["settings_hash", "settings", "metrics", "questions"]
    assert list(base["settings"]["pipeline"]) == ["chat", "name", "top_k"]
    assert list(base["metrics"]) == ["recall", "ndcg10", "bleu4", "latency"]
    assert base["metrics"]["latency"] == {"mean": None, "n": 0, "direction": "lower"}
    question = base["questions"][0]
    assert list(question) == [
        "qid", "question", "metrics", "retrieved_ids", "relevant_ids", "generated_text", "error",
    ]
    assert question["relevant_ids"] == [10, 11]
    # Readable in review: indent 2, no \\u escapes for Chinese text, trailing newline.
    assert "第1个问题" in text and "\\u" not in text
    assert text.endswith("}\n") and '\n  "schema_version": 1,' in text
    assert "latency_ms" not in text  # per-run noise stays out of the committed file


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    original = snapshot("v1")
    write_snapshot(path, original)
    first = path.read_bytes()
    loaded = load_snapshot(path)
    assert loaded.source == str(path)
    assert loaded.to_json().encode("utf-8") == first
    write_snapshot(path, loaded)
    assert path.read_bytes() == first
    # The loaded runs carry what comparisons need.
    base = loaded.base
    assert base.variant is None and [s.qid for s in base.samples] == [1, 2, 3, 4, 5]
    assert base.samples[0].retrieval_ids == [11, 99, 10]
    assert base.samples[0].retrieval_gt == [[10, 11]]
    assert base.summary["recall"] == MetricSummary("recall", 0.5, 5)
    assert base.scores("ndcg10")[3] == 1 / 3
    assert loaded.run_for("v1") is not None and loaded.run_for("v1").variant == "v1"  # type: ignore[union-attr]
    assert loaded.run_for("nope") is None


def test_same_runs_in_other_order_give_the_same_bytes() -> None:
    run = make_run()
    shuffled = dataclasses.replace(
        run,
        samples=list(reversed(run.samples)),
        params={"pipeline": {"chat": {"api_key": "***"}, "top_k": 5, "name": "builtin"}},
        dataset_stats={"passages": 15, "answers": 5, "questions": 5},
    )
    one = Snapshot.from_runs([run], plugin_version="0.1.0").to_json()
    two = Snapshot.from_runs([shuffled], plugin_version="0.1.0").to_json()
    assert one == two


def test_from_runs_rejects_programming_errors() -> None:
    with pytest.raises(ValueError, match="exactly one base run"):
        Snapshot.from_runs([make_run(variant="a")], plugin_version="0")
    with pytest.raises(ValueError, match="appears twice"):
        Snapshot.from_runs([make_run(), make_run(variant="a"), make_run(variant="a")],
                           plugin_version="0")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "is not valid JSON (line 1 column 2"),
        ("<<<<<<< HEAD\n", "is not valid JSON"),
        ("[]", "the top level must be an object"),
        ('{"schema": "other"}', "is not a pytest-ragev baseline"),
        ('{"schema": "pytest-ragev-baseline", "schema_version": 99}',
         "schema_version 99, this pytest-ragev reads 1; numbers across versions are not "
         "comparable: upgrade pytest-ragev or re-baseline"),
    ],
)
def test_corrupt_files_raise_and_are_not_touched(
    tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "ragev-baseline.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load_snapshot(path)
    message = str(info.value)
    assert fragment in message and str(path) in message and "\n" not in message
    assert path.read_text(encoding="utf-8") == content


def test_damaged_field_is_named(tmp_path: Path) -> None:
    data = snapshot().to_data()
    data["base"]["questions"][2]["metrics"]["recall"] = "high"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"base\.questions\[2\]\.metrics\.recall \(qid 3\) must be a"):
        load_snapshot(path)
    data = snapshot().to_data()
    del data["dataset"]["fingerprint"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"dataset\.fingerprint is missing"):
        load_snapshot(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="not found; create it with --ragev-update-baseline"):
        load_snapshot(tmp_path / "none.json")


def test_obtained_path() -> None:
    assert obtained_path("ragev-baseline.json") == Path("ragev-baseline.obtained.json")
    assert obtained_path("ci/base") == Path("ci/base.obtained")


def test_compatibility_errors() -> None:
    baseline = snapshot("v1")
    with pytest.raises(BaselineError, match=r"metric profile 'weknora-0.9'.*not comparable.*"
                       r"re-baseline on this version with --ragev-update-baseline"):
        check_compatible(baseline, make_run(profile="weknora-1.0"))
    with pytest.raises(BaselineError, match=r"fingerprint bbbbbbbbbbbb.*the data changed"):
        check_compatible(baseline, make_run(fingerprint="b" * 64))
    with pytest.raises(BaselineError, match="no run of variant 'v2' \\(it has: v1\\)"):
        check_compatible(baseline, make_run(variant="v2"))
    with pytest.raises(BaselineError, match="share no question \\(5 in the baseline, 2 now\\)"):
        check_compatible(baseline, make_run([100, 101]))
    stale = dataclasses.replace(baseline, schema_version=0)
    with pytest.raises(BaselineError, match="schema_version 0"):
        check_compatible(stale, make_run())


def test_overlap_lists_added_and_removed() -> None:
    baseline = snapshot("v1")
    overlap = check_compatible(baseline, make_run([3, 4, 5, 6, 7]))
    assert overlap.common_qids == [3, 4, 5]
    assert overlap.added == [6, 7] and overlap.removed == [1, 2]
    assert overlap.lines() == [
        "ragev: 2 question(s) not in the baseline (added, not compared): 6, 7",
        "ragev: 2 baseline question(s) missing from this run (removed, not compared): 1, 2",
    ]
    assert check_compatible(baseline, make_run(variant="v1")).added == []
    many = check_compatible(baseline, make_run(range(1, 40)))
    assert many.lines()[0].endswith(", … (14 more)")


def test_merge_keeps_configured_runs_that_did_not_run() -> None:
    recorded = load_roundtrip(snapshot("a", "b", "gone"))
    fresh_a = make_run(variant="a", shift=0.3)
    merged = merge_snapshot(recorded, [fresh_a], plugin_version="0.2.0", keep=[None, "a", "b"])
    assert merged.kept == [None, "b"] and merged.dropped == ["gone"]
    result = merged.snapshot
    assert result.plugin_version == "0.2.0"
    assert result.to_data()["base"] == recorded.to_data()["base"]
    assert result.to_data()["variants"]["b"] == recorded.to_data()["variants"]["b"]
    assert result.variants["a"].summary["recall"].mean == pytest.approx(0.8)
    assert result.variants["b"].summary == recorded.variants["b"].summary
    assert list(result.variants) == ["a", "b"]


def test_merge_of_a_complete_session_equals_its_own_snapshot() -> None:
    runs = [make_run(), make_run(variant="a", shift=0.2)]
    merged = merge_snapshot(snapshot("a", "b"), runs, plugin_version="0.1.0", keep=[None, "a"])
    assert merged.snapshot.to_json() == Snapshot.from_runs(runs, plugin_version="0.1.0").to_json()
    assert merged.kept == [] and merged.dropped == ["b"]


def test_merge_drops_runs_recorded_on_other_data_and_needs_a_base() -> None:
    other = Snapshot.from_runs(
        [make_run(fingerprint="b" * 64), make_run(variant="a", fingerprint="b" * 64)],
        plugin_version="0.1.0",
    )
    merged = merge_snapshot(other, [make_run()], plugin_version="0.1.0", keep=[None, "a"])
    assert merged.snapshot.variants == {} and merged.dropped == ["a"]
    with pytest.raises(BaselineError, match="needs the base configuration's run"):
        merge_snapshot(other, [make_run(variant="a")], plugin_version="0.1.0", keep=[None, "a"])
    with pytest.raises(BaselineError, match="needs the base configuration's run"):
        merge_snapshot(None, [make_run(variant="a")], plugin_version="0.1.0", keep=[None, "a"])


def load_roundtrip(value: Snapshot) -> Snapshot:
    return Snapshot.from_data(json.loads(value.to_json()), source="ragev-baseline.json")


# ----------------------------------------------------------------- property: round trip

_samples = st.lists(
    st.tuples(
        st.text(max_size=30),
        st.dictionaries(st.sampled_from(["recall", "bleu4", "custom"]),
                        st.floats(0.0, 1.0), max_size=3),  # every metric is in [0, 1]
        st.lists(st.integers(-(2**40), 2**40), max_size=5),
        st.one_of(st.none(), st.text(max_size=20)),
    ),
    min_size=1, max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(samples=_samples, settings_value=st.one_of(st.integers(), st.text(max_size=10), st.none()))
def test_any_run_round_trips_byte_identically(
    samples: list[tuple[str, dict[str, float], list[int], str | None]], settings_value: object
) -> None:
    records = [
        SampleResult(
            qid=qid, question=question, retrieval_gt=[sorted(set(ids))] if ids else [],
            retrieval_ids=ids, generated_text=question[::-1], generated_gt="", metrics=metrics,
            error=error,
        )
        for qid, (question, metrics, ids, error) in enumerate(samples)
    ]
    run = RunResult(
        dataset_id="d", fingerprint="f", dataset_stats={"n": len(records)}, profile="p",
        params={"z": settings_value, "a": {"nested": [1, 2]}}, params_hash="h",
        samples=records,
        summary={"recall": MetricSummary("recall", 0.5, 1)},
    )
    text = Snapshot.from_runs([run], plugin_version="0").to_json()
    again = Snapshot.from_data(json.loads(text)).to_json()
    assert again == text
    loaded = Snapshot.from_data(json.loads(text)).base
    assert [s.metrics for s in loaded.samples] == [s.metrics for s in records]
    assert [s.error for s in loaded.samples] == [s.error for s in records]


# --- values a hand edit can leave behind -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("5.0", "5.0"),
     ("1.0000001", "1.0000001"), ("-0.5", "-0.5")],
)
@pytest.mark.parametrize("field", ["question", "mean"])
def test_metric_outside_0_1_is_refused_naming_question_and_metric(
    tmp_path: Path, text: str, shown: str, field: str
) -> None:
    """A NaN per-question value would silently drop the question from the paired test."""
    data = snapshot("k10").to_data()
    if field == "question":
        data["base"]["questions"][3]["metrics"]["ndcg10"] = "MARK"
        where = "base.questions[3].metrics.ndcg10 (qid 4)"
    else:
        data["variants"]["k10"]["metrics"]["recall"]["mean"] = "MARK"
        where = "variants.k10.metrics.recall.mean"
    path = tmp_path / "b.json"
    content = json.dumps(data, ensure_ascii=False).replace('"MARK"', text)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError) as caught:
        load_snapshot(path)
    assert str(caught.value) == (
        f"ragev: {path}: {where} is {shown}, not a number in [0, 1]; the file is damaged: "
        "restore it from version control or rewrite it with --ragev-update-baseline"
    )
    assert path.read_text(encoding="utf-8") == content


def test_bounds_are_inclusive_and_a_missing_mean_is_fine(tmp_path: Path) -> None:
    data = snapshot().to_data()
    data["base"]["questions"][0]["metrics"] = {"recall": 0, "ndcg10": 1, "bleu4": 0.0}
    data["base"]["metrics"]["recall"]["mean"] = None
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    loaded = load_snapshot(path)
    assert loaded.base.samples[0].metrics == {"recall": 0.0, "ndcg10": 1.0, "bleu4": 0.0}
    assert loaded.base.summary["recall"].mean is None


def test_negative_count_is_refused(tmp_path: Path) -> None:
    data = snapshot().to_data()
    data["base"]["metrics"]["recall"]["n"] = -5
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"base\.metrics\.recall\.n must be 0 or more, got -5"):
        load_snapshot(path)


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000,
                                  '{"a": ' * 100_000 + "1" + "}" * 100_000])
def test_json_nested_100k_levels_deep_is_one_line(tmp_path: Path, deep: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(deep, encoding="utf-8")
    with pytest.raises(BaselineError) as caught:
        load_snapshot(path)
    assert str(caught.value).startswith(
        f"ragev: baseline {path} nests arrays or objects too deeply to read (Python's JSON "
        "parser stops near ")
    assert "\n" not in str(caught.value) and path.read_text(encoding="utf-8") == deep
