"""Saved files read back: JSON reports and baselines into runs, outcomes and comparisons."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev.core.results import RunResult
from pytest_ragev.dataset import load_dataset, write_dataset
from pytest_ragev.evaluation import Outcome
from pytest_ragev.gate import GateRules, MetricRule, compare
from pytest_ragev.report import final_report, terminal_lines
from pytest_ragev.report.reader import (
    ReportError,
    Saved,
    compare_saved,
    outcome_from_report,
    read_saved,
    runs_from_report,
)
from tests.unit.report._project import (
    ANSWERS,
    BEHAVIOURS,
    CORPUS,
    QAS,
    QRELS,
    QUERIES,
    Project,
    make_project,
    run,
    write_report,
)


def _sample(qid: int, recall: float, variant: str | None = None) -> dict[str, Any]:
    sample = {"qid": qid, "question": f"问题 {qid}: Wie hoch ist der Turm?",
              "retrieval_gt": [[qid]], "retrieval_ids": [qid, 99], "generated_text": "Antwort",
              "generated_gt": "答案", "metrics": {"recall": recall, "mrr": recall},
              "error": None}
    if variant is not None:
        sample["variant"] = variant
    return sample


def _block(samples: list[dict[str, Any]], profile: str = "weknora") -> dict[str, Any]:
    recalls = [s["metrics"]["recall"] for s in samples]
    mean = sum(recalls) / len(recalls) if recalls else None
    return {
        "params": {"dataset": {"id": "faq", "fingerprint": "f" * 64},
                   "pipeline": {"name": "builtin"}, "metrics": {"profile": profile}},
        "metric": {"retrieval_metrics": {"recall": mean, "mrr": mean, "precision": None},
                   "generation_metrics": {"rougel": None},
                   "custom_metrics": {"latency": 0.25},
                   "counts": {"recall": len(recalls), "mrr": len(recalls), "precision": 0,
                              "rougel": 0, "latency": len(recalls)}},
        "samples": samples,
    }


def _report(base: list[float], variant: list[float] | None = None) -> dict[str, Any]:
    data = {"task": {"id": "evaluation_x", "dataset_id": "faq", "status": 2},
            **_block([_sample(i + 1, r) for i, r in enumerate(base)])}
    if variant is not None:
        data["variants"] = {"k256": _block([_sample(i + 1, r, "k256")
                                            for i, r in enumerate(variant)])}
    return {"success": True, "data": data}


def test_base_and_variant_runs() -> None:
    runs = runs_from_report(_report([1.0, 0.5], [0.5, 0.5]), directions={"latency": "lower"})
    base, variant = runs
    assert isinstance(base, RunResult) and base.variant is None and variant.variant == "k256"
    assert base.fingerprint == "f" * 64 and base.profile == "weknora" and base.dataset_id == "faq"
    assert base.summary["recall"].mean == 0.75 and base.summary["recall"].n == 2
    assert base.summary["precision"].mean is None and base.summary["precision"].n == 0
    assert base.summary["latency"].direction == "lower"
    assert list(base.summary)[:3] == ["precision", "recall", "mrr"]  # report order
    assert base.samples[0].question.startswith("问题 1")
    assert base.params_hash != "" and base.params_hash == variant.params_hash


def test_two_reports_compare_with_the_gate() -> None:
    before = runs_from_report(_report([1.0] * 30))[0]
    after = runs_from_report(_report([0.0] * 30))[0]
    result = compare(before, after)
    recall = result.get("recall")
    assert recall is not None and recall.status == "regressed" and recall.delta == -1.0


def test_a_variant_only_report_keeps_the_variant_name() -> None:
    report = _report([])
    report["data"].update(_block([_sample(1, 1.0, "k256")]))
    assert runs_from_report(report["data"])[0].variant == "k256"


@pytest.mark.parametrize(
    ("change", "message"),
    [(lambda d: d.update(samples={}), "data.samples is a dict, not a list"),
     (lambda d: d.update(metric=[1]), "data.metric is a list, not an object"),
     (lambda d: d["samples"][0].pop("qid"), "data.samples[0] is not a sample record "
                                            "(missing key 'qid')"),
     (lambda d: d["metric"]["retrieval_metrics"].update(recall="high"),
      'data.metric.retrieval_metrics.recall is "high", not a number'),
     (lambda d: d["metric"]["counts"].update(recall=-1),
      "data.metric.counts.recall is -1, not a count")],
)
def test_bad_reports_name_the_key(change: Any, message: str) -> None:
    report = _report([1.0])
    change(report["data"])
    with pytest.raises(ReportError) as info:
        runs_from_report(report, source="r.json")
    assert str(info.value).startswith("r.json: ") and message in str(info.value)


def test_not_a_report() -> None:
    with pytest.raises(ReportError, match="the top level is a list"):
        runs_from_report([])


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=20))
def test_samples_and_means_read_back(recalls: list[float]) -> None:
    run = runs_from_report(_report(recalls))[0]
    assert [s.metrics["recall"] for s in run.samples] == recalls
    assert run.scores("recall") == {i + 1: r for i, r in enumerate(recalls)}


# --------------------------------------------------------------------------------------------
# Real runs: evaluate() on a multilingual Parquet dataset, its JSON report read back.



def summary(outcome: Outcome) -> list[tuple[str, dict[str, bool]]]:
    """The terminal summary without the notes (a report does not keep them)."""
    notes = set(outcome.notes)
    return [line for line in terminal_lines(outcome, verbose=1, full=True)
            if line[0] not in notes]


behaviours = st.lists(st.sampled_from(BEHAVIOURS), min_size=8, max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=behaviours, after=behaviours, latency=st.sampled_from([0.05, 0.2, 0.4]),
       interrupted=st.booleans())
def test_a_report_reads_back_to_the_same_report_and_summary(
    before: list[str], after: list[str], latency: float, interrupted: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp))
        first = run(project, project.plan(update_baseline=True), before, 0.1)
        outcome = run(project, project.plan(), after, latency, interrupted=interrupted)
        path = write_report(outcome, Path(tmp) / "报告.json")
        written = json.loads(path.read_text(encoding="utf-8"))
        saved = read_saved(path)
        back = outcome_from_report(saved, rules=project.plan().rules)
        again = final_report(back, dataset_id="multi", params=back.runs[0].params)
        assert again == written
        assert summary(back) == summary(outcome)
        # Gating the saved files again gives what the plugin's gate found.
        baseline = read_saved(Path(tmp) / "ragev-baseline.json")
        first_report = read_saved(write_report(first, Path(tmp) / "first.json"))
        for base in (baseline, first_report):
            if interrupted:
                break  # an interrupted run is not gated by the plugin
            gated = compare_saved(base, saved, project.plan().rules)
            assert gated.gate.comparisons == outcome.gate.comparisons
            assert gated.gate.regressions == outcome.gate.regressions
            assert gated.failed == outcome.failed
            assert summary(gated) == summary(outcome)


def _saved(tmp_path: Path, name: str, behaviour: Sequence[str], latency: float = 0.1,
           **options: object) -> Saved:
    project = make_project(tmp_path)
    outcome = run(project, project.plan(**options), behaviour, latency)
    return read_saved(write_report(outcome, tmp_path / name))


def test_a_lower_is_better_metric_regresses_upwards(tmp_path: Path) -> None:
    base = _saved(tmp_path, "fast.json", ["gold"] * 8, latency=0.01, no_baseline=True)
    slow = _saved(tmp_path, "slow.json", ["gold"] * 8, latency=0.3, no_baseline=True)
    assert base.runs[0].summary["latency_s"].direction == "lower"
    outcome = compare_saved(base, slow, GateRules(default=MetricRule(mode="tolerance")))
    comparison = outcome.gate.comparisons[0]
    latency = comparison.get("latency_s")
    assert latency is not None and latency.status == "regressed"
    assert any(line.startswith("ragev: latency_s ") and " > baseline " in line
               for line in outcome.failures)
    # The thresholds CURRENT recorded are checked too: latency_s = 2.0 is a ceiling.
    assert any("latency_s" in t.metric and not t.passed for t in outcome.thresholds) is False
    assert compare_saved(slow, base, GateRules(default=MetricRule(mode="tolerance"))
                         ).gate.comparisons[0].get("latency_s").status == "improved"  # type: ignore[union-attr]


def test_a_baseline_file_without_a_tokenizer_is_one_line_saying_to_rewrite_it(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path)
    run(project, project.plan(update_baseline=True), ["gold"] * 8, 0.1)
    path = tmp_path / "ragev-baseline.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["tokenizer"]
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ReportError) as refused:
        read_saved(path)
    assert str(refused.value) == (
        f"{path} was made by an earlier pytest-ragev (it records no tokenizer); rewrite it "
        "with --ragev-update-baseline")


def test_compare_refuses_files_it_cannot_pair(tmp_path: Path) -> None:
    good = _saved(tmp_path, "good.json", ["gold"] * 8, no_baseline=True)
    standard = _saved(tmp_path, "std.json", ["gold"] * 8, no_baseline=True, profile="standard")
    with pytest.raises(ReportError, match=r"good\.json was computed with metric profile "
                                          r"'weknora', this run uses 'standard'"):
        compare_saved(good, standard)
    # Another text tokenizer (recorded in params.metrics by the plugin): not comparable,
    # another version of the same rules included, whatever the texts.
    def tokenized(saved: Saved, tokenizer: str) -> Saved:
        return replace(saved, runs=tuple(replace(r, tokenizer=tokenizer) for r in saved.runs))
    assert good.runs[0].tokenizer.startswith("default/3 ")  # the plugin recorded it
    older, whitespace = tokenized(good, "default/2 jieba==0.42.1"), tokenized(good, "whitespace")
    with pytest.raises(ReportError) as refused:
        compare_saved(older, whitespace)
    assert str(refused.value) == (
        f"{older.source} was computed with the tokenizer 'default/2 jieba==0.42.1', this run "
        "uses 'whitespace'; text metrics across tokenizers are not comparable: re-baseline "
        "with --ragev-update-baseline, or set [metrics] tokenizer back")
    with pytest.raises(ReportError, match="text metrics across tokenizers are not comparable"):
        compare_saved(older, good)
    # Another dataset (an edited one): a JSON report has no hashes to pair questions by.
    edited = replace(good, runs=tuple(replace(r, fingerprint="e" * 64) for r in good.runs))
    with pytest.raises(ReportError, match=r"the data changed, and .*good\.json records no "
                                          r"per-question content hashes"):
        compare_saved(good, edited)
    with pytest.raises(ReportError, match="strict_dataset = true"):
        compare_saved(good, edited, GateRules(strict_dataset=True))
    # A variant BASE lacks: a warning, unless every variant is required.
    only_base = replace(good, runs=good.runs[:1])
    outcome = compare_saved(only_base, good)
    assert outcome.gate.new_variants == ("k2",)
    assert any("variant 'k2' is new, not compared" in note for note in outcome.notes)
    with pytest.raises(ReportError, match=r"no run of variant 'k2' \(it has: none\) and "
                                          r"\[gate\] require_all_variants"):
        compare_saved(only_base, good, GateRules(require_all_variants=True))
    only_variant = replace(good, runs=good.runs[1:])
    with pytest.raises(ReportError, match="no run of the base configuration"):
        compare_saved(only_variant, good)
    disjoint = replace(good, runs=tuple(replace(r, samples=[replace(s, qid=s.qid + 100)
                                                            for s in r.samples])
                                        for r in good.runs))
    with pytest.raises(ReportError, match="share no unchanged question"):
        compare_saved(disjoint, good)


def test_an_edited_dataset_pairs_by_the_hashes_of_a_baseline_file(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    run(project, project.plan(update_baseline=True), ["gold"] * 8, 0.1)
    baseline = read_saved(tmp_path / "ragev-baseline.json")
    # Edit question 2's reference answer and add question 9.
    answers = {**ANSWERS, 102: "Ungefähr 330 Meter."}
    write_dataset(tmp_path / "data", queries={**QUERIES, 9: "谁写了哈姆雷特？"}, corpus=CORPUS,
                  answers={**answers, 109: "莎士比亚。"}, qrels=[*QRELS, (9, 6)],
                  qas=[*QAS, (9, 109)])
    edited = Project(tmp_path, load_dataset(tmp_path / "data", "multi"))
    outcome = run(edited, edited.plan(), ["gold"] * 9, 0.1)
    rules = edited.plan().rules
    # The report's samples carry their questions' content hashes: it pairs on its own.
    saved = read_saved(write_report(outcome, tmp_path / "edited.json"))
    assert saved.hashes == edited.dataset.question_hashes
    comparison = compare_saved(baseline, saved, rules).gate.comparisons[0]
    assert (comparison.added, comparison.changed) == ([9], [2])
    assert comparison == outcome.gate.comparisons[0]
    # A report written before reports recorded them needs the dataset's hashes.
    older = read_saved(write_report(replace(outcome, question_hashes={}),
                                    tmp_path / "older.json"))
    with pytest.raises(ReportError, match=r"pass the dataset it ran on \(ragev report compare "
                                          r"--dataset DIR\)"):
        compare_saved(baseline, older, rules)
    gated = compare_saved(baseline, older, rules, hashes=edited.dataset.question_hashes)
    assert gated.gate.comparisons[0] == outcome.gate.comparisons[0]


def test_a_baseline_file_shows_its_runs_and_their_thresholds(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    run(project, project.plan(update_baseline=True), ["miss"] * 4 + ["error"] * 4, 0.1)
    saved = read_saved(tmp_path / "ragev-baseline.json")
    assert saved.kind == "baseline" and [r.variant for r in saved.runs] == [None, "k2"]
    outcome = outcome_from_report(saved)
    assert outcome.errors == 8 and outcome.failed
    assert [t.metric for t in outcome.thresholds if not t.passed] == ["recall"]
    lines = [line for line, _ in terminal_lines(outcome, verbose=0)]
    assert "ragev: multi (base configuration), 8 questions, profile weknora" in lines
    assert any(line.startswith("ragev: errors: 8 question(s) raised (TimeoutError 8)")
               for line in lines)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b'{"success": true, "data": {"task": {"status": 1, "finished": 3, "total": 20}, '
      b'"params": {}, "metric": null}}',
      "is a progress report (task status 1, running: 3 of 20 questions finished)"),
     (b'{"success": false, "data": {"task": {"status": 3, "err_msg": "bad key"}, '
      b'"metric": null}}', "the run failed before any question was scored (bad key)"),
     (b'{"rows": [1, 2]}', "is neither a pytest-ragev JSON report"),
     (b"[1, 2]", "the top level is a list, not an object"),
     (b'{"schema": "pytest-ragev-baseline", "schema_version": 99}',
      "has schema_version 99, this pytest-ragev reads 3"),
     (b'{"success": true, "data": {"schema_version": 7, "task": {"status": 2}, '
      b'"metric": {}}}',
      "has report schema_version 7, this pytest-ragev reads up to 1: upgrade pytest-ragev"),
     (b'{"data": {"schema_version": "1", "task": {"status": 2}, "metric": {}}}',
      "data.schema_version is '1', not a version number"),
     (b'{"data": {"task": {"status": 2}, "metric": {}, "samples": [{"qid": 1, "hash": 5}]}}',
      "data.samples[0].hash is 5, not a content hash"),
     (b'{"data": {"task": {"status": 2}, "metric": {}, "samples": [{"qid": 1, "hash": "a1"}], '
      b'"variants": {"k2": {"samples": [{"qid": 1, "hash": "b2", "variant": "k2"}]}}}}',
      "data.variants.k2.samples[0].hash is 'b2', but another sample of qid 1 records 'a1'"),
     (b"{not json", "is not valid JSON (line 1 column 2"),
     (b"\xff\xfe{}", "is not UTF-8 text (byte 0xff at offset 0)"),
     (b"[" * 100_000 + b"]" * 100_000, "nests arrays or objects too deeply")],
)
def test_files_that_are_not_readable_reports(tmp_path: Path, content: bytes,
                                             message: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(ReportError) as info:
        read_saved(path)
    assert message in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value) and not str(info.value).startswith("ragev: ")


def test_missing_files_and_folders(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such file; pass a JSON report"):
        read_saved(tmp_path / "nope.json")
    with pytest.raises(ReportError, match="is a folder, not a file"):
        read_saved(tmp_path)


def test_a_recorded_direction_must_be_known(tmp_path: Path) -> None:
    report = _report([1.0])
    report["data"]["metric"]["directions"] = {"latency": "sideways"}
    with pytest.raises(ReportError, match=r"metric\.directions\.latency is 'sideways'"):
        runs_from_report(report, source="r.json")
    report["data"]["metric"]["directions"] = {"latency": "lower"}
    assert runs_from_report(report)[0].summary["latency"].direction == "lower"


def test_a_variant_only_report_lists_each_variant_once() -> None:
    report = _report([], variant=[1.0, 0.5])
    report["data"].update(_block([_sample(1, 1.0, "k256"), _sample(2, 0.5, "k256")]))
    runs = runs_from_report(report)
    assert [run.variant for run in runs] == ["k256"]


def test_a_non_finite_sample_metric_is_refused() -> None:
    report = _report([1.0])
    report["data"]["samples"][0]["metrics"]["recall"] = float("nan")
    with pytest.raises(ReportError, match=r"data.samples\[0\].metrics.recall \(qid 1\) is NaN, "
                                          r"not a number in \[0, 1\]"):
        runs_from_report(report, source="r.json")


@pytest.mark.parametrize("value", [5.0, -0.25, 1.0000001])
def test_a_built_in_metric_outside_0_1_is_refused_as_in_a_baseline(value: float) -> None:
    """A report used as BASE of ``ragev report compare``: a hand-edited 5.0 was accepted."""
    report = _report([1.0, 0.5])
    report["data"]["samples"][1]["metrics"]["mrr"] = value
    with pytest.raises(ReportError) as caught:
        runs_from_report(report, source="r.json")
    assert str(caught.value) == (
        f"r.json: data.samples[1].metrics.mrr (qid 2) is {value}, not a number in [0, 1]")
    mean = _report([1.0, 0.5], [0.5, 0.5])
    mean["data"]["variants"]["k256"]["metric"]["retrieval_metrics"]["recall"] = value
    with pytest.raises(ReportError, match=r"^r.json: data.variants.k256.metric."
                                          r"retrieval_metrics.recall is .*, not a number in"):
        runs_from_report(mean, source="r.json")


def test_a_custom_metric_outside_0_1_is_read_when_finite() -> None:
    report = _report([1.0])
    report["data"]["samples"][0]["metrics"]["latency"] = 3.75  # seconds
    report["data"]["metric"]["custom_metrics"]["latency"] = 3.75
    (run,) = runs_from_report(report)
    assert run.samples[0].metrics["latency"] == 3.75 and run.summary["latency"].mean == 3.75
    report["data"]["samples"][0]["metrics"]["latency"] = float("inf")
    with pytest.raises(ReportError, match=r"metrics.latency \(qid 1\) is Infinity, not a "
                                          r"finite number"):
        runs_from_report(report, source="r.json")
