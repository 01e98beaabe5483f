"""Request and response bodies of the HTTP API (pydantic): validation and the OpenAPI document.

The query parameters several routes share (:data:`TaskIdQuery`, :data:`PageQuery`,
:data:`StatusQuery`, :data:`NameQuery`) are typed here once, with their limits.

Request models are strict (``"5"`` is not a number) and forbid unknown fields, so a
typo is a 400 naming the field instead of a silently ignored option. Response models
describe the shapes for ``/openapi.json``; handlers send plain JSON of these shapes,
built from a stored task row by :func:`task_json`, :func:`request_json` and
:func:`summary_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, field_validator

# ------------------------------------------ query parameters the routes share
#: A task id in a query (``task_id``, the compare page's ``a`` and ``b``).
TaskIdQuery = Annotated[str, Query(min_length=1, max_length=300)]
#: A page number of a list.
PageQuery = Annotated[int, Query(ge=1, le=1_000_000)]
#: A task status filter (0 pending, 1 running, 2 success, 3 failed).
StatusQuery = Annotated[int | None, Query(ge=0, le=3)]
#: A dataset or config name in a filter, or a variant name.
NameQuery = Annotated[str | None, Query(max_length=200)]


class CreateEvaluation(BaseModel):
    """``POST /api/v1/evaluation``: the original's four fields plus this server's extensions."""

    model_config = ConfigDict(extra="forbid", strict=True)

    dataset_id: str | None = Field(None, max_length=200,
                                   description="a registered dataset (default: 'default')")
    knowledge_base_id: str | None = Field(
        None, max_length=200, description="the config whose [pipeline] the evaluation copies")
    embedding_id: str | None = Field(
        None, max_length=200, description="an embedding model of the server's model table")
    chat_id: str | None = Field(None, max_length=200,
                                description="a chat model of the server's model table")
    rerank_id: str | None = Field(None, max_length=200,
                                  description="a rerank model of the server's model table")
    judge_id: str | None = Field(
        None, max_length=200,
        description="a judge of the server's model table (an extension): the task's [judge]")
    config: str | None = Field(None, max_length=200,
                               description="the config to run (default: knowledge_base_id)")
    variant: list[str] | str | None = Field(None, description="run only these variants")
    limit: int | None = Field(None, ge=1, le=10_000_000,
                              description="only the first N questions")
    profile: Literal["weknora", "standard"] | None = Field(None, description="metric profile")

    @field_validator("dataset_id", "knowledge_base_id", "embedding_id", "chat_id", "rerank_id",
                     "judge_id", "config")
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        # The original's clients send "" for a field they leave unset (Go's zero value).
        return value or None

    def variants(self) -> list[str]:
        """``variant`` as a list."""
        if self.variant is None:
            return []
        return [self.variant] if isinstance(self.variant, str) else list(self.variant)


class CancelEvaluation(BaseModel):
    """``POST /api/v1/evaluation/cancel``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task_id: str = Field(..., min_length=1, max_length=300)


class Task(BaseModel):
    """The original's ``EvaluationTask`` plus ``end_time`` and ``duration`` (seconds)."""

    id: str
    tenant_id: int
    dataset_id: str
    start_time: str
    status: int = Field(..., description="0 pending, 1 running, 2 success, 3 failed")
    err_msg: str
    total: int
    finished: int
    end_time: str | None = None
    duration: float | None = None


class Request(BaseModel):
    """What the task was created with (an extension)."""

    config: str
    knowledge_base_id: str
    embedding_id: str | None = None
    chat_id: str | None
    rerank_id: str | None
    judge_id: str | None = None
    variant: list[str]
    limit: int | None
    profile: str | None


class Phase(BaseModel):
    """What a running task does: ``loading``, ``building_kb`` (``done``/``total``: the
    knowledge base's build), ``answering``, ``scoring``, ``gating``, ``writing_reports``."""

    name: str
    done: int | None = None
    total: int | None = None


class Detail(BaseModel):
    """The original's ``EvaluationDetail``; ``metric`` is the running mean while status 1.

    ``params`` is the settings snapshot with the original's flat ``ChatManage`` keys
    beside it; whether the configuration passed is ``verdict.passed`` (status 2 only says
    the evaluation ran to its end)."""

    task: Task
    params: dict[str, Any] | None
    metric: dict[str, Any] | None
    request: Request
    verdict: dict[str, Any] | None = None
    queue_position: int | None = None
    phase: Phase | None = None


class Summary(BaseModel):
    """One row of ``GET /api/v1/evaluations``."""

    task: Task
    metric: dict[str, Any] | None
    request: Request
    verdict: dict[str, Any] | None = None
    phase: Phase | None = None


class Page(BaseModel):
    """A page of a list, newest first."""

    total: int
    page: int
    page_size: int
    items: list[Any]


class TaskEnvelope(BaseModel):
    success: bool = True
    data: Task


class DetailEnvelope(BaseModel):
    success: bool = True
    data: Detail


class PageEnvelope(BaseModel):
    success: bool = True
    data: Page


class ListEnvelope(BaseModel):
    success: bool = True
    data: list[dict[str, Any]]


class ErrorBody(BaseModel):
    """The original's error object; ``details.field`` names the bad field when there is one."""

    code: int
    message: str
    details: dict[str, Any] | None = None


class ErrorEnvelope(BaseModel):
    success: Literal[False] = False
    error: ErrorBody


# ------------------------------------------------- the shapes above, from a task row
def task_json(row: dict[str, Any]) -> dict[str, Any]:
    """A :class:`Task` of the store's task row ``row``."""
    return {
        "id": row["id"], "tenant_id": row["tenant_id"], "dataset_id": row["dataset_id"],
        "start_time": row["start_time"], "status": row["status"], "err_msg": row["err_msg"],
        "total": row["total"], "finished": row["finished"], "end_time": row["end_time"],
        "duration": row["duration"],
    }


def request_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`Request` a task was created with."""
    return {
        "config": row["config"], "knowledge_base_id": row["knowledge_base_id"],
        "embedding_id": row.get("embedding_id"), "chat_id": row["chat_id"],
        "rerank_id": row["rerank_id"], "judge_id": row.get("judge_id"),
        "variant": row["variants"] or [],
        "limit": row["limit_n"], "profile": row["profile"],
    }


def summary_json(row: dict[str, Any]) -> dict[str, Any]:
    """A :class:`Summary`: one row of the list endpoint."""
    return {"task": task_json(row), "metric": row["metric"], "request": request_json(row),
            "verdict": row["verdict"], "phase": row.get("phase")}
