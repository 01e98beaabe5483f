"""The running mean a poller reads while a task runs, from the run's per-question lines."""

from __future__ import annotations

from pytest_ragev.core.types import GENERATION_METRICS, RETRIEVAL_METRICS
from pytest_ragev.server.follow import Means


def test_the_running_mean_has_the_final_reports_blocks() -> None:
    """The twelve, and the judged and custom metrics the questions have so far, in the
    blocks the final report puts them in; a question counted once, an error not at all."""
    means = Means()
    means.add({"qid": 1, "metrics": {"recall": 1.0, "rougel": 0.5, "correctness": 0.75,
                                     "länge": 3.0}})
    means.add({"qid": 1, "metrics": {"recall": 0.0}})  # the same question again
    means.add({"qid": 2, "metrics": {"recall": 0.5, "rougel": 0.25, "correctness": 0.25,
                                     "länge": 5.0}})
    means.add({"qid": 3, "error": "PipelineError: 超时", "metrics": {}})
    block = means.block(None)
    assert block is not None
    assert set(block["retrieval_metrics"]) == set(RETRIEVAL_METRICS)
    assert set(block["generation_metrics"]) == set(GENERATION_METRICS)
    assert block["retrieval_metrics"]["recall"] == 0.75
    assert block["generation_metrics"]["rougel"] == 0.375
    assert block["retrieval_metrics"]["mrr"] is None
    assert block["quality_metrics"] == {"correctness": 0.5}
    assert block["custom_metrics"] == {"länge": 4.0}
    assert block["counts"]["correctness"] == 2 and block["counts"]["länge"] == 2
    assert means.block("faster") is None  # a variant with no question yet


def test_a_run_of_the_twelve_has_no_other_block() -> None:
    means = Means()
    means.add({"qid": 7, "variant": "k256", "metrics": {"ndcg10": 1.0}})
    block = means.block("k256")
    assert block is not None and set(block) == {"retrieval_metrics", "generation_metrics",
                                                "counts"}
