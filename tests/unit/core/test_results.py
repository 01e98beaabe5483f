"""RunResult: the figures of one run, read by the gate and every report."""

from __future__ import annotations

from pytest_ragev.core.record import Record
from pytest_ragev.core.results import MetricSummary, RunResult


def run(summary: dict[str, MetricSummary]) -> RunResult:
    samples = [Record(qid=1, question="Wer schrieb den Faust?", retrieval_gt=[[3]],
                      retrieval_ids=[3], generated_text="歌德", generated_gt="Goethe",
                      metrics={"recall": 1.0})]
    return RunResult(dataset_id="mini", fingerprint="f" * 64, dataset_stats={},
                     profile="weknora-0.9", params={}, params_hash="h" * 64,
                     samples=samples, summary=summary)


def test_summary_of_a_metric_the_run_has_and_one_it_lacks() -> None:
    recall = MetricSummary(name="recall", mean=1.0, n=1)
    result = run({"recall": recall})
    assert result.summary_of("recall") is recall
    # A metric the run lacks has no value, never a zero mean.
    assert result.summary_of("bleu4") == MetricSummary(name="bleu4", mean=None, n=0)
    assert result.scores("recall") == {1: 1.0} and result.scores("bleu4") == {}
