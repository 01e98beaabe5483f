"""End to end: the shards of a run with a custom metric and judged metrics, merged.

The project's ``pytest_ragev_metrics`` hook defines two custom metrics, and a real judge
on 127.0.0.1 (``tests/_judge_server.py``) grades correctness and faithfulness, over
Chinese and German questions. Three shards, each a real pytest run, are merged by the
installed ``ragev report merge --gate``: the merged report is the unsharded run's
(per-question values and verdicts, means, counts, the judge's usage) and so is its
failing verdict; the shards together asked the judge exactly what the unsharded run did.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_ragev.dataset import write_dataset
from tests._judge_server import JudgeServer
from tests._pytester import read_json, run_ragev
from tests.plugin.test_shards import (
    assert_not_gated,
    gate_lines,
    ragev,
    without_run_identity,
)

COUNT = 24
#: Even questions in Chinese, odd ones in German; each passage answers its own question.
QUERIES = {q: (f"第{q}号水库的容量是多少？" if q % 2 == 0 else
               f"Wie lang ist der Fluss Nummer {q}?") for q in range(1, COUNT + 1)}
CORPUS = {q: (f"第{q}号水库的容量是{q * 37 % 500}万立方米。" if q % 2 == 0 else
              f"Der Fluss Nummer {q} ist {q * 37 % 500} Kilometer lang.") for q in QUERIES}
CORPUS.update({900 + d: f"Ablenkung {d}: 无关的段落 {d}." for d in range(4)})

#: Good answers are the gold passage. The "worse" pipeline gets every third question
#: wrong: a distractor first and an answer that says nothing (in the question's language).
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_ragev import Answer, CustomMetric

    @pytest.hookimpl
    def pytest_ragev_build_knowledge_base(corpus, settings):
        return dict(corpus)

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings):
        gold = case.pids[0]
        distractor = 900 + case.qid % 4
        if settings.options.get("quality") == "worse" and case.qid % 3 == 0:
            text = "我不知道。" if case.qid % 2 == 0 else "Das weiß ich nicht."
            return Answer(retrieved=[distractor, gold], text=text,
                          meta={"latency_s": case.qid / 100})
        return Answer(retrieved=[gold, distractor], text=kb[gold],
                      meta={"latency_s": case.qid / 100})

    @pytest.hookimpl
    def pytest_ragev_metrics():
        return [
            # Unbounded, lower is better: the answer's length in characters.
            CustomMetric("answer_chars", lambda m: float(len(m.generated_text)),
                         direction="lower", bounds=(0.0, None), kind="generation"),
            # Reads the retrieved texts (the corpus's, for passage ids).
            CustomMetric("gold_first", lambda m: float(
                m.retrieved_texts[0] in m.generated_text)),
        ]
    """
)


def make_project(pytester: pytest.Pytester, judge: JudgeServer) -> Path:
    write_dataset(pytester.path / "data", queries=QUERIES, corpus=CORPUS,
                  answers={1000 + q: CORPUS[q] for q in QUERIES},
                  qrels=[(q, q) for q in QUERIES], qas=[(q, 1000 + q) for q in QUERIES])
    pytester.makeconftest(CONFTEST)
    config = pytester.path / "ragev.toml"
    config.write_text(textwrap.dedent(f"""\
        [dataset]
        path = "data"
        id = "zh-de"

        [pipeline]
        name = "hooks"
        quality = "good"

        [metrics]
        judged = ["correctness", "faithfulness"]

        [judge]
        base_url = "{judge.url}"
        model = "judge-1"
        max_retries = 1
        retry_backoff = 0
        timeout = 10
        store = "ragev-verdicts.jsonl"

        [baseline]
        path = "ragev-baseline.json"

        [gate]
        mode = "tolerance"
        """), encoding="utf-8")
    return config


@pytest.mark.slow
def test_shards_with_custom_and_judged_metrics_merge_to_the_unsharded_run(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    config = make_project(pytester, judge)
    created = run_ragev(pytester, "--ragev-update-baseline")
    assert created.ret == pytest.ExitCode.OK, created.stdout.str()
    store = pytester.path / "ragev-verdicts.jsonl"
    # The verdicts of the good answers, replayed by every later run: the unsharded run
    # and the shards start from the same store, and ask the judge only about new answers.
    recorded = store.read_bytes()
    config.write_text(config.read_text(encoding="utf-8").replace(
        'quality = "good"', 'quality = "worse"'), encoding="utf-8")

    judge.calls.clear()
    whole = run_ragev(pytester, "--ragev-report", "whole.json")
    assert whole.ret == pytest.ExitCode.TESTS_FAILED, whole.stdout.str()
    verdict = gate_lines(whole.stdout.lines)
    assert verdict[-1].startswith("ragev: verdict FAILED"), verdict
    asked_whole = dict(judge.calls)
    # Eight questions answered anew, each judged on both metrics; the rest replayed.
    assert asked_whole == {"correctness": 8, "faithfulness": 8}

    store.write_bytes(recorded)
    judge.calls.clear()
    shards = []
    for index in (1, 2, 3):
        path = pytester.path / f"shard-{index}.json"
        result = run_ragev(pytester, "--ragev-shard", f"{index}/3", "--ragev-report", path.name)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert_not_gated(result, index, 3, COUNT)
        shards.append(path)
    # Each question was judged by the shard that owns it, once: the unsharded run's asks.
    assert judge.calls == asked_whole
    shares = [read_json(path)["data"]["shard"] for path in shards]
    assert sorted(q for share in shares for q in share["questions"]) == list(QUERIES)
    assert all(share["custom_metrics"] for share in shares)

    merged = ragev(pytester.path, "report", "merge", *map(str, shards), "-o", "merged.json",
                   "--gate")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert gate_lines(merged.stdout.splitlines()) == verdict
    # The merge judges nothing again.
    assert judge.calls == asked_whole

    whole_data = without_run_identity(read_json(pytester.path / "whole.json"))
    merged_data = without_run_identity(read_json(pytester.path / "merged.json"))
    # Per question: every metric's value (custom and judged ones included) and verdicts.
    values = {s["qid"]: s["metrics"] for s in whole_data["samples"]}
    assert {s["qid"]: s["metrics"] for s in merged_data["samples"]} == values
    assert {"answer_chars", "gold_first", "correctness", "faithfulness"} <= set(values[3])
    assert values[3]["correctness"] < 1.0 < values[3]["answer_chars"]
    assert [s.get("verdicts") for s in merged_data["samples"]] == \
        [s.get("verdicts") for s in whole_data["samples"]]
    # Means and counts, custom and judged blocks included; the judge's usage (asked and
    # replayed verdicts, tokens); the comparison and the verdict.
    assert merged_data["metric"] == whole_data["metric"]
    assert merged_data["metric"]["quality_metrics"]["correctness"] < 1.0
    assert set(merged_data["metric"]["custom_metrics"]) == {"answer_chars", "gold_first"}
    assert merged_data["usage"] == whole_data["usage"]
    assert merged_data["usage"]["judging"]["asked"] == 16
    assert merged_data["baseline"] == whole_data["baseline"]
    assert merged_data["verdict"] == whole_data["verdict"]
    assert not merged_data["verdict"]["passed"]
    assert merged_data == whole_data
