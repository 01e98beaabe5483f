"""Repeated answers (issue #31): folding R scores into a mean, their spread, the power."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace

import pytest

from pytest_ragev.core.record import Record, spread_of
from pytest_ragev.evaluation.repeats import detectable_drops, repeat_summary
from pytest_ragev.evaluation.scoring import fold_answers
from pytest_ragev.gate import GateRules
from pytest_ragev.pipelines.answer_cache import answer_cache_key
from tests.unit.gate._runs import make_run


def test_the_spread_is_the_sample_sd_and_for_hits_the_share_that_disagrees() -> None:
    values = [0.2, 0.5, 0.4, 0.9, 0.1]
    spread = spread_of(values)
    assert spread.sd == pytest.approx(statistics.stdev(values))
    assert spread.disagree is None
    hits = spread_of([1.0, 0.0, 1.0, 1.0, 0.0])
    assert hits.disagree == pytest.approx(0.4)  # 2 of 5 differ from the majority
    assert hits.sd == pytest.approx(statistics.stdev([1, 0, 1, 1, 0]))
    assert spread_of([1.0, 1.0, 1.0]) == spread_of([1.0, 1.0, 1.0])
    assert spread_of([1.0, 1.0, 1.0]).sd == 0.0 and spread_of([1.0, 1.0]).disagree == 0.0


def _answer(qid: int, **metrics: float) -> Record:
    run = make_run({name: {qid: value} for name, value in metrics.items()})
    return run.samples[0]


def test_a_question_s_answers_fold_into_their_means_with_every_score_kept() -> None:
    answers = [_answer(3, recall=1.0, rougel=0.5, judged=0.7),
               _answer(3, recall=0.0, rougel=0.25),  # its judged verdict failed
               _answer(3, recall=1.0, rougel=0.5, judged=0.9)]
    folded = fold_answers(answers)
    assert folded.answers == 3 and folded.qid == 3
    assert folded.scores == {"recall": (1.0, 0.0, 1.0), "rougel": (0.5, 0.25, 0.5)}
    assert folded.metrics["recall"] == pytest.approx(2 / 3)
    assert folded.metrics["rougel"] == pytest.approx(math.fsum([0.5, 0.25, 0.5]) / 3)
    # A metric one answer has no value of has none for the question.
    assert "judged" not in folded.metrics
    assert folded.spread["recall"].disagree == pytest.approx(1 / 3)
    # Equal values stay exactly equal (no float drift for a deterministic pipeline).
    same = fold_answers([_answer(1, bleu4=0.1)] * 3)
    assert same.metrics["bleu4"] == 0.1


def test_a_folded_record_crosses_the_channel_and_the_report_whole() -> None:
    folded = replace(fold_answers([_answer(2, recall=1.0), _answer(2, recall=0.0)]),
                     slices=("lang:en", "tag:billing"))
    assert Record.from_json(json.loads(folded.to_json_text())) == folded
    again = Record.from_json(folded.to_report_json())
    assert again.scores == folded.scores
    # The report's writer adds a sample's slices when the run's slices are worth showing.
    assert again.slices == () and "slices" not in folded.to_report_json()
    assert again.answers == 2 and again.repeats[0].question == folded.question
    assert folded.to_report_json()["spread"] == {"recall": {"sd": pytest.approx(
        statistics.stdev([1.0, 0.0])), "disagree": 0.5}}


def test_the_smallest_detectable_drop_shrinks_with_the_square_root_of_r() -> None:
    samples = []
    for qid in range(40):
        values = (0.2, 0.6, 0.4, 0.8) if qid % 2 else (0.5, 0.5, 0.3, 0.7)
        sample = make_run({"rougel": {qid: sum(values) / 4}}).samples[0]
        samples.append(replace(sample, scores={"rougel": values}, repeats=(sample,) * 3))
    run = replace(make_run({"rougel": {q: 0.5 for q in range(40)}}), samples=samples)
    (drop,) = detectable_drops(run, GateRules())
    noise = statistics.fmean([statistics.variance((0.2, 0.6, 0.4, 0.8)),
                              statistics.variance((0.5, 0.5, 0.3, 0.7))])
    z = statistics.NormalDist().inv_cdf(0.95) + statistics.NormalDist().inv_cdf(0.8)
    assert drop.drop == pytest.approx(z * math.sqrt(2 * noise / (4 * 40)))
    assert drop.single == pytest.approx(drop.drop * 2)
    summary = repeat_summary(run, GateRules())
    assert summary is not None and summary.answers == 4
    assert summary.unstable[0].qid % 2 == 1  # the noisier questions first
    lines = summary.lines()
    assert lines[0].startswith("ragev: most unstable of 40 questions over 4 answers each: q1 ")
    assert "n=40 questions x R=4 answers" in lines[1]
    assert repeat_summary(make_run({"rougel": {1: 0.5}}), GateRules()) is None


def test_the_first_answer_keeps_its_cache_key_and_each_repeat_has_its_own() -> None:
    keys = {answer_cache_key("f" * 64, "s", 7, repeat) for repeat in range(5)}
    assert len(keys) == 5
    assert answer_cache_key("f" * 64, "s", 7) == answer_cache_key("f" * 64, "s", 7, 0)
