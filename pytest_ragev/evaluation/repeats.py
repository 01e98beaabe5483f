"""What answering each question R times showed: the unstable questions and the power.

With ``--ragev-repeat R`` every question has R scores per metric (``Record.scores``);
the gate pairs their means. :func:`repeat_summary` reads what the repeats say about
the run, from the per-question values alone (so a saved report gives the same):

* the questions whose answers disagree most (:class:`Unstable`, the terminal's
  "most unstable" line and the reports' spread column);
* per metric, the smallest drop of its mean the paired test can see at this n and R
  (:class:`DetectableDrop`), and what it would be with one answer per question.

**The smallest detectable drop.** Two runs of an unchanged pipeline differ, question by
question, by the noise of their answers. A question's R scores of a metric estimate that
noise: their sample variance ``s²``, averaged over the questions, is ``σ²``; the mean of
R answers has the variance ``σ²/R``, and the paired difference of two such runs
``2σ²/R``. The paired test then sees a drop ``δ`` of the mean over ``n`` questions with
80 % power at one-sided level ``alpha`` when ``δ >= (z(1-alpha) + z(0.8)) *
sqrt(2σ²/(R n))`` (the normal approximation of the sign-flip test, before the
correction across metrics, which only raises it). With one answer per question the same
drop would need ``sqrt(R)`` times more: what the repeats bought.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from pytest_ragev.core import fmt
from pytest_ragev.core.record import Record, Spread
from pytest_ragev.core.results import RunResult
from pytest_ragev.core.types import BUILTIN_METRICS
from pytest_ragev.gate.rules import GateRules

#: The power the smallest detectable drop is stated at.
POWER = 0.8
#: Questions the "most unstable" line names.
UNSTABLE_NAMED = 5


@dataclass(frozen=True)
class Unstable:
    """A question whose R answers disagree: on ``metric``, by ``spread``."""

    qid: int
    question: str
    metric: str
    spread: Spread
    answers: int
    variant: str | None = None

    @property
    def text(self) -> str:
        """``q12 rougel sd 0.31`` or ``q7 recall 2 of 5 answers differ``."""
        label = f"q{self.qid}" if self.variant is None else f"q{self.qid} [{self.variant}]"
        if self.spread.disagree is not None:
            differ = round(self.spread.disagree * self.answers)
            return f"{label} {self.metric} {differ} of {self.answers} answers differ"
        return f"{label} {self.metric} sd {fmt.num(self.spread.sd)}"


@dataclass(frozen=True)
class DetectableDrop:
    """The smallest drop of ``metric``'s mean the paired test sees 80 % of the time at
    ``alpha``, over ``n`` questions of ``answers`` answers each (``drop``), and with one
    answer each (``single``)."""

    metric: str
    n: int
    answers: int
    alpha: float
    drop: float
    single: float


@dataclass(frozen=True)
class RepeatSummary:
    """What the repeats of one run showed (see the module's doc)."""

    answers: int
    questions: int
    unstable: tuple[Unstable, ...] = ()
    drops: tuple[DetectableDrop, ...] = ()

    def lines(self) -> list[str]:
        """The terminal's lines: the most unstable questions, then the power."""
        lines = []
        if self.unstable:
            named = ", ".join(item.text for item in self.unstable[:UNSTABLE_NAMED])
            lines.append(f"ragev: most unstable of {self.questions} questions over "
                         f"{self.answers} answers each: {named}")
        else:
            lines.append(f"ragev: {self.answers} answers per question: every question's "
                         "answers scored alike")
        noisy = [drop for drop in self.drops if drop.drop > 0]
        if noisy:
            shown = noisy[:3]
            now = ", ".join(f"{d.metric} {fmt.num(d.drop)}" for d in shown)
            before = ", ".join(fmt.num(d.single) for d in shown)
            more = f" ({len(noisy) - len(shown)} more metrics vary less)" \
                if len(noisy) > len(shown) else ""
            first = shown[0]
            lines.append(
                f"ragev: power: n={first.n} questions x R={first.answers} answers: the "
                f"paired test sees a drop of {now}{more} {int(POWER * 100)}% of the time at "
                f"alpha {first.alpha:g}; with 1 answer per question it would take {before}"
            )
        return lines


def _bounded(run: RunResult, metric: str) -> bool:
    """Whether ``metric`` lies in [0, 1] (the built-ins; custom metrics may be seconds)."""
    return metric in BUILTIN_METRICS


def unstable_questions(run: RunResult) -> list[Unstable]:
    """The questions of ``run`` whose answers disagree, most first: each by its metric
    (of those in [0, 1]) with the largest standard deviation over its answers."""
    found: list[tuple[float, Unstable]] = []
    for sample in run.samples:
        if not sample.repeats or sample.error is not None:
            continue
        spreads = {name: item for name, item in sample.spread.items() if _bounded(run, name)}
        if not spreads:
            continue
        metric = max(spreads, key=lambda name: (spreads[name].sd, name))
        if spreads[metric].sd <= 0:
            continue
        found.append((spreads[metric].sd, Unstable(
            qid=sample.qid, question=sample.question, metric=metric, spread=spreads[metric],
            answers=sample.answers, variant=sample.variant)))
    found.sort(key=lambda item: (-item[0], item[1].qid))
    return [item for _, item in found]


def detectable_drops(run: RunResult, rules: GateRules) -> list[DetectableDrop]:
    """Per metric with answers to compare (see the module's doc), noisiest first."""
    normal = NormalDist()
    drops = []
    for metric in run.summary:
        variances = []
        answers = 0
        for sample in run.samples:
            values = sample.scores.get(metric)
            if values is None or len(values) < 2 or sample.error is not None:
                continue
            mean = math.fsum(values) / len(values)
            variances.append(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
            answers = max(answers, len(values))
        if not variances:
            continue
        alpha = rules.rule_for(metric).significance
        z = normal.inv_cdf(1 - alpha) + normal.inv_cdf(POWER)
        noise = math.fsum(variances) / len(variances)
        n = len(variances)
        drop = z * math.sqrt(2 * noise / (answers * n))
        drops.append(DetectableDrop(metric=metric, n=n, answers=answers, alpha=alpha,
                                    drop=drop, single=drop * math.sqrt(answers)))
    drops.sort(key=lambda item: (-item.drop, item.metric))
    return drops


def repeat_summary(run: RunResult | None, rules: GateRules) -> RepeatSummary | None:
    """What the repeats of ``run`` showed; ``None`` when it answered each question once."""
    if run is None:
        return None
    answered = [s for s in run.samples if s.error is None]
    answers = max((s.answers for s in answered), default=1)
    if answers < 2:
        return None
    return RepeatSummary(answers=answers, questions=len(answered),
                         unstable=tuple(unstable_questions(run)),
                         drops=tuple(detectable_drops(run, rules)))


def spread_cell(sample: Record, metric: str) -> str:
    """A question's spread on ``metric`` as a report's cell: ``sd 0.12``, ``2/5
    differ``, or ``""`` without repeats."""
    item = sample.spread.get(metric)
    if item is None:
        return ""
    if item.disagree is not None:
        return f"{round(item.disagree * sample.answers)}/{sample.answers} differ"
    return f"sd {fmt.num(item.sd)}"
