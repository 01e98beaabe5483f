"""The metric engine: twelve metrics of retrieved ids and generated answers.

``score(inputs, profile="weknora")`` returns one ``{metric: value}`` dict per
:class:`~pytest_ragev.MetricInput`; ``aggregate(rows)`` turns them into the run's
means with the count per metric; ``score_columns(inputs)`` gives the same values as
one numpy array per metric. The exact definitions are in ``docs/metrics.md``.
"""

from __future__ import annotations

from pytest_ragev.core.types import GENERATION_METRICS, METRIC_NAMES, RETRIEVAL_METRICS, MetricInput
from pytest_ragev.metrics.coverage import LetterCoverage, TokenAudit, audit_tokens, letter_coverage
from pytest_ragev.metrics.engine import PROFILES, aggregate, score, score_columns
from pytest_ragev.metrics.text import (
    Tokenizer,
    cache_dir,
    clear_cache,
    jieba_tokenizer,
    tokenize,
    words,
)
from pytest_ragev.metrics.tokenizers import (
    TokenizerChoice,
    custom_tokenizer,
    resolve_tokenizer,
)

__all__ = [
    "GENERATION_METRICS",
    "METRIC_NAMES",
    "PROFILES",
    "RETRIEVAL_METRICS",
    "LetterCoverage",
    "MetricInput",
    "TokenAudit",
    "Tokenizer",
    "TokenizerChoice",
    "aggregate",
    "audit_tokens",
    "cache_dir",
    "clear_cache",
    "custom_tokenizer",
    "jieba_tokenizer",
    "letter_coverage",
    "resolve_tokenizer",
    "score",
    "score_columns",
    "tokenize",
    "words",
]
