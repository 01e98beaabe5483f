"""The regression gate: thresholds, paired tests against a baseline, per-question diffs.

Decisions over :class:`~pytest_ragev.core.results.RunResult` values: no pytest, no
session. :mod:`.rules` parses ``[gate]``, :mod:`.stats` holds the paired statistics,
:mod:`.thresholds` the absolute floors, :mod:`.compare` judges a metric of a run
against its baseline run, :mod:`.diffs` lists the most regressed questions and the
variants table, :mod:`.pairing` decides whether a run can be compared with a recorded
one and compares them (:func:`judge_against`: the one comparison path, which ``ragev
report compare`` takes too), :mod:`.snapshot` is the baseline file's format, and
:mod:`.workflow` runs the whole baseline life cycle for one session (:func:`run_gate`).
"""

from __future__ import annotations

from pytest_ragev.gate.compare import (
    Comparison,
    MetricComparison,
    Status,
    compare,
    judge,
    power_lines,
)
from pytest_ragev.gate.diffs import (
    MetricDelta,
    QuestionDiff,
    VariantCell,
    VariantRow,
    VariantTable,
    compare_variants,
    question_diff,
    top_regressions,
)
from pytest_ragev.gate.pairing import (
    CorpusChange,
    Judgement,
    Overlap,
    Recorded,
    judge_against,
    pair_questions,
)
from pytest_ragev.gate.rules import (
    CORRECTION_NAMES,
    CORRECTIONS,
    MODES,
    Correction,
    GateRules,
    MetricRule,
    Mode,
)
from pytest_ragev.gate.snapshot import (
    Snapshot,
    load_snapshot,
    merge_snapshot,
    obtained_path,
    write_snapshot,
)
from pytest_ragev.gate.stats import (
    PairedStats,
    decision_band,
    holm,
    maxt_columns,
    paired_stats,
    smallest_p,
    step_down_maxt,
)
from pytest_ragev.gate.thresholds import (
    MaxValue,
    MinValue,
    ThresholdResult,
    check_question,
    check_thresholds,
    thresholds_from_table,
)
from pytest_ragev.gate.workflow import GateInputs, GateOutcome, judged, run_gate

__all__ = [
    "CORRECTIONS",
    "CORRECTION_NAMES",
    "MODES",
    "Comparison",
    "CorpusChange",
    "Correction",
    "GateInputs",
    "GateOutcome",
    "GateRules",
    "Judgement",
    "MaxValue",
    "MetricComparison",
    "MetricDelta",
    "MetricRule",
    "MinValue",
    "Mode",
    "Overlap",
    "PairedStats",
    "QuestionDiff",
    "Recorded",
    "Snapshot",
    "Status",
    "ThresholdResult",
    "VariantCell",
    "VariantRow",
    "VariantTable",
    "check_question",
    "check_thresholds",
    "compare",
    "compare_variants",
    "decision_band",
    "holm",
    "judge",
    "judge_against",
    "judged",
    "load_snapshot",
    "maxt_columns",
    "merge_snapshot",
    "obtained_path",
    "pair_questions",
    "paired_stats",
    "power_lines",
    "question_diff",
    "run_gate",
    "smallest_p",
    "step_down_maxt",
    "thresholds_from_table",
    "top_regressions",
    "write_snapshot",
]
