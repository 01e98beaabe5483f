"""The run plan and the end of a run as a pure function: records in, decision out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev import Answer, CustomMetric
from pytest_ragev.config import RunOptions, load_config
from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import Record, make_record
from pytest_ragev.dataset import Dataset, load_dataset, write_dataset
from pytest_ragev.evaluation import (
    EvalInputs,
    RecordScorer,
    RunFacts,
    RunningMeans,
    RunPlan,
    evaluate,
)
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    config = tmp_path / "ragev.toml"
    config.write_text(body, encoding="utf-8")
    return config


def test_unknown_threshold_metric_gets_a_suggestion(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[dataset]\npath = "data"\n[thresholds]\nrecal = 0.5\n'))
    with pytest.raises(ConfigError, match="did you mean 'recall'"):
        RunPlan.build(config, RunOptions())
    # A custom metric of that name is fine.
    plan = RunPlan.build(config, RunOptions(), [CustomMetric("recal", lambda m: 1.0)])
    assert [check.metric for check in plan.thresholds] == ["recal"]



def project(tmp_path: Path, extra: str = "") -> tuple[RunPlan, Dataset]:
    write_dataset(tmp_path / "data", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=QRELS, qas=QAS)
    config = load_config(write(tmp_path, '[dataset]\npath = "data"\nid = "mini"\n' + extra))
    return RunPlan.build(config, RunOptions()), load_dataset(tmp_path / "data", "mini")


def answered(dataset: Dataset, variant: str | None = None, *, good: bool = True) -> list[Record]:
    index = PassageIndex(dataset.corpus)
    return [
        make_record(case, Answer(retrieved=list(case.pids) if good else [7],
                                 text=case.answer or ""), index=index, variant=variant)
        for case in dataset.pairs
    ]


def test_evaluate_scores_checks_thresholds_on_the_base_run_and_counts(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path, '[thresholds]\nrecall = 0.9\n[[variants]]\nname = "bad"\n')
    bad = answered(dataset, "bad", good=False)
    failed = make_record(dataset.pairs[0], None, index=PassageIndex(dataset.corpus),
                         variant=None, error="RuntimeError: 模型超时")
    records = [failed, *answered(dataset)[1:], *bad]
    outcome = evaluate(EvalInputs(
        plan=plan, dataset=dataset, records=records,
        facts=RunFacts(task_id="t", total=10, finished=10, duplicates=2),
        params={None: {"pipeline": {"name": "oracle"}}, "bad": {"pipeline": {"name": "x"}}},
    ))
    base, variant = outcome.runs
    assert base.variant is None and variant.variant == "bad"
    assert base.summary["recall"].mean == 1.0 and base.summary["recall"].n == 4
    assert base.samples[0].error == "RuntimeError: 模型超时" and base.samples[0].metrics == {}
    assert variant.summary["recall"].mean == 0.0
    # Thresholds hold the base configuration only: the bad variant does not fail them.
    assert [t.variant for t in outcome.thresholds] == [None] and not outcome.failures
    assert outcome.errors == 1 and outcome.failed  # a question that raised fails the verdict
    assert outcome.notes[0].startswith("ragev: 2 duplicate records")
    assert outcome.gate.variant_table is not None  # base + a variant: the variants table
    assert base.params == {"pipeline": {"name": "oracle"}}


def test_evaluate_names_an_interrupted_run(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path)
    outcome = evaluate(EvalInputs(
        plan=plan, dataset=dataset, records=answered(dataset)[:2],
        facts=RunFacts(total=5, finished=2, interrupted="interrupted by SIGTERM"),
        params={None: {}},
    ))
    assert outcome.interrupted == "ragev: run interrupted by SIGTERM: 2 of 5 questions answered"
    assert outcome.failed and outcome.verdict_failures() == [outcome.interrupted]


def test_a_custom_metric_outside_its_range_is_a_config_error(tmp_path: Path) -> None:
    write_dataset(tmp_path / "data", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=QRELS, qas=QAS)
    config = load_config(write(tmp_path, '[dataset]\npath = "data"\n'))
    plan = RunPlan.build(config, RunOptions(), [CustomMetric("länge", lambda m: 2.0)])
    dataset = load_dataset(tmp_path / "data")
    with pytest.raises(ConfigError, match=r"custom metric 'länge' returned 2.0 for q1"):
        evaluate(EvalInputs(plan=plan, dataset=dataset, records=answered(dataset),
                            facts=RunFacts(), params={None: {}}))


def test_default_concurrency_depends_on_what_the_pipeline_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    plan = RunPlan.build(load_config(write(tmp_path, '[dataset]\npath = "data"\n')), RunOptions())
    assert plan.concurrency_for("project") == plan.concurrency == 1
    assert plan.concurrency_for("service") == 8
    assert plan.concurrency_for("builtin") == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    # More cores: the project's code gets more threads, the built-in pipeline none
    # (its search holds the GIL; its vector scan runs on every core by itself).
    assert plan.concurrency_for("project") == 7
    assert plan.concurrency_for("builtin") == 1
    configured = RunPlan.build(load_config(write(
        tmp_path, '[dataset]\npath = "data"\n[run]\nconcurrency = 3\n')), RunOptions())
    assert configured.concurrency_for("service") == 3
    assert configured.concurrency_for("builtin") == 3
    assert RunPlan.build(configured.config, RunOptions(concurrency=2)).concurrency_for(
        "service") == 2


def test_the_plan_resolves_options_over_the_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, (
        '[dataset]\npath = "data"\n[metrics]\nprofile = "standard"\n[run]\nconcurrency = 3\n'
        '[report]\ntop_regressions = 4\n[[variants]]\nname = "k10"\n'
    )))
    plan = RunPlan.build(config, RunOptions(profile="weknora", variants=("k10",)))
    assert plan.profile == "weknora" and plan.concurrency == 3 and plan.variants == ("k10",)
    assert plan.rules.top_regressions == 4  # [gate] top_regressions falls back to [report]
    assert plan.configured == (None, "k10")
    with pytest.raises(ConfigError, match=r"no such variant.*did you mean 'k10'"):
        RunPlan.build(config, RunOptions(variants=("k1",)))


def _counting_metric(calls: list[int]) -> CustomMetric:
    def context_chars(m: Any) -> float:
        calls.append(m.case.qid)
        # Passage ids stand for their corpus text, as at the end of the run.
        return float(sum(map(len, m.retrieved_texts)))
    return CustomMetric("context_chars", context_chars, direction="lower", bounds=(0.0, None))


def test_records_scored_while_the_run_goes_are_not_scored_again_at_its_end(
    tmp_path: Path,
) -> None:
    project(tmp_path)  # writes the dataset and the config
    calls: list[int] = []
    plan = RunPlan.build(load_config(tmp_path / "ragev.toml"), RunOptions(),
                         [_counting_metric(calls)])
    dataset = load_dataset(tmp_path / "data", "mini")
    records = answered(dataset)
    fresh = evaluate(EvalInputs(plan=plan, dataset=dataset, records=records,
                                facts=RunFacts(), params={None: {}}))
    assert len(calls) == 5
    calls.clear()
    scorer = RecordScorer(plan, dataset)
    # Two progress writes: the first sees two records, the second all five.
    assert [r.qid for r in scorer.score(records[:2])] == [1, 2]
    scorer.score(records)
    scorer.score(records)
    assert sorted(calls) == [1, 2, 3, 4, 5]  # each record scored once
    carried, scored = scorer.carried(records)
    assert scored == {(None, qid) for qid in range(1, 6)}
    outcome = evaluate(EvalInputs(plan=plan, dataset=dataset, records=carried,
                                  facts=RunFacts(), params={None: {}}, scored=scored))
    assert len(calls) == 5  # nothing scored again at the end
    assert outcome.runs[0].samples == fresh.runs[0].samples
    assert outcome.runs[0].summary == fresh.runs[0].summary


def test_a_record_that_replaced_a_scored_one_is_scored_afresh(tmp_path: Path) -> None:
    project(tmp_path)
    calls: list[int] = []
    plan = RunPlan.build(load_config(tmp_path / "ragev.toml"), RunOptions(),
                         [_counting_metric(calls)])
    dataset = load_dataset(tmp_path / "data", "mini")
    records = answered(dataset)
    scorer = RecordScorer(plan, dataset)
    scored_first = scorer.score(records[:1])[0]
    assert scored_first.metrics["recall"] == 1.0
    # The scored copy is known too (what an item carries after its -v scoring).
    assert scorer.carried([scored_first])[1] == {(None, 1)}
    # An error record of the same question, or an equal record that is another object,
    # is not what was scored: the end of the run scores it itself.
    error = make_record(dataset.pairs[0], None, index=PassageIndex(dataset.corpus),
                        variant=None, error="RuntimeError: 超时")
    twin = Record.from_json(records[0].to_json())
    for other in (error, twin):
        carried, scored = scorer.carried([other])
        assert carried == [other] and scored == frozenset()
    outcome = evaluate(EvalInputs(plan=plan, dataset=dataset,
                                  records=[error, *scorer.score(records[1:])],
                                  facts=RunFacts(), params={None: {}},
                                  scored=scorer.carried(records[1:])[1]))
    assert outcome.runs[0].samples[0].error == "RuntimeError: 超时"
    assert outcome.runs[0].samples[0].metrics == {}
    assert outcome.errors == 1


def test_running_means_count_the_base_configuration_only(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path, '[[variants]]\nname = "bad"\n')
    scorer = RecordScorer(plan, dataset)
    means = RunningMeans(plan)
    means.add(scorer.score([*answered(dataset)[:2], *answered(dataset, "bad", good=False)]))
    summary = means.summary()
    assert summary["recall"].mean == 1.0 and summary["recall"].n == 2


def test_a_scorer_that_does_not_remember_keeps_nothing(tmp_path: Path) -> None:
    plan, dataset = project(tmp_path)
    records = answered(dataset)
    scorer = RecordScorer(plan, dataset, remember=False)
    scored = scorer.score(records)
    assert scored[0].metrics["recall"] == 1.0
    assert scorer.carried(records) == (records, frozenset())
    assert scorer.carried(scored) == (scored, frozenset())
