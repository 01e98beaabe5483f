"""Whether a run can be compared with its recorded run, and how their questions pair."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.results import MetricSummary, RunResult, SampleResult
from pytest_ragev.gate import GateRules
from pytest_ragev.gate.pairing import (
    CorpusChange,
    Overlap,
    Recorded,
    corpus_change,
    judge_against,
    missing_variants_line,
    pair_questions,
    refusal,
)

RULES = GateRules(resamples=2_000)
#: Content hashes of questions 0..199, as Dataset.question_hashes gives them.
HASHES = {qid: f"{qid:04d}c0ffee{qid:06d}" for qid in range(200)}
TOKENIZER = "default/3 jieba==0.42.1"


def make_run(
    qids: range | list[int] = range(1, 6),
    *,
    variant: str | None = None,
    recall: float = 0.5,
    fingerprint: str = "a" * 64,
    profile: str = "weknora",
    tokenizer: str = TOKENIZER,
) -> RunResult:
    samples = [
        SampleResult(
            qid=qid, question=f"第{qid}个问题：Wie hoch ist der Turm?", retrieval_gt=[[qid]],
            retrieval_ids=[qid], generated_text="Er ist 330 Meter hoch.", generated_gt="330 m",
            metrics={"recall": recall}, variant=variant,
        )
        for qid in qids
    ]
    return RunResult(
        dataset_id="samples", fingerprint=fingerprint,
        dataset_stats={"passages": 3 * len(samples)}, profile=profile, params={},
        params_hash="h", samples=samples,
        summary={"recall": MetricSummary("recall", recall, len(samples))}, variant=variant,
        tokenizer=tokenizer,
    )


def recorded(*runs: RunResult, source: str = "ragev-baseline.json",
             hashes: dict[int, str] | None = None) -> Recorded:
    return Recorded(source=source, runs=runs or (make_run(),),
                    hashes=HASHES if hashes is None else hashes,
                    corpus_fingerprint="c" * 64, passages=15)


def test_another_profile_or_tokenizer_is_refused_in_one_line() -> None:
    file = recorded()
    assert refusal(file, make_run()) is None
    assert refusal(file, make_run(profile="standard")) == (
        "ragev: ragev-baseline.json was computed with metric profile 'weknora', this run uses "
        "'standard'; numbers across metric profiles are not comparable: re-baseline with "
        "--ragev-update-baseline, or set [metrics] profile back")
    # Another version of the rules, or another jieba: never compared, whatever the texts.
    for other in ("default/2 jieba==0.42.1", "default/3 jieba==0.40", "ja/2 fugashi==1.5.2"):
        assert refusal(file, make_run(tokenizer=other)) == (
            f"ragev: ragev-baseline.json was computed with the tokenizer {TOKENIZER!r}, this "
            f"run uses {other!r}; text metrics across tokenizers are not comparable: "
            "re-baseline with --ragev-update-baseline, or set [metrics] tokenizer back")
    judgement = judge_against(file, [make_run(tokenizer="custom cut")], RULES, hashes=HASHES)
    assert judgement.not_compared is not None and not judgement.comparisons
    assert not judgement.passed


def test_questions_pair_by_qid_and_content_hash_on_an_edited_dataset() -> None:
    file = recorded()
    before = file.runs[0]
    edited = {**HASHES, 2: "edited-question2", 4: "edited-answer-4"}
    current = make_run([3, 4, 5, 6, 7], fingerprint="b" * 64)
    overlap = pair_questions(file, before, current, edited)
    assert overlap == Overlap(common_qids=[3, 5], added=[6, 7], removed=[1, 2], changed=[4])
    # On the recorded dataset the fingerprint vouches for every question.
    same = pair_questions(file, before, make_run([3, 4, 5, 6, 7]), edited)
    assert isinstance(same, Overlap) and same.common_qids == [3, 4, 5] and same.changed == []
    # Every shared question edited: nothing left to compare.
    assert pair_questions(file, before, make_run([2, 4], fingerprint="b" * 64), edited) == (
        "ragev: ragev-baseline.json and this run share no unchanged question (5 in the "
        "baseline, 2 now, 2 of them edited since); re-baseline with --ragev-update-baseline")
    assert pair_questions(file, before, make_run([100, 101]), HASHES) == (
        "ragev: ragev-baseline.json and this run share no unchanged question (5 in the "
        "baseline, 2 now); re-baseline with --ragev-update-baseline")


def test_an_edit_needs_hashes_on_both_sides_and_strict_dataset_refuses_it() -> None:
    edited = make_run(fingerprint="b" * 64)
    changed = ("ragev: ragev-baseline.json was computed on dataset 'samples' (fingerprint "
               "aaaaaaaaaaaa), this run on 'samples' (fingerprint bbbbbbbbbbbb); the data "
               "changed")
    before = make_run()
    assert pair_questions(recorded(), before, edited, HASHES, strict=True) == (
        f"{changed} and [gate] strict_dataset = true: re-baseline with "
        "--ragev-update-baseline, or unset strict_dataset to compare the unchanged questions")
    assert pair_questions(recorded(hashes={}), before, edited, HASHES) == (
        f"{changed}, and ragev-baseline.json records no per-question content hashes to pair "
        "the unchanged questions: re-baseline with --ragev-update-baseline, or compare runs of "
        "one dataset")
    assert str(pair_questions(recorded(), before, edited, {})).endswith(
        "and this run records no per-question content hashes to pair the unchanged questions: "
        "pass the dataset it ran on (ragev report compare --dataset DIR)")
    # The same dataset passes under the strict rule.
    overlap = pair_questions(recorded(), before, make_run(), HASHES, strict=True)
    assert isinstance(overlap, Overlap) and overlap.common_qids == [1, 2, 3, 4, 5]


@given(st.sets(st.integers(0, 40), min_size=1), st.sets(st.integers(0, 40), min_size=1),
       st.sets(st.integers(0, 40)))
def test_every_question_is_compared_listed_or_edited_exactly_once(
    before_qids: set[int], after_qids: set[int], edited_qids: set[int]
) -> None:
    hashes = {qid: ("edited" if qid in edited_qids else HASHES[qid]) for qid in range(41)}
    before = make_run(sorted(before_qids))
    after = make_run(sorted(after_qids), fingerprint="b" * 64)
    overlap = pair_questions(recorded(before), before, after, hashes)
    shared = before_qids & after_qids
    if not shared - edited_qids:
        assert isinstance(overlap, str) and "share no unchanged question" in overlap
        return
    assert isinstance(overlap, Overlap)
    assert set(overlap.common_qids) == shared - edited_qids
    assert set(overlap.changed) == shared & edited_qids
    assert set(overlap.added) == after_qids - before_qids
    assert set(overlap.removed) == before_qids - after_qids


def test_missing_variants_are_named_in_one_line() -> None:
    file = recorded(make_run(), make_run(variant="k10"))
    assert missing_variants_line(file, ["k20", "rerank"], required=False) == (
        "ragev: warning: variant 'k20', 'rerank' are new, not compared (ragev-baseline.json has "
        "no run of them); record them with --ragev-update-baseline --ragev-variant k20 "
        "--ragev-variant rerank (the other runs in the file are kept)"
    )
    assert missing_variants_line(file, ["k20"], required=True, because=" (because)") == (
        "ragev: ragev-baseline.json has no run of variant 'k20' (it has: k10) (because); record "
        "it with --ragev-update-baseline --ragev-variant k20 (the other runs in the file are kept)"
    )
    judged = judge_against(file, [make_run(), make_run(variant="k20")], RULES, hashes=HASHES)
    assert judged.new_variants == ("k20",) and [c.variant for c in judged.comparisons] == [None]
    strict = judge_against(file, [make_run(variant="k20")],
                           GateRules(resamples=2_000, require_all_variants=True), hashes=HASHES)
    assert strict.not_compared == missing_variants_line(
        file, ["k20"], required=True, because=" and [gate] require_all_variants = true")


def test_a_file_without_the_base_run_is_not_compared_with_one() -> None:
    variants_only = recorded(make_run(variant="k10"), source="variants.json")
    judgement = judge_against(variants_only, [make_run()], RULES, hashes=HASHES)
    assert judgement.not_compared == (
        "ragev: variants.json has no run of the base configuration (only variants ran: k10); "
        "compare against a file that records it")
    # The variant itself compares.
    alone = judge_against(variants_only, [make_run(variant="k10")], RULES, hashes=HASHES)
    assert alone.not_compared is None and alone.comparisons[0].variant == "k10"


def test_a_corpus_change_is_reported_with_the_passage_counts() -> None:
    file = recorded()
    assert corpus_change(file, "c" * 64, 17) is None
    change = corpus_change(file, "d" * 64, 17)
    assert change == CorpusChange(passages_before=15, passages_after=17)
    assert change.line.startswith(
        "ragev: warning: the corpus changed since the baseline (15 → 17 passages): retrieval "
        "can move for every question"
    )
    edited = corpus_change(file, "d" * 64, 15)
    assert edited is not None and "(15 passages, texts edited)" in edited.line
    # Said only when the dataset changed at all, with the run's own passage count.
    grown = dataclasses.replace(make_run(fingerprint="b" * 64), dataset_stats={"passages": 17})
    judgement = judge_against(file, [grown], RULES, hashes=HASHES, corpus_fingerprint="d" * 64)
    assert judgement.corpus_change == change and judgement.notes[0] == change.line
    same = judge_against(file, [make_run()], RULES, hashes=HASHES, corpus_fingerprint="d" * 64)
    assert same.corpus_change is None


def test_a_regression_is_one_failure_line_and_the_questions_behind_it() -> None:
    before = make_run(range(1, 41), recall=1.0)
    worse = dataclasses.replace(make_run(range(1, 41), recall=1.0), samples=[
        dataclasses.replace(s, metrics={"recall": 0.0}) if s.qid <= 20 else s
        for s in make_run(range(1, 41), recall=1.0).samples])
    judgement = judge_against(recorded(before), [worse], RULES, hashes=HASHES)
    assert judgement.not_compared is None and not judgement.passed
    assert len(judgement.failures) == 1 and judgement.failures[0].startswith(
        "ragev: recall 0.500 < baseline 1.000")
    assert [d.qid for d in judgement.regressions][:3] == [1, 2, 3]
    assert judgement.recorded_runs == {None: before}


@pytest.mark.parametrize("variant", [None, "k10"])
def test_an_unchanged_run_passes(variant: str | None) -> None:
    runs = (make_run(), make_run(variant="k10"))
    judgement = judge_against(recorded(*runs), [make_run(variant=variant)], RULES, hashes=HASHES)
    assert judgement.passed and not judgement.failures
    assert judgement.comparisons[0].unchanged
