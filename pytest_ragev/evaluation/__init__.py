"""The evaluation of a run: settings resolved once, records scored, the decision made.

:mod:`.plan` resolves the settings (:class:`RunPlan`), :mod:`.scoring` scores records
(:func:`score_records`, :class:`RecordScorer`, :class:`TextScoreMemo`,
:func:`build_run`), :mod:`.evaluate` turns a session's records into an :class:`Outcome`
(:func:`evaluate`), which :mod:`.outcome` defines with its parts; :mod:`.usage` adds up
the latency, tokens and cost. The answer-quality metrics: :mod:`.quality` scores
``similarity``, :mod:`.judge` asks the ``[judge]`` with the prompts of :mod:`.prompts`
and keeps its verdicts in the store of :mod:`.verdicts`, :mod:`.assess` computes the
judged and custom metrics of a question while it is answered.
"""

from __future__ import annotations

from pytest_ragev.evaluation.assess import AssessmentFailed, Assessor
from pytest_ragev.evaluation.evaluate import (
    PASSAGE_CHARS,
    AnsweredBy,
    EvalInputs,
    Phase,
    evaluate,
    run_params,
)
from pytest_ragev.evaluation.judge import Judge, JudgeConfig, JudgedTexts, JudgeFailed
from pytest_ragev.evaluation.outcome import (
    LOWEST_BY,
    NAMED_ERRORS,
    PERFECT,
    ChunkShare,
    LowestQuestions,
    Outcome,
    QuestionError,
    RunFacts,
    ShardPart,
    chunk_share,
    count_kinds,
    error_kind,
    errors_line,
    lowest_questions,
    question_errors,
)
from pytest_ragev.evaluation.plan import RunPlan, Tokenizer
from pytest_ragev.evaluation.quality import SimilarityScorer
from pytest_ragev.evaluation.scoring import (
    RecordScorer,
    RunningMeans,
    TextScoreMemo,
    TextScoreStore,
    build_run,
    score_records,
)
from pytest_ragev.evaluation.usage import LATENCY_KEY, TOKEN_KEYS, Usage, usage
from pytest_ragev.evaluation.verdicts import StoredVerdict, VerdictStore, write_store

__all__ = [
    "LATENCY_KEY",
    "LOWEST_BY",
    "NAMED_ERRORS",
    "PASSAGE_CHARS",
    "PERFECT",
    "TOKEN_KEYS",
    "AnsweredBy",
    "AssessmentFailed",
    "Assessor",
    "ChunkShare",
    "EvalInputs",
    "Judge",
    "JudgeConfig",
    "JudgeFailed",
    "JudgedTexts",
    "LowestQuestions",
    "Outcome",
    "Phase",
    "QuestionError",
    "RecordScorer",
    "RunFacts",
    "RunPlan",
    "RunningMeans",
    "ShardPart",
    "SimilarityScorer",
    "StoredVerdict",
    "TextScoreMemo",
    "TextScoreStore",
    "Tokenizer",
    "Usage",
    "VerdictStore",
    "build_run",
    "chunk_share",
    "count_kinds",
    "error_kind",
    "errors_line",
    "evaluate",
    "lowest_questions",
    "question_errors",
    "run_params",
    "score_records",
    "usage",
    "write_store",
]
