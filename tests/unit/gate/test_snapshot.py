"""Baseline snapshots (the file format): round trip, byte stability, damage, merging."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragev.core.digest import text_digest
from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.gate.diffs import question_diff
from pytest_ragev.gate.snapshot import (
    AUTO_ANSWER_CHARS,
    AUTO_WHOLE_ENTRIES,
    SCHEMA_VERSION,
    AnswerChars,
    Snapshot,
    answer_limit,
    compressed,
    load_snapshot,
    merge_snapshot,
    obtained_path,
    write_snapshot,
)

#: Content hashes of questions 0..199, as Dataset.question_hashes gives them.
HASHES = {qid: f"{qid:04d}c0ffee{qid:06d}" for qid in range(200)}


def make_run(
    qids: range | list[int] = range(1, 6),
    *,
    variant: str | None = None,
    shift: float = 0.0,
    fingerprint: str = "a" * 64,
    profile: str = "weknora-0.9",
    tokenizer: str = "default/3 jieba==0.42.1",
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
        tokenizer=tokenizer,
    )


def snapshot(*variants: str) -> Snapshot:
    runs = [make_run(variant=name, shift=0.1) for name in variants]
    return Snapshot.from_runs([*runs, make_run()], plugin_version="0.2.0", hashes=HASHES,
                              corpus_fingerprint="c" * 64)


def from_runs(*runs: RunResult) -> Snapshot:
    return Snapshot.from_runs(runs, plugin_version="0.2.0", hashes=HASHES)


def test_layout_and_key_order(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    written = write_snapshot(path, snapshot("zeta", "alpha"))
    text = path.read_text(encoding="utf-8")
    # Written piece by piece: the same text as to_json, and the count of its bytes.
    assert text == snapshot("zeta", "alpha").to_json()
    assert written == path.stat().st_size
    data = json.loads(text)
    assert list(data) == [
        "schema", "schema_version", "plugin_version", "profile", "tokenizer", "dataset", "base",
        "variants",
    ]
    assert data["schema_version"] == SCHEMA_VERSION == 3
    assert data["tokenizer"] == "default/3 jieba==0.42.1"
    assert data["dataset"] == {
        "id": "samples",
        "fingerprint": "a" * 64,
        "corpus_fingerprint": "c" * 64,
        "stats": {"answers": 5, "passages": 15, "questions": 5},
    }
    assert list(data["variants"]) == ["alpha", "zeta"]
    base = data["base"]
    assert list(base) == ["settings_hash", "settings", "metrics", "questions"]
    assert list(base["settings"]["pipeline"]) == ["chat", "name", "top_k"]
    assert list(base["metrics"]) == ["recall", "ndcg10", "bleu4", "latency"]
    assert base["metrics"]["latency"] == {"mean": None, "n": 0, "direction": "lower"}
    question = base["questions"][0]
    # The record's vocabulary (core.record.Record, the JSON report) and the hash.
    assert list(question) == [
        "qid", "hash", "question", "metrics", "retrieval_ids", "retrieval_gt", "generated_text",
        "error",
    ]
    assert question["retrieval_gt"] == [[10, 11]] and question["retrieval_ids"] == [11, 99, 10]
    assert question["hash"] == HASHES[1]
    # Readable in review: indent 2, no \\u escapes for Chinese text, trailing newline.
    assert "第1个问题" in text and "\\u" not in text
    assert text.endswith("}\n") and '\n  "schema_version": 3,' in text
    assert "latency_ms" not in text  # per-run noise stays out of the committed file


def test_one_question_per_line_so_a_diff_shows_the_changed_questions(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    write_snapshot(before, from_runs(make_run(range(1, 40))))
    changed = make_run(range(1, 40))
    samples = list(changed.samples)
    samples[6] = dataclasses.replace(samples[6], metrics={**samples[6].metrics, "recall": 0.0})
    write_snapshot(after, from_runs(dataclasses.replace(changed, samples=samples)))
    old, new = before.read_text("utf-8").splitlines(), after.read_text("utf-8").splitlines()
    assert len(old) == len(new)
    differ = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    assert len(differ) == 1 and json.loads(new[differ[0]].rstrip(","))["qid"] == 7
    lines = [line for line in old if line.lstrip().startswith('{"qid":')]
    assert len(lines) == 39 and all(line.startswith("      {") for line in lines)
    assert json.loads(lines[0].rstrip(","))["question"] == "第1个问题：什么是 RAG？"


def test_a_baseline_written_with_indent_2_still_loads(tmp_path: Path) -> None:
    # The layout of earlier versions: every key on its own line.
    path = tmp_path / "old.json"
    original = snapshot("v1")
    path.write_text(json.dumps(original.to_data(), ensure_ascii=False, indent=2) + "\n",
                    encoding="utf-8")
    loaded = load_snapshot(path)
    assert loaded.to_data() == original.to_data()
    # Rewritten, it takes the current layout with the same content.
    write_snapshot(path, loaded)
    assert json.loads(path.read_text("utf-8")) == original.to_data()


def test_a_gz_baseline_is_compressed_reproducible_and_loads(tmp_path: Path) -> None:
    import gzip

    plain, packed = tmp_path / "b.json", tmp_path / "b.json.gz"
    original = from_runs(make_run(range(1, 150)))
    plain_size = write_snapshot(plain, original)
    packed_size = write_snapshot(packed, original)
    assert compressed(packed) and not compressed(plain)
    assert (plain_size, packed_size) == (plain.stat().st_size, packed.stat().st_size)
    assert packed_size * 4 < plain_size
    # git's textconv (gzip -dc) shows the plain text; no timestamp in the header.
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    first = packed.read_bytes()
    write_snapshot(packed, load_snapshot(packed))
    assert packed.read_bytes() == first
    # A gzip file is recognised by its bytes, whatever its name.
    renamed = tmp_path / "renamed.json"
    renamed.write_bytes(first)
    assert load_snapshot(renamed).to_data() == original.to_data()
    assert obtained_path(packed) == tmp_path / "b.obtained.json.gz"


def test_a_damaged_gz_baseline_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.json.gz"
    write_snapshot(path, from_runs(make_run()))
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(BaselineError, match=r"damaged gzip file.*--ragev-update-baseline"):
        load_snapshot(path)


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
    assert from_runs(run).to_json() == from_runs(shuffled).to_json()


def test_from_runs_rejects_programming_errors() -> None:
    with pytest.raises(ValueError, match="exactly one base run"):
        from_runs(make_run(variant="a"))
    with pytest.raises(ValueError, match="appears twice"):
        from_runs(make_run(), make_run(variant="a"), make_run(variant="a"))
    with pytest.raises(ValueError, match="questions without a hash: 4, 5"):
        Snapshot.from_runs([make_run()], plugin_version="0", hashes={1: "a", 2: "b", 3: "c"})


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "is not valid JSON (line 1 column 2"),
        ("<<<<<<< HEAD\n", "is not valid JSON"),
        ("[]", "the top level is a list, not an object"),
        ('{"schema": "other"}', "is not a pytest-ragev baseline"),
        ('{"schema": "pytest-ragev-baseline", "schema_version": 99}',
         "schema_version 99, this pytest-ragev reads 3; numbers across versions are not "
         "comparable: upgrade pytest-ragev or re-baseline with --ragev-update-baseline"),
        ('{"schema": "pytest-ragev-baseline", "schema_version": true}',
         "schema_version is true, not a version number; the file is damaged"),
        ('{"schema": "pytest-ragev-baseline", "schema_version": 2}',
         "was made by an earlier pytest-ragev (schema_version 2); rewrite it with "
         "--ragev-update-baseline"),
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
    with pytest.raises(BaselineError, match=r"base\.questions\[2\]\.metrics\.recall \(qid 3\) is \"high\", not a number"):
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
    merged = merge_snapshot(snapshot("a", "b"), runs, plugin_version="0.2.0", keep=[None, "a"],
                            hashes=HASHES)
    assert merged.snapshot.to_json() == from_runs(*runs).to_json()
    assert merged.kept == [] and merged.dropped == ["b"]


def test_merge_drops_runs_recorded_on_other_data_and_needs_a_base() -> None:
    other = from_runs(make_run(fingerprint="b" * 64), make_run(variant="a", fingerprint="b" * 64))
    merged = merge_snapshot(other, [make_run()], plugin_version="0.2.0", keep=[None, "a"],
                            hashes=HASHES)
    assert merged.snapshot.variants == {} and merged.dropped == ["a"]
    with pytest.raises(BaselineError, match="needs the base configuration's run"):
        merge_snapshot(other, [make_run(variant="a")], plugin_version="0.2.0", keep=[None, "a"])
    with pytest.raises(BaselineError, match="needs the base configuration's run"):
        merge_snapshot(None, [make_run(variant="a")], plugin_version="0.2.0", keep=[None, "a"])


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
    text = Snapshot.from_runs([run], plugin_version="0", hashes=HASHES).to_json()
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


def test_a_custom_metric_may_lie_outside_0_1_but_must_be_finite(tmp_path: Path) -> None:
    """Only the twelve lie in [0, 1]: a custom metric in seconds (``bounds=(0.0, None)``)
    made every baseline that recorded it "damaged"."""
    data = snapshot().to_data()
    data["base"]["questions"][0]["metrics"]["latency_s"] = 2.5
    data["base"]["metrics"]["latency_s"] = {"mean": 74.0, "n": 1, "direction": "lower"}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    loaded = load_snapshot(path)
    assert loaded.base.samples[0].metrics["latency_s"] == 2.5
    assert loaded.base.summary["latency_s"].mean == 74.0
    content = json.dumps(data).replace("2.5", "NaN", 1)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError, match=r"base.questions\[0\].metrics.latency_s \(qid 1\) "
                                            r"is NaN, not a finite number; the file is damaged"):
        load_snapshot(path)


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
    with pytest.raises(BaselineError, match=r"base\.metrics\.recall\.n is -5, not a count"):
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

# ----------------------------------------------------------------- files of earlier versions

def test_a_file_of_an_earlier_pytest_ragev_is_one_line_saying_to_rewrite_it(
    tmp_path: Path
) -> None:
    """Nothing was released before 0.2.0: files of the pre-release layouts (schema 1 and 2,
    or a file without its tokenizer) are refused, never read half-way."""
    path = tmp_path / "ragev-baseline.json"
    for version in (1, 2):
        data = snapshot().to_data()
        data["schema_version"] = version
        path.write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(BaselineError) as refused:
            load_snapshot(path)
        assert str(refused.value) == (
            f"ragev: {path} was made by an earlier pytest-ragev (schema_version {version}); "
            "rewrite it with --ragev-update-baseline")
    data = snapshot().to_data()
    del data["tokenizer"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError) as refused:
        load_snapshot(path)
    assert str(refused.value) == (
        f"ragev: {path} was made by an earlier pytest-ragev (it records no tokenizer); rewrite "
        "it with --ragev-update-baseline")


def test_a_file_needs_every_hash_and_runs_that_agree(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    data = snapshot("k10").to_data()
    del data["variants"]["k10"]["questions"][1]["hash"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"variants\.k10\.questions\[1\]\.hash is missing"):
        load_snapshot(path)
    data = snapshot("k10").to_data()
    data["variants"]["k10"]["questions"][0]["hash"] = "something else"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"questions\[0\]\.hash is 'something else', "
                       r"but another run records '0001c0ffee000001' for qid 1"):
        load_snapshot(path)
    data = snapshot().to_data()
    data["base"]["questions"][0]["retrieval_gt"] = [10, 11]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"questions\[0\]\.retrieval_gt\[0\] is 10, not a "
                       r"list of integers"):
        load_snapshot(path)
    data = snapshot().to_data()
    del data["dataset"]["corpus_fingerprint"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"dataset\.corpus_fingerprint is missing"):
        load_snapshot(path)


#: The run's tokenizer identity.
CURRENT = "default/3 jieba==0.42.1"


def with_texts(run: RunResult, tokenizer: str, answers: dict[int, str] | None = None,
               references: dict[int, str] | None = None) -> RunResult:
    samples = [dataclasses.replace(
        sample, generated_text=(answers or {}).get(sample.qid, sample.generated_text),
        generated_gt=(references or {}).get(sample.qid, sample.generated_gt))
        for sample in run.samples]
    return dataclasses.replace(run, samples=samples, tokenizer=tokenizer)


def test_a_merge_drops_what_another_tokenizer_recorded() -> None:
    old = from_runs(with_texts(make_run(variant="en"), "default/2 jieba==0.42.1"),
                    with_texts(make_run(), "default/2 jieba==0.42.1"))
    fresh = with_texts(make_run(shift=0.1), CURRENT)
    merged = merge_snapshot(old, [fresh], plugin_version="0.2.0", keep=[None, "en"],
                            hashes=HASHES)
    assert merged.kept == [] and merged.dropped == ["en"]
    assert merged.snapshot.tokenizer == CURRENT


# ----------------------------------------------------------------- answers kept in part

#: Answers longer than 20 characters, in several scripts, and a short one.
LONG_ANSWERS = {
    1: "检索增强生成先从知识库中找出相关段落，再让模型依据这些段落写出答案。",
    2: "Die Antwort steht im zweiten Absatz des Handbuchs, gleich nach der Einleitung.",
    3: "Ответ находится во втором абзаце руководства, сразу после введения.",
    4: "回答はマニュアルの第二段落、序文のすぐ後にあります。",
    5: "짧은 답",
}


def cut_snapshot(answers: dict[int, str] = LONG_ANSWERS, chars: AnswerChars = 20) -> Snapshot:
    run = with_texts(make_run(), CURRENT, answers)
    return Snapshot.from_runs([run], plugin_version="0.2.0", hashes=HASHES, answer_chars=chars)


def test_a_long_answer_is_kept_as_its_start_and_the_digest_of_the_whole(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, cut_snapshot())
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema_version"] == SCHEMA_VERSION == 3
    entries = {entry["qid"]: entry for entry in data["base"]["questions"]}
    for qid in (1, 2, 3, 4):
        whole = LONG_ANSWERS[qid]
        assert entries[qid]["generated_text"] == whole[:20]
        assert entries[qid]["answer_digest"] == text_digest(whole)
        assert entries[qid]["answer_chars"] == len(whole)
        # The keys read in order: the kept start, then what stands for the rest.
        keys = list(entries[qid])
        assert keys[keys.index("generated_text"):] == [
            "generated_text", "answer_digest", "answer_chars", "error"]
    # An answer within the limit is written whole, with no digest.
    assert entries[5]["generated_text"] == "짧은 답" and "answer_digest" not in entries[5]
    # Read back: the records know their answer is cut; written again, the same bytes.
    loaded = load_snapshot(path)
    first = loaded.base.samples[0]
    assert first.cut and first.answer_digest == text_digest(LONG_ANSWERS[1])
    assert first.shown_answer == LONG_ANSWERS[1][:20] + "…"
    assert not loaded.base.samples[4].cut
    again = tmp_path / "again.json"
    write_snapshot(again, loaded)
    assert again.read_bytes() == path.read_bytes()
    # Gzip-compressed, the same content.
    packed = tmp_path / "ragev-baseline.json.gz"
    write_snapshot(packed, cut_snapshot())
    assert load_snapshot(packed).base.samples == loaded.base.samples


def test_every_answer_whole_writes_no_digest(tmp_path: Path) -> None:
    # "all", or answers within the limit: one layout, with nothing cut.
    for chars in ("all", 200):
        data = cut_snapshot(chars=chars).to_data()
        assert data["schema_version"] == SCHEMA_VERSION
        assert all("answer_digest" not in e for e in data["base"]["questions"])
    assert cut_snapshot(chars="all").to_json() == cut_snapshot(chars=200).to_json()


def test_auto_keeps_answers_whole_up_to_ten_thousand_entries() -> None:
    assert answer_limit("auto", AUTO_WHOLE_ENTRIES) is None
    assert answer_limit("auto", AUTO_WHOLE_ENTRIES + 1) == AUTO_ANSWER_CHARS == 80
    assert answer_limit("all", 10**6) is None
    assert answer_limit(120, 1) == 120
    for bad in (0, -5, True, "some", 2.5):
        with pytest.raises(ValueError, match="answer_chars must be"):
            answer_limit(bad, 1)  # type: ignore[arg-type]
    # The default of a snapshot is "auto": five questions keep their answers whole.
    snapshot = Snapshot.from_runs([with_texts(make_run(), CURRENT, LONG_ANSWERS)],
                                  plugin_version="0.2.0", hashes=HASHES)
    assert snapshot.answer_chars is None


def test_a_merge_keeps_cut_answers_cut() -> None:
    # A file with cut answers, partly updated: the carried-over variant keeps its cut
    # answers (their whole text is gone) under any limit, "all" included.
    variant = with_texts(make_run(variant="k10"), CURRENT, LONG_ANSWERS)
    base = with_texts(make_run(), CURRENT, LONG_ANSWERS)
    old = Snapshot.from_data(
        Snapshot.from_runs([variant, base], plugin_version="0.2.0", hashes=HASHES,
                           answer_chars=20).to_data(), source="ragev-baseline.json")
    fresh = with_texts(make_run(shift=0.1), CURRENT, LONG_ANSWERS)
    merged = merge_snapshot(old, [fresh], plugin_version="0.2.0", keep=[None, "k10"],
                            hashes=HASHES, answer_chars="all")
    assert merged.kept == ["k10"]
    data = merged.snapshot.to_data()
    assert data["schema_version"] == 3
    assert [e["generated_text"] for e in data["base"]["questions"]] == list(LONG_ANSWERS.values())
    assert [e.get("answer_digest") for e in data["variants"]["k10"]["questions"]] == [
        text_digest(LONG_ANSWERS[qid]) for qid in (1, 2, 3, 4)] + [None]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda e: e.update(answer_digest="XYZ"), r"questions\[0\]\.answer_digest is \"XYZ\", "
         r"not 16 lowercase hex digits"),
        (lambda e: e.pop("answer_digest"), r"questions\[0\]\.answer_digest is null, not 16 "
         r"lowercase hex digits"),
        (lambda e: e.update(answer_chars=3), r"questions\[0\]\.answer_chars is 3, not an "
         r"integer above the length of the kept generated_text \(20\)"),
        (lambda e: e.pop("answer_chars"), r"questions\[0\]\.answer_chars is null, not an "
         r"integer"),
    ],
    ids=["bad digest", "digest missing", "too short", "length missing"],
)
def test_a_damaged_cut_answer_is_refused_naming_the_key(
    tmp_path: Path, edit: Any, message: str
) -> None:
    data = cut_snapshot().to_data()
    edit(data["base"]["questions"][0])
    path = tmp_path / "ragev-baseline.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=f"{path}.*base\\.{message}"):
        load_snapshot(path)


def test_a_diff_tells_a_changed_answer_by_the_whole_text() -> None:
    before = Snapshot.from_data(cut_snapshot().to_data()).base  # as read from the file
    same = with_texts(make_run(), CURRENT, LONG_ANSWERS)
    # Question 2 changes after the kept start, question 3 within it, 5 is short.
    changed = with_texts(make_run(), CURRENT, {
        **LONG_ANSWERS, 2: LONG_ANSWERS[2] + " Siehe auch Anhang B.",
        3: "Другой ответ.", 5: "다른 답"})
    directions = {"recall": "higher"}
    unchanged = [question_diff(b, a, directions)
                 for b, a in zip(before.samples, same.samples, strict=True)]
    assert [d.answer_changed for d in unchanged] == [False] * 5
    diffs = [question_diff(b, a, directions)
             for b, a in zip(before.samples, changed.samples, strict=True)]
    assert [d.answer_changed for d in diffs] == [False, True, True, False, True]
    # The kept start is shown as such; the current answer whole.
    assert diffs[1].answer_before == LONG_ANSWERS[2][:20] + "…"
    assert diffs[1].answer_after == LONG_ANSWERS[2] + " Siehe auch Anhang B."
    # Two files that both keep answers in part compare their digests.
    again = Snapshot.from_data(cut_snapshot(chars=30).to_data()).base
    assert [question_diff(b, a, directions).answer_changed
            for b, a in zip(before.samples, again.samples, strict=True)] == [False] * 5
