"""Latency, tokens and cost: what the answers' ``meta`` reported and what judging cost,
added up for the summary."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_ragev.config import Pricing
from pytest_ragev.core.record import Record

#: ``Answer.meta`` keys the summary reads: seconds one pipeline call took, and the
#: tokens of its prompt and completion (``total_tokens`` when only that is given). The
#: same keys under ``meta["usage"]`` (an OpenAI response's ``usage``) count too.
LATENCY_KEY = "latency_s"
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True)
class Usage:
    """Latency and token figures of a run, from the answers' ``meta`` (see
    :data:`LATENCY_KEY`, :data:`TOKEN_KEYS`); every ``*_n`` says how many answers
    reported the figure (``0``: the pipeline does not report it)."""

    latency_n: int = 0
    latency_p50: float | None = None
    latency_p95: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    tokens_n: int = 0
    #: Verdicts asked for this run (judged and custom metrics that reported tokens) and
    #: verdicts replayed from the store; the tokens of those asked for.
    judged_n: int = 0
    replayed_n: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    #: ``[pricing]``: its currency, and the cost of the pipeline's and of the judging's
    #: tokens this run (``None`` without a price).
    currency: str | None = None
    pipeline_cost: float | None = None
    judge_cost: float | None = None

    @property
    def reported(self) -> bool:
        """Whether any answer reported a latency or token count, or anything was judged."""
        return bool(self.latency_n or self.tokens_n or self.judged_n or self.replayed_n)

    def text(self) -> str:
        """``latency p50 0.84 s, p95 2.10 s (20 answers); tokens 12345 prompt + 2100
        completion = 14445 (20 answers)``, the parts the pipeline reported."""
        parts = []
        if self.latency_n:
            parts.append(
                f"latency p50 {self.latency_p50:.2f} s, p95 {self.latency_p95:.2f} s "
                f"({self.latency_n} answers)"
            )
        if self.tokens_n:
            split = (f"{self.prompt_tokens} prompt + {self.completion_tokens} completion = "
                     if self.prompt_tokens or self.completion_tokens else "")
            parts.append(f"tokens {split}{self.total_tokens} ({self.tokens_n} answers)")
        if self.judged_n or self.replayed_n:
            parts.append(
                f"judging {self.judge_prompt_tokens} prompt + {self.judge_completion_tokens} "
                f"completion tokens ({self.judged_n} verdicts asked, {self.replayed_n} "
                "replayed)")
        costs = [f"{who} {cost:.4f}" for who, cost in (("pipeline", self.pipeline_cost),
                                                       ("judging", self.judge_cost))
                 if cost is not None]
        if costs:
            parts.append(f"cost {self.currency} " + " + ".join(costs))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The figures as the JSON report writes them."""
        return {
            "latency_s": {"p50": self.latency_p50, "p95": self.latency_p95, "n": self.latency_n},
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                       "total": self.total_tokens, "n": self.tokens_n},
            "judging": {"prompt": self.judge_prompt_tokens,
                        "completion": self.judge_completion_tokens,
                        "asked": self.judged_n, "replayed": self.replayed_n},
            "cost": None if self.currency is None else {
                "currency": self.currency, "pipeline": self.pipeline_cost,
                "judging": self.judge_cost},
        }


def _meta_number(meta: Mapping[str, Any], key: str) -> float | None:
    value = meta.get(key)
    if value is None and isinstance(meta.get("usage"), Mapping):
        value = meta["usage"].get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def usage(samples: Sequence[Record], pricing: Pricing | None = None) -> Usage:
    """The latency percentiles and token totals the answers of ``samples`` reported,
    what judging them cost, and with ``pricing`` what both cost.

    A cached answer keeps the meta of the call that produced it, so its latency is that
    call's (its tokens count again: the cost of the answers, not of this run's calls).
    Questions that raised have no answer and count for nothing. A replayed verdict cost
    nothing this run. With ``--ragev-repeat R`` each of a question's R answers counts.
    """
    latencies: list[float] = []
    prompt = completion = total = counted = 0
    # Every answer counts: with --ragev-repeat a question's R answers were R calls.
    answers = [answer for sample in samples for answer in sample.every_answer]
    for sample in answers:
        if sample.error is not None or not sample.meta:
            continue  # an empty meta (the built-in pipeline's) reports nothing: no lookups
        latency = _meta_number(sample.meta, LATENCY_KEY)
        if latency is not None:
            latencies.append(latency)
        p, c, t = (_meta_number(sample.meta, key) for key in TOKEN_KEYS)
        if p is None and c is None and t is None:
            continue
        counted += 1
        prompt += int(p or 0)
        completion += int(c or 0)
        total += int(t) if t is not None else int((p or 0) + (c or 0))
    # numpy's default quantile: linear interpolation between the closest ranks.
    p50, p95 = ((float(q) for q in np.quantile(latencies, [0.5, 0.95])) if latencies
                else (None, None))
    asked = replayed = judge_prompt = judge_completion = 0
    for sample in answers:
        for verdict in sample.verdicts:
            if verdict.replayed:
                replayed += 1
            elif verdict.key or verdict.prompt_tokens or verdict.completion_tokens:
                asked += 1  # a judged verdict, or a custom metric that asked a model
                judge_prompt += verdict.prompt_tokens
                judge_completion += verdict.completion_tokens
    pipeline_price = pricing.pipeline if pricing is not None else None
    judge_price = pricing.judge if pricing is not None else None
    return Usage(
        latency_n=len(latencies),
        latency_p50=p50,
        latency_p95=p95,
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=total,
        tokens_n=counted,
        judged_n=asked, replayed_n=replayed,
        judge_prompt_tokens=judge_prompt, judge_completion_tokens=judge_completion,
        currency=pricing.currency if pricing is not None else None,
        pipeline_cost=(pipeline_price.cost(prompt, completion)
                       if pipeline_price is not None else None),
        judge_cost=(judge_price.cost(judge_prompt, judge_completion)
                    if judge_price is not None else None),
    )

