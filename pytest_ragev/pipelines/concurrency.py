"""How many pipeline calls run at once when nothing sets it: the concurrency policy.

What a configuration's pipeline waits on decides it (:func:`pipeline_kind`): a service
(``[pipeline.chat]``, ``http``, a factory), the built-in pipeline's own CPU work, or the
project's code. ``--ragev-concurrency`` and ``[run] concurrency`` override it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

from pytest_ragev.pipelines.builtin import BuiltinPipeline
from pytest_ragev.pipelines.protocol import Pipeline
from pytest_ragev.pipelines.remote import FactoryPipeline, HttpRagPipeline
from pytest_ragev.pipelines.replay import ReplayPipeline

#: Calls in flight by default for pipelines that wait on a service (chat, http, factory).
IO_BOUND_CONCURRENCY = 8

#: What the default number of calls in flight depends on: a pipeline that waits on a
#: service (``"service"``), the built-in one offline (``"builtin"``), or the project's own
#: code (``"project"``: conftest hooks).
PipelineKind = Literal["service", "builtin", "project"]


def default_concurrency(kind: PipelineKind = "project") -> int:
    """Calls in flight when nothing sets it.

    A pipeline that waits on a service gets :data:`IO_BOUND_CONCURRENCY` whatever the
    CPU count: its threads sleep on sockets, and a 2-core CI runner would otherwise ask
    one question at a time. The built-in pipeline offline gets 1: its keyword search
    holds the GIL and its vector scan already runs on every core, so more threads only
    contend (two threads ran it at 0.76-0.99x of one, keyword and hybrid alike, see
    docs/plugin.md). The project's own code gets one thread fewer than the CPUs, at
    least one: it may compute outside the GIL (numpy, a model).
    """
    if kind == "service":
        return IO_BOUND_CONCURRENCY
    if kind == "builtin":
        return 1
    return max((os.cpu_count() or 1) - 1, 1)


def is_io_bound(pipe: Pipeline) -> bool:
    """Whether ``pipe`` mostly waits on a service (an ``http`` pipeline, a factory, the
    built-in one with a remote chat model): such pipelines run more calls at once."""
    if isinstance(pipe, HttpRagPipeline | FactoryPipeline):
        return True
    return isinstance(pipe, BuiltinPipeline) and pipe.io_bound


def pipeline_kind(pipes: Sequence[Pipeline]) -> PipelineKind:
    """What the default concurrency is chosen for, given the selected configurations'
    pipelines (none: the project's hooks answer): every one waits on a service, every
    one is the built-in pipeline offline, or else the project's code (hooks, a mix)."""
    if pipes and all(is_io_bound(pipe) for pipe in pipes):
        return "service"
    # A replay reads its answers from memory: one call at a time, as the built-in one.
    if pipes and all(isinstance(pipe, ReplayPipeline)
                     or (isinstance(pipe, BuiltinPipeline) and not is_io_bound(pipe))
                     for pipe in pipes):
        return "builtin"
    return "project"
