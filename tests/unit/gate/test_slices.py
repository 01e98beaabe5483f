"""The slice gate (``[gate] slices``): one max-T family over the run's and each slice's
metrics, its false-alarm rate, and a drop only a slice shows (issue #31)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from pytest_ragev.core.results import RunResult
from pytest_ragev.gate import GateRules, compare
from pytest_ragev.gate.rules import MetricRule
from pytest_ragev.gate.slices import slice_label
from tests.unit.gate._runs import make_run

METRICS = ("recall", "rougel", "bleu4")
LANGS = ("en", "zh", "de")
TAGS = ("billing", "setup", "account", "api")


def _slices_of(qid: int) -> tuple[str, ...]:
    """Three languages of equal size; each question one or two of four tags."""
    tags = {TAGS[qid % 4], *((TAGS[(qid // 4) % 4],) if qid % 3 == 0 else ())}
    return (f"lang:{LANGS[qid % 3]}", *sorted(f"tag:{tag}" for tag in tags))


def _with_slices(run: RunResult, slices: dict[int, tuple[str, ...]]) -> RunResult:
    return replace(run, samples=[replace(s, slices=slices[s.qid]) for s in run.samples])


def _pair(n: int, seed: int, *, drop_in: str | None = None,
          drop: float = 0.0) -> tuple[RunResult, RunResult]:
    """Two runs of the same noisy pipeline (a question's level plus independent answer
    noise on each side), optionally worse by ``drop`` on the questions of ``drop_in``."""
    rng = random.Random(seed)
    slices = {qid: _slices_of(qid) for qid in range(n)}
    before: dict[str, dict[int, float]] = {m: {} for m in METRICS}
    after: dict[str, dict[int, float]] = {m: {} for m in METRICS}
    for qid in range(n):
        level = rng.random()
        for metric in METRICS:
            shift = -drop if drop_in is not None and drop_in in slices[qid] else 0.0
            before[metric][qid] = min(max(level + rng.gauss(0, 0.15), 0.0), 1.0)
            after[metric][qid] = min(max(level + shift + rng.gauss(0, 0.15), 0.0), 1.0)
    return (_with_slices(make_run(before), slices), _with_slices(make_run(after), slices))


@pytest.mark.slow
def test_identical_noisy_runs_fail_the_slice_gate_at_most_alpha_of_the_time() -> None:
    """200 pairs of runs of one unchanged noisy pipeline: 3 metrics over the run and its
    7 slices are 24 tests, yet the gate fails at most alpha (0.05) of the time."""
    alpha = 0.05
    failed = 0
    tested_slices = set()
    for trial in range(200):
        before, after = _pair(120, seed=1000 + trial)
        rules = GateRules(resamples=1000, seed=trial, slices=("lang", "tag"))
        comparison = compare(before, after, rules)
        tested_slices.add(len(comparison.slices))
        assert comparison.metrics[0].family == 3 * (1 + len(comparison.slices))
        failed += not comparison.passed
    assert tested_slices == {7}
    assert failed / 200 <= alpha, failed
    # Without the correction over the slices the same 24 tests would fail far more often:
    # the family-wise control is what keeps it at alpha.
    uncorrected = sum(
        not compare(*_pair(120, seed=1000 + trial),
                    GateRules(resamples=1000, seed=trial, slices=("lang", "tag"),
                              correction="none")).passed
        for trial in range(60))
    assert uncorrected / 60 > alpha


def _confined_drop(seed: int, *, n: int = 2400, offset: float = 0.0,
                   drop: float = 0.18) -> tuple[RunResult, RunResult]:
    """``n`` noisy questions; a tag slice of 40 of them (``tag:faq``) loses ``drop`` on
    every metric, and the other questions gain ``offset`` (0: they only move by noise).
    At 2,400 questions the slice's paired z is about 5, the whole run's about 0.6."""
    before, after = _pair(n, seed=seed)
    chosen = set(range(0, n, n // 40))
    slices = {s.qid: (*s.slices, *(("tag:faq",) if s.qid in chosen else ()))
              for s in before.samples}
    rng = random.Random(seed)
    worse = {m: {s.qid: (max(s.metrics[m] - drop + rng.gauss(0, 0.02), 0.0)
                         if s.qid in chosen else min(s.metrics[m] + offset, 1.0))
                 for s in after.samples}
             for m in METRICS}
    return _with_slices(before, slices), _with_slices(make_run(worse), slices)


@pytest.mark.slow
def test_a_drop_in_one_slice_of_40_questions_is_found_by_the_slice_gate() -> None:
    """Over 20 such pairs the slice gate names the slice nearly every time; the gate on
    the whole run fails far less often (only when the noise adds to the drop)."""
    found = overall_failed = 0
    for seed in range(20):
        before, after = _confined_drop(seed)
        overall = compare(before, after, GateRules(resamples=2000, seed=seed))
        gated = compare(before, after, GateRules(resamples=2000, seed=seed,
                                                 slices=("lang", "tag")))
        overall_failed += not overall.passed
        keys = {item.key for item, _ in gated.slice_regressions}
        # Another slice is accused only when it holds some of the dropped questions
        # (then its mean did drop): a slice of untouched questions never is.
        dropped = {s.qid for s in after.samples if "tag:faq" in s.slices}
        for key in keys - {"tag:faq"}:
            assert any(key in s.slices for s in after.samples if s.qid in dropped), key
        found += "tag:faq" in keys
    assert found >= 18, found
    assert overall_failed <= 10, overall_failed


def test_a_slice_drop_the_rest_of_the_run_hides_fails_only_the_slice_gate() -> None:
    """The 40 questions lose 0.18 while the other 1,160 gain what keeps the run's mean:
    the whole run's gate cannot see it; the slice gate names the slice."""
    before, after = _confined_drop(3, n=1200, offset=0.18 * 40 / 1160)
    overall = compare(before, after, GateRules(resamples=2000))
    assert overall.passed, overall.failure_lines
    gated = compare(before, after, GateRules(resamples=2000, slices=("lang", "tag")))
    assert not gated.passed and not gated.regressions
    assert "tag:faq" in {item.key for item, _ in gated.slice_regressions}
    line = next(line for line in gated.failure_lines if line.startswith("ragev: faq: "))
    assert "< baseline" in line and "n=40)" in line
    assert "(max-T, " in line and " slices and the run)" in line


def test_slices_below_the_minimum_size_or_holding_every_question_are_not_tested() -> None:
    before, after = _pair(60, seed=3)
    # Every question is lang:en: a slice of all of them tests nothing new.
    same = {s.qid: ("lang:en", *(("tag:rare",) if s.qid < 5 else ())) for s in before.samples}
    before, after = _with_slices(before, same), _with_slices(after, same)
    comparison = compare(before, after, GateRules(resamples=500, slices=("lang", "tag")))
    assert comparison.slices == []
    assert comparison.metrics[0].family == len(METRICS)
    smaller = compare(before, after, GateRules(resamples=500, slices=("tag",), min_slice=5))
    assert [item.key for item in smaller.slices] == ["tag:rare"]


def test_only_the_kinds_named_are_tested() -> None:
    before, after = _pair(120, seed=5)
    langs = compare(before, after, GateRules(resamples=500, slices=("lang",)))
    assert {item.key.split(":")[0] for item in langs.slices} == {"lang"}
    assert compare(before, after, GateRules(resamples=500)).slices == []


def test_a_slice_is_named_by_its_name_unless_another_kind_shares_it() -> None:
    assert slice_label("lang:zh", ["lang:zh", "tag:billing"]) == "zh"
    assert slice_label("tag:zh", ["lang:zh", "tag:zh"]) == "tag:zh"


def test_in_tolerance_mode_each_slice_s_change_is_judged_against_the_tolerance() -> None:
    before, after = _pair(90, seed=9)
    chinese = {s.qid for s in after.samples if "lang:zh" in s.slices}
    # The same answers, but the Chinese questions each 0.1 lower.
    worse = {m: {s.qid: s.metrics[m] - (0.1 if s.qid in chinese else 0.0)
                 for s in before.samples} for m in METRICS}
    after = _with_slices(make_run(worse), {s.qid: s.slices for s in after.samples})
    rules = GateRules(default=MetricRule(mode="tolerance", max_drop=0.05),
                      slices=("lang",), resamples=200)
    comparison = compare(before, after, rules)
    assert not comparison.regressions  # the run loses 0.033: within 0.05
    assert {(item.key, m.metric) for item, m in comparison.slice_regressions} == {
        ("lang:zh", metric) for metric in METRICS}
    assert comparison.failure_lines[0].startswith("ragev: zh: recall ")
