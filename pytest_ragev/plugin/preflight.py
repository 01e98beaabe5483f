"""What a run checks before any question runs, each problem one usage error (exit 4).

The hooks' custom metrics, the baseline file ``--ragev-update-baseline`` is to write,
and the services the remote pipelines call: found wrong at the start, not after every
question ran. :class:`~pytest_ragev.plugin.run.ActiveRun` calls these when the run
becomes active, with the values they read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.errors import name_variant
from pytest_ragev.core.types import BUILTIN_METRICS, CustomMetric, QAPair
from pytest_ragev.evaluation import Judge
from pytest_ragev.pipelines import Pipeline, Preflight, QuestionCheck, is_io_bound


def custom_metrics(groups: Iterable[Iterable[Any] | None]) -> tuple[CustomMetric, ...]:
    """The custom metrics the ``pytest_ragev_metrics`` implementations returned (one
    group each), checked: ``CustomMetric`` objects, each with a name of its own."""
    found: list[CustomMetric] = []
    for group in groups:
        for metric in group or ():
            if not isinstance(metric, CustomMetric):
                raise pytest.UsageError(
                    f"pytest_ragev_metrics returned {metric!r}; return "
                    "pytest_ragev.CustomMetric objects"
                )
            if metric.name in BUILTIN_METRICS:
                raise pytest.UsageError(
                    f"pytest_ragev_metrics: metric name {metric.name!r} is one of "
                    "pytest-ragev's own metrics (the answer-quality ones are switched on "
                    "under [metrics]); give the custom metric another name"
                )
            if metric.name in {m.name for m in found}:
                raise pytest.UsageError(
                    f"pytest_ragev_metrics: metric name {metric.name!r} is used twice; "
                    "give each custom metric its own name"
                )
            found.append(metric)
    return tuple(found)


def check_baseline_target(path: Path | None, source: Path) -> None:
    """``--ragev-update-baseline`` must be able to write its file: checked before any
    question runs, not after all of them."""
    if path is None:
        raise pytest.UsageError(
            "--ragev-update-baseline needs a baseline path; set [baseline] path in "
            f"{source} or pass --ragev-baseline PATH"
        )
    if path.is_dir():
        raise pytest.UsageError(
            f"--ragev-update-baseline: the baseline path {path} is a folder; point "
            "[baseline] path or --ragev-baseline at a file such as ragev-baseline.json"
        )
    folder = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if folder is None or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise pytest.UsageError(
            f"--ragev-update-baseline: cannot write {path} ({folder} is not a writable "
            "folder); choose another [baseline] path or fix the folder's permissions"
        )


def check_services(
    pipelines: Sequence[tuple[str | None, Pipeline]],
    *,
    source: Path,
    first: QAPair | None,
    cached: Callable[[str | None, QAPair], bool],
) -> None:
    """The environment each remote pipeline of ``pipelines`` (``(variant, pipeline)``)
    needs is set and, unless ``first`` is ``None`` (``[run] preflight = false``, or no
    question), its service answers ``first`` and takes the key: one request per
    configuration, none where ``cached`` says the answer comes from the answer cache.
    Either failing is one usage error naming the config file ``source``."""
    # Only pipelines that call a service (not the built-in one offline, whose cache
    # is better left unopened until the questions run).
    checks = [(variant, pipe) for variant, pipe in pipelines
              if isinstance(pipe, Preflight) and is_io_bound(pipe)]
    missing: list[str] = []
    seen: set[str] = set()
    for variant, pipe in checks:
        for line in pipe.missing_environment():
            if line not in seen:  # variants that inherit a key need it said once
                seen.add(line)
                missing.append(name_variant(f"{source}: {line}", source, variant))
    if missing:
        raise pytest.UsageError("; ".join(missing))
    if first is None:
        return
    for variant, pipe in checks:
        if cached(variant, first):
            continue  # a rerun served from the cache may not need the service at all
        reason = pipe.preflight(first)
        if reason is not None:
            raise pytest.UsageError(name_variant(
                f"{source}: {reason}; no question was asked (set [run] preflight = false "
                "to skip this check)", source, variant))


def check_judge(judge: Judge | None, *, source: Path, preflight: bool) -> None:
    """The environment the ``[judge]`` needs is set and (``preflight``) its service
    answers and takes the key: else one usage error before any question."""
    if judge is None:
        return
    missing = judge.missing_environment()
    if missing:
        raise pytest.UsageError("; ".join(f"{source}: {line}" for line in missing))
    if preflight:
        reason = judge.preflight()
        if reason is not None:
            raise pytest.UsageError(f"{source}: {reason}; no question was asked (set [run] "
                                    "preflight = false to skip this check)")


def check_answer_rows(
    pipelines: Sequence[tuple[str | None, Pipeline]], *, qids: Collection[int],
    configurations: Collection[str | None], source: Path,
) -> None:
    """A pipeline whose answers were made elsewhere (``replay``) must hold answers of
    this dataset's questions and this config's configurations only: extra rows are a
    usage error naming the file and the fix (a question it lacks fails on its own)."""
    seen: set[str] = set()
    for _, pipe in pipelines:
        if not isinstance(pipe, QuestionCheck):
            continue
        problem = pipe.check_questions(qids, configurations)
        if problem is not None and problem not in seen:
            seen.add(problem)
            raise pytest.UsageError(f"{source}: {problem}")
