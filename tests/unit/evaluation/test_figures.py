"""What evaluate() says beyond the means: errors, unattributed chunks, latency and tokens,
the weakest questions, custom metrics that see the case, the answering pipeline, paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev import Answer, Chunk, CustomMetric, MetricCase
from pytest_ragev.config import RunOptions, load_config
from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import Record, make_record
from pytest_ragev.dataset import Dataset, load_dataset, write_dataset
from pytest_ragev.evaluation import (
    AnsweredBy,
    EvalInputs,
    Outcome,
    QuestionError,
    RunFacts,
    RunPlan,
    error_kind,
    errors_line,
    evaluate,
    lowest_questions,
    run_params,
    usage,
)
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES


def project(tmp_path: Path, extra: str = "",
            custom: tuple[CustomMetric, ...] = ()) -> tuple[RunPlan, Dataset]:
    write_dataset(tmp_path / "data", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=QRELS, qas=QAS)
    config = tmp_path / "ragev.toml"
    config.write_text('[dataset]\npath = "data"\nid = "mini"\n' + extra, encoding="utf-8")
    return (RunPlan.build(load_config(config), RunOptions(), custom),
            load_dataset(tmp_path / "data", "mini"))


def run(plan: RunPlan, dataset: Dataset, records: list[Record], **facts: object) -> Outcome:
    return evaluate(EvalInputs(plan=plan, dataset=dataset, records=records,
                               facts=RunFacts(**facts),  # type: ignore[arg-type]
                               params={None: {"pipeline": {"name": "oracle"}}}))


def answer_all(dataset: Dataset, answer: object) -> list[Record]:
    index = PassageIndex(dataset.corpus)
    return [make_record(case, answer(case), index=index, variant=None)  # type: ignore[operator]
            for case in dataset.pairs]


def test_errors_are_named_with_their_type_in_the_verdict(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path)
    index = PassageIndex(dataset.corpus)
    records = answer_all(dataset, lambda c: Answer(retrieved=list(c.pids), text=c.answer))
    records[0] = make_record(dataset.pairs[0], None, index=index, variant=None,
                             error="TimeoutError: 模型超时")
    records[3] = make_record(dataset.pairs[3], None, index=index, variant=None,
                             error="requests.exceptions.ConnectionError: refused")
    records[4] = make_record(dataset.pairs[4], None, index=index, variant=None,
                             error="TimeoutError: read timed out")
    outcome = run(plan, dataset, records)
    assert [(e.qid, e.kind) for e in outcome.error_list] == [
        (1, "TimeoutError"), (4, "ConnectionError"), (5, "TimeoutError")]
    assert outcome.error_list[0].question == "When was the Eiffel Tower completed?"
    assert outcome.errors == 3 and outcome.failed
    assert outcome.verdict_failures() == [
        "ragev: 3 questions raised an error: q1, q4, q5 (TimeoutError 2, ConnectionError 1)"]


def test_the_errors_line_names_ten_questions_then_counts() -> None:
    errors = [QuestionError(qid=q, question="", error="ValueError: x", variant="k10")
              for q in range(1, 14)]
    line = errors_line(errors)
    assert line is not None and line.endswith("q10 [k10] and 3 more (ValueError 13)")
    assert errors_line([QuestionError(1, "", "worker 'gw1' crashed while running 'x::q1'")]) == (
        "ragev: 1 question raised an error: q1 (worker crashed 1)")
    assert errors_line([]) is None


@pytest.mark.parametrize(("line", "kind"), [
    ("TimeoutError: 模型超时", "TimeoutError"),
    ("KnowledgeBaseFailed: building the knowledge base raised ValueError: x", "KnowledgeBaseFailed"),
    ("httpx.ReadTimeout: timed out", "ReadTimeout"),
    ("AssertionError", "AssertionError"),
    ("worker 'gw0' crashed while running 'ragev.toml::mini::q3'", "worker crashed"),
    ("the pipeline gave up", "other"),
])
def test_error_kinds(line: str, kind: str) -> None:
    assert error_kind(line) == kind


def test_unattributed_chunks_are_counted_and_warned_about(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path)
    records = answer_all(dataset, lambda c: Answer(
        retrieved=[*(dataset.corpus[p] for p in c.pids),
                   "Ein umgeschriebener Abschnitt, den es im Korpus nicht gibt."],
        text=c.answer))
    outcome = run(plan, dataset, records)
    share = outcome.chunks
    assert (share.chunks, share.unattributed) == (11, 5)
    assert outcome.warnings[-1] == (
        '5/11 retrieved chunks (45%) matched no corpus passage (first: "Ein umgeschriebener '
        'Abschnitt, den es im Korpus nicht gibt."); return passage ids or Chunk(text, passage_id)')
    ids = run(plan, dataset, answer_all(dataset, lambda c: Answer(retrieved=list(c.pids),
                                                                  text=c.answer)))
    assert ids.chunks.chunks == 0 and ids.chunks.share is None and not ids.warnings


def test_usage_reads_latency_and_tokens_from_the_meta(tmp_path: Path) -> None:
    _, dataset = project(tmp_path)
    metas = [
        {"latency_s": 0.5, "prompt_tokens": 100, "completion_tokens": 20},
        {"latency_s": 1.5, "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
        {"latency_s": "slow", "total_tokens": 40},       # not a number: no latency
        {"latency_s": -1.0, "prompt_tokens": True},       # negative, a bool: ignored
        {},
    ]
    records = answer_all(dataset, lambda c: Answer(retrieved=list(c.pids), text=c.answer,
                                                   meta=metas[c.qid - 1]))
    figures = usage(records)
    assert (figures.latency_n, figures.latency_p50, figures.latency_p95) == (
        2, 1.0, pytest.approx(1.45))
    assert (figures.prompt_tokens, figures.completion_tokens, figures.total_tokens,
            figures.tokens_n) == (150, 25, 215, 3)
    assert figures.text() == ("latency p50 1.00 s, p95 1.45 s (2 answers); "
                              "tokens 150 prompt + 25 completion = 215 (3 answers)")
    assert not usage([]).reported and usage([]).text() == ""
    failed = [r if r.qid != 1 else make_record(dataset.pairs[0], None,
                                               index=PassageIndex(dataset.corpus),
                                               variant=None, error="x")
              for r in records]
    assert usage(failed).latency_n == 1  # a question that raised has no answer to time


def test_the_lowest_questions_leave_out_perfect_scores(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path)
    # q1, q3: a distractor only; q2: one of its two passages; q4, q5: right.
    picks = {1: [7], 2: [2], 3: [6], 4: [4], 5: [5]}
    records = answer_all(dataset, lambda c: Answer(retrieved=picks[c.qid], text=c.answer))
    outcome = run(plan, dataset, records)
    recall, rougel = outcome.lowest
    assert recall.metric == "recall" and [s.qid for s in recall.samples] == [1, 3, 2]
    assert recall.n == 5
    assert rougel.samples == ()  # every answer is the reference: ROUGE-L 0.999999995
    assert [s.qid for s in lowest_questions(outcome.runs[0], "recall", 1).samples] == [1]
    # The views carry the texts of the passages they name, and only those.
    assert set(outcome.passages) == {1, 2, 3, 6, 7}
    assert outcome.passages[7] == CORPUS[7]


def test_a_custom_metric_sees_the_case_the_retrieved_texts_and_the_meta(tmp_path: Path) -> None:
    seen: list[MetricCase] = []

    def context_chars(m: MetricCase) -> float:
        seen.append(m)
        return float(sum(len(text) for text in m.retrieved_texts))

    metrics = (
        CustomMetric("context_chars", context_chars, direction="lower", bounds=(0.0, None)),
        CustomMetric("latency_s", lambda m: float(m.meta["latency_s"]), direction="lower",
                     bounds=(0.0, None)),
        CustomMetric("legacy", lambda m: float(m.retrieval_ids[:1] == [1])),  # one-argument
    )
    plan, dataset = project(tmp_path, "[thresholds]\nlatency_s = 1.5\ncontext_chars = 500\n",
                            metrics)
    records = answer_all(dataset, lambda c: Answer(
        retrieved=[c.pids[0], Chunk(text="Большая стена длинная.")], text=c.answer,
        meta={"latency_s": c.qid * 0.5}))
    outcome = run(plan, dataset, records)
    first = seen[0]
    assert first.question == "When was the Eiffel Tower completed?" and first.case.pids == (1,)
    assert first.retrieved_texts == (CORPUS[1], "Большая стена длинная.")
    assert first.meta == {"latency_s": 0.5} and first.variant is None
    base = outcome.runs[0]
    assert base.summary["latency_s"].mean == pytest.approx(1.5)
    assert base.summary["context_chars"].direction == "lower"
    assert base.summary["legacy"].mean == pytest.approx(0.4)  # q1, q2 retrieve passage 1 first
    # A threshold of a lower-is-better metric is a ceiling, in its own units.
    assert [t.kind for t in outcome.thresholds] == ["max", "max"]
    assert outcome.failures == ()
    strict, _ = project(tmp_path, "[thresholds]\nlatency_s = 1.2\n", metrics)
    assert run(strict, dataset, records).failures == (
        "ragev: latency_s 1.500 > threshold 1.200 (n=5)",)


def test_custom_metric_bounds(tmp_path: Path) -> None:
    negative = CustomMetric("cost", lambda m: -0.5, bounds=(0.0, None))
    plan, dataset = project(tmp_path, custom=(negative,))
    records = answer_all(dataset, lambda c: Answer(retrieved=list(c.pids), text=c.answer))
    with pytest.raises(ConfigError, match=r"custom metric 'cost' returned -0.5 for q1; return a "
                                          r"finite number in \[0, ∞\) \(CustomMetric bounds\)"):
        run(plan, dataset, records)
    with pytest.raises(ConfigError, match=r"\[thresholds\] share = 5 lies outside the values "
                                          r"custom metric 'share' can take \(\[0, 1\]\)"):
        project(tmp_path, "[thresholds]\nshare = 5\n", (CustomMetric("share", lambda m: 1.0),))
    with pytest.raises(ValueError, match="bounds"):
        CustomMetric("x", lambda m: 0.0, bounds=(1.0, 0.0))
    assert CustomMetric("z", lambda m: 0.0, bounds=(None, None)).range_text == "(−∞, ∞)"


def test_params_name_the_code_that_answered(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path, '[pipeline]\nchunk_size = 256\n')
    hooks = AnsweredBy("conftest hooks (conftest.py)", hooks=True)
    params = run_params(plan, dataset, {"chunk_size": 256}, None, answered_by=hooks)
    # The configured name stays; who answered is recorded beside it.
    assert params["pipeline"] == {"name": "builtin", "chunk_size": 256,
                                  "answered_by": "conftest hooks (conftest.py)"}
    builtin = run_params(plan, dataset, {"chunk_size": 256}, None,
                         answered_by=AnsweredBy("builtin"))
    assert builtin["pipeline"]["name"] == "builtin"
    own, _ = project(tmp_path, '[pipeline]\nname = "team-rag"\n')
    assert run_params(own, dataset, {}, None, answered_by=hooks)["pipeline"]["name"] == "team-rag"


def test_report_paths_are_relative_to_the_rootdir_then_the_config_folder(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path, '[baseline]\npath = "ragev-baseline.json"\n'
                                      '[report]\nhtml = "out/r.html"\n')
    records = answer_all(dataset, lambda c: Answer(retrieved=list(c.pids), text=c.answer))
    outcome = run(plan, dataset, records, rootdir=str(tmp_path.parent))
    folder = tmp_path.name
    assert outcome.baseline_shown == f"{folder}/ragev-baseline.json"
    assert outcome.report_html == f"{folder}/out/r.html"
    # The gate names the file it opened; every line of the outcome is as reports write
    # it: relative to the rootdir (or the config folder).
    created = next(line for line in outcome.failures if "created" in line)
    assert created == (
        f"ragev: baseline not found, created {folder}/ragev-baseline.json; commit it and rerun")
    assert outcome.gate.failures == (created,)
    elsewhere = run(plan, dataset, records, rootdir="/nonexistent/root")
    assert elsewhere.baseline_shown == "ragev-baseline.json"  # the config folder then
