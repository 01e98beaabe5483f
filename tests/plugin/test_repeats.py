"""End to end: ``--ragev-repeat R`` answers each question R times (issue #31).

A seeded noisy conftest pipeline: each answer of each question is drawn from a
``random.Random`` seeded by (qid, answer number), so the test computes what the run
must record with ``pytest_ragev.metrics.score`` and ``statistics`` directly.
"""

from __future__ import annotations

import json
import math
import statistics
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.dataset import write_dataset
from pytest_ragev.metrics import MetricInput, score
from tests._judge_server import JudgeServer, quarter, words
from tests._pytester import SERIAL_AND_XDIST, read_json, run_ragev

Project = Callable[..., Path]

#: The noise: a question's answer number ``repeat`` retrieves its gold passages or two
#: distractors and keeps some of the reference's words, as its seed says.
NOISY = textwrap.dedent(
    """
    import random

    def noisy(qid, pids, reference, repeat):
        rng = random.Random(qid * 1000 + repeat)
        retrieved = list(pids) if rng.random() < 0.6 else [6, 7]
        words = reference.split()
        kept = [word for word in words if rng.random() < 0.7] or words[:1]
        return retrieved, " ".join(kept)
    """
)

# The hook every conftest here answers with: it logs each call (qid, repeat), then
# answers as ``logged_answer``'s body says.
_LOGGED_ANSWER = textwrap.dedent(
    """
    import os
    import threading

    import pytest
    from pytest_ragev import Answer

    _lock = threading.Lock()
    LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")

    @pytest.hookimpl
    def pytest_ragev_answer(case, kb, settings, repeat):
        with _lock, open(LOG, "a", encoding="utf-8") as log:
            log.write(f"{case.qid} {repeat}\\n")
    """
)



def logged_answer(body: str) -> str:
    """The conftest's answer hook: log the call, then run ``body`` (its last lines)."""
    return _LOGGED_ANSWER + textwrap.indent(textwrap.dedent(body), " " * 4)


NOISY_CONFTEST = NOISY + logged_answer("""\
    retrieved, text = noisy(case.qid, case.pids, case.answer or "", repeat)
    return Answer(retrieved=retrieved, text=text)
    """)

_namespace: dict[str, Any] = {}
exec(NOISY, _namespace)  # the same function the conftest answers with
noisy: Callable[[int, list[int], str, int], tuple[list[int], str]] = _namespace["noisy"]


def _calls(root: Path) -> Counter[tuple[int, int]]:
    log = root / "calls.log"
    if not log.exists():
        return Counter()
    return Counter(tuple(int(x) for x in line.split()) for line in  # type: ignore[misc]
                   log.read_text(encoding="utf-8").splitlines())


def _expected(sample: dict[str, Any], answers: int) -> list[dict[str, float]]:
    """Each answer's scores of one question, computed here from the seeded noise."""
    pids = [pid for group in sample["retrieval_gt"] for pid in group]
    inputs = []
    for repeat in range(answers):
        retrieved, text = noisy(sample["qid"], pids, sample["generated_gt"], repeat)
        inputs.append(MetricInput(retrieval_gt=sample["retrieval_gt"], retrieval_ids=retrieved,
                                  generated_text=text, generated_gt=sample["generated_gt"]))
    return score(inputs)


@pytest.mark.parametrize("dist", SERIAL_AND_XDIST, ids=["serial", "xdist"])
def test_five_answers_per_question_are_five_calls_their_means_and_spreads_recorded(
    pytester: pytest.Pytester, make_project: Project, dist: list[str]
) -> None:
    make_project("[run]\ncache = true\n", conftest=NOISY_CONFTEST,
                 pipeline="")
    result = run_ragev(pytester, "--ragev-repeat", "5", "--ragev-report", "r.json",
                       "--ragev-html", "r.html", *dist, cache=True)
    assert result.ret == 0, result.stdout.str()[-3000:]
    calls = _calls(pytester.path)
    assert sum(calls.values()) == 5 * 5
    assert set(calls) == {(qid, r) for qid in range(1, 6) for r in range(5)}
    assert set(calls.values()) == {1}
    report = read_json(pytester.path / "r.json")["data"]
    assert report["params"]["run"] == {"repeat": 5}
    spreads_seen = 0
    for sample in report["samples"]:
        expected = _expected(sample, 5)
        assert len(sample["repeats"]) == 4
        for metric, value in sample["metrics"].items():
            values = [each[metric] for each in expected]
            assert sample["scores"][metric] == pytest.approx(values, abs=1e-12)
            assert value == pytest.approx(math.fsum(values) / 5, abs=1e-12)
            spread = sample["spread"][metric]
            assert spread["sd"] == pytest.approx(statistics.stdev(values), abs=1e-12)
            if set(values) <= {0.0, 1.0}:
                ones = values.count(1.0)
                assert spread["disagree"] == pytest.approx(min(ones, 5 - ones) / 5)
            else:
                assert "disagree" not in spread
            spreads_seen += spread["sd"] > 0
    assert spreads_seen > 0  # the noise is there
    # The run's mean of a metric is the mean of the questions' means.
    means = {**report["metric"]["retrieval_metrics"], **report["metric"]["generation_metrics"]}
    for metric, mean in means.items():
        values = [s["metrics"][metric] for s in report["samples"]]
        assert mean == pytest.approx(math.fsum(values) / len(values), abs=1e-12)
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert '<th data-key="spread">spread</th>' in html
    for sample in report["samples"]:
        # The column names the metric the answers disagree on most.
        spread = sample["spread"]
        metric = max(spread, key=lambda name: (spread[name]["sd"], name))
        item = spread[metric]
        cell = (f"{metric} {round(item['disagree'] * 5)}/5 differ" if "disagree" in item
                else f"{metric} sd {item['sd']:.3f}")
        assert f'data-sort="{item["sd"]!r}">{cell}</td>' in html, cell
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "ragev: most unstable of 5 questions over 5 answers each: q*",
        "ragev: power: n=5 questions x R=5 answers:*with 1 answer per question it would take*",
    ])
    assert "INTERNALERROR" not in out
    # The saved report shows the same lines again.
    unstable = next(line for line in result.stdout.lines if "most unstable" in line)
    shown = pytester.run("ragev", "report", "show", "r.json")
    assert shown.ret == 0, shown.stderr.str()
    assert unstable in shown.stdout.lines

    # A rerun with the cache replays all R answers of every question: no call.
    again = run_ragev(pytester, "--ragev-repeat", "5", "--ragev-report", "r2.json", *dist,
                      cache=True)
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert sum(_calls(pytester.path).values()) == 25
    rerun = read_json(pytester.path / "r2.json")["data"]
    assert [s["scores"] for s in rerun["samples"]] == [s["scores"] for s in report["samples"]]
    again.stdout.fnmatch_lines(["*answer cache 25 hits / 0 misses*"])


def test_a_baseline_records_r_and_another_r_is_compared_in_one_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project('[baseline]\npath = "base.json"\n', conftest=NOISY_CONFTEST, pipeline="")
    first = run_ragev(pytester, "--ragev-repeat", "3", "--ragev-update-baseline")
    assert first.ret == 0, first.stdout.str()[-3000:]
    baseline = json.loads((pytester.path / "base.json").read_text(encoding="utf-8"))
    assert '"repeat": 3' in json.dumps(baseline)
    # One answer each now: compared, and said once.
    second = run_ragev(pytester)
    out = second.stdout.str()
    assert second.ret == 0, out[-3000:]
    assert out.count("answered each question 3 times, this run once") == 1, out[-3000:]
    assert sum(_calls(pytester.path).values()) == 5 * 3 + 5


def test_a_repeat_that_is_not_a_positive_number_is_one_clear_line(
    pytester: pytest.Pytester, make_project: Project
) -> None:
    make_project("[run]\nrepeat = 0\n", conftest=NOISY_CONFTEST, pipeline="")
    result = run_ragev(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragev.toml: ?run? repeat = 0 is invalid; use a whole number >= 1*"])
    cli = run_ragev(pytester, "--ragev-repeat", "zero")
    assert cli.ret == pytest.ExitCode.USAGE_ERROR
    cli.stderr.fnmatch_lines(["*--ragev-repeat*"])


#: Two Chinese and two Russian questions; each reference answer is the question's
#: passage. No digits: the judge counts each Han character as a word of its own.
JUDGED_QUERIES = {1: "长城有多长？", 2: "故宫在哪座城市？",
                  3: "Кто написал роман «Война и мир»?", 4: "Какая река течёт через Москву?"}
JUDGED_PASSAGES = {1: "长城全长超过两万公里", 2: "故宫位于北京市中心",
                   3: "Роман «Война и мир» написал Лев Толстой",
                   4: "Через Москву течёт река Москва"}

#: Answer number ``repeat`` keeps a seeded share of the reference's Han characters (or
#: words), then names its number: every answer differs, so each is judged.
JUDGED_NOISE = textwrap.dedent(
    """
    import random

    def noisy_text(qid, reference, repeat):
        rng = random.Random(qid * 1000 + repeat)
        han = any("\\u4e00" <= ch <= "\\u9fff" for ch in reference)
        units = list(reference) if han else reference.split()
        kept = [unit for unit in units if rng.random() < 0.6] or units[:1]
        return ("" if han else " ").join(kept) + f" #{repeat}"
    """
)

JUDGED_CONFTEST = JUDGED_NOISE + logged_answer("""\
    return Answer(retrieved=list(case.pids), text=noisy_text(case.qid, case.answer, repeat))
    """)

_judged_namespace: dict[str, Any] = {}
exec(JUDGED_NOISE, _judged_namespace)  # the function the conftest answers with
noisy_text: Callable[[int, str, int], str] = _judged_namespace["noisy_text"]


def test_each_of_r_answers_is_judged_and_a_cached_rerun_calls_nothing(
    pytester: pytest.Pytester, judge: JudgeServer
) -> None:
    """--ragev-repeat 3 with a judged metric on a real judge server: 3 x 4 pipeline calls
    and 3 x 4 judge calls; each question's correctness is the mean of its 3 verdicts
    (those this judge gives, computed here), its spread theirs; a rerun with the answer
    cache and the recorded verdicts calls neither the pipeline nor the judge."""
    write_dataset(pytester.path / "data", queries=JUDGED_QUERIES, corpus=JUDGED_PASSAGES,
                  answers={100 + q: text for q, text in JUDGED_PASSAGES.items()},
                  qrels=[(q, q) for q in JUDGED_QUERIES],
                  qas=[(q, 100 + q) for q in JUDGED_QUERIES])
    pytester.makeconftest(JUDGED_CONFTEST)
    (pytester.path / "ragev.toml").write_text(textwrap.dedent(f"""\
        [dataset]
        path = "data"
        id = "judged"

        [run]
        cache = true

        [metrics]
        judged = ["correctness"]

        [judge]
        base_url = "{judge.url}"
        model = "judge-1"
        max_retries = 1
        retry_backoff = 0
        timeout = 10
        store = "ragev-verdicts.jsonl"
        """), encoding="utf-8")
    repeats, questions = 3, len(JUDGED_QUERIES)
    result = run_ragev(pytester, "--ragev-repeat", str(repeats), "--ragev-report", "r.json",
                       cache=True)
    assert result.ret == 0, result.stdout.str()[-3000:]
    calls = _calls(pytester.path)
    assert calls == Counter({(q, r): 1 for q in JUDGED_QUERIES for r in range(repeats)})
    assert judge.calls == {"correctness": repeats * questions}
    report = read_json(pytester.path / "r.json")["data"]
    verdicts_differ = 0
    for sample in report["samples"]:
        reference = JUDGED_PASSAGES[sample["qid"]]
        texts = [noisy_text(sample["qid"], reference, r) for r in range(repeats)]
        assert sample["generated_text"] == texts[0]
        assert [each["generated_text"] for each in sample["repeats"]] == texts[1:]
        wanted = words(reference)
        verdicts = [quarter(len(wanted & words(text)) / len(wanted)) for text in texts]
        assert sample["scores"]["correctness"] == pytest.approx(verdicts, abs=1e-12)
        assert sample["metrics"]["correctness"] == pytest.approx(
            math.fsum(verdicts) / repeats, abs=1e-12)
        spread = sample["spread"]["correctness"]
        assert spread["sd"] == pytest.approx(statistics.stdev(verdicts), abs=1e-12)
        if set(verdicts) <= {0.0, 1.0}:
            ones = verdicts.count(1.0)
            assert spread["disagree"] == pytest.approx(min(ones, repeats - ones) / repeats)
        else:
            assert "disagree" not in spread
        verdicts_differ += len(set(verdicts)) > 1
    assert verdicts_differ > 0  # the judge saw the noise
    mean = report["metric"]["quality_metrics"]["correctness"]
    assert mean == pytest.approx(
        math.fsum(s["metrics"]["correctness"] for s in report["samples"]) / questions)

    # The rerun: every answer from the answer cache, every verdict from the store.
    judge.calls.clear()
    again = run_ragev(pytester, "--ragev-repeat", str(repeats), "--ragev-report", "r2.json",
                      cache=True)
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert sum(_calls(pytester.path).values()) == repeats * questions
    assert judge.total == 0
    rerun = read_json(pytester.path / "r2.json")["data"]
    assert ([s["scores"] for s in rerun["samples"]]
            == [s["scores"] for s in report["samples"]])
    assert ([s["spread"] for s in rerun["samples"]]
            == [s["spread"] for s in report["samples"]])
