"""The evaluation API of ``ragev serve``: WeKnora's routes, in the original's envelope.

Each endpoint names what it needs: the caller (:data:`ReadAccess`, :data:`RunAccess`),
checked before the request is read, and the :class:`Service`. Bad input is a 400
naming the field (the app's handler of FastAPI's validation errors), never a 422.

An endpoint's ``summary=`` is its documentation: FastAPI would publish a docstring as
the operation's description in ``/openapi.json``.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from pytest_ragev.core.errors import RagevError
from pytest_ragev.core.tables import suggest
from pytest_ragev.core.task import make_task_id
from pytest_ragev.server.catalog import FieldError
from pytest_ragev.server.dependencies import (
    AuthFirstRoute,
    ReadAccess,
    Requires,
    RunAccess,
    ServiceDep,
)
from pytest_ragev.server.envelope import ApiError, documented_errors, ok
from pytest_ragev.server.keys import Principal
from pytest_ragev.server.runner import Conflict
from pytest_ragev.server.schemas import (
    CancelEvaluation,
    CreateEvaluation,
    DetailEnvelope,
    ListEnvelope,
    NameQuery,
    PageEnvelope,
    PageQuery,
    StatusQuery,
    TaskEnvelope,
    TaskIdQuery,
    task_json,
)
from pytest_ragev.server.service import Service
from pytest_ragev.server.store import TaskFilter, now_iso

router = APIRouter(route_class=AuthFirstRoute)


# The original's routes end in a slash (`/api/v1/evaluation/`); both spellings answer,
# the document lists the one without.
@router.post("/api/v1/evaluation/", include_in_schema=False)
@router.post("/api/v1/evaluation", response_model=TaskEnvelope,
             responses=documented_errors(400, 401, 403, 413, 503),
             tags=["evaluation"], summary="create an evaluation task (returns at once)")
async def create(body: CreateEvaluation, principal: RunAccess, service: ServiceDep) -> Response:
    # In a worker thread: the catalog reads files, and a write may wait for a database
    # another process holds locked; the event loop keeps answering the pollers meanwhile.
    return ok(await run_in_threadpool(_create, service, principal, body))


def _create(service: Service, principal: Principal, body: CreateEvaluation) -> dict[str, Any]:
    try:
        plan = service.catalog.plan(
            dataset_id=body.dataset_id, knowledge_base_id=body.knowledge_base_id,
            embedding_id=body.embedding_id, chat_id=body.chat_id, rerank_id=body.rerank_id,
            judge_id=body.judge_id, config=body.config, variants=body.variants(), limit=body.limit,
            profile=body.profile,
        )
    except FieldError as exc:
        raise ApiError(400, exc.message, field=exc.field) from None
    except RagevError as exc:
        raise ApiError(400, f"the server's catalog is invalid: {exc}") from None
    created_ms = int(time.time() * 1000)
    task_id = make_task_id(plan.dataset_id, principal.tenant, now_ms=created_ms)
    row = {
        "id": task_id, "tenant_id": principal.tenant, "dataset_id": plan.dataset_id,
        "config": plan.config, "knowledge_base_id": plan.knowledge_base_id,
        "embedding_id": plan.embedding_id, "chat_id": plan.chat_id,
        "rerank_id": plan.rerank_id, "judge_id": plan.judge_id,
        "variants": list(plan.variants), "limit_n": plan.limit,
        "profile": plan.profile, "status": 0, "err_msg": "", "total": 0, "finished": 0,
        "created_ms": created_ms, "start_time": now_iso(), "created_by": principal.key_id,
    }
    service.store.add_task(row)
    service.runner.wake()
    stored = service.store.task(task_id)
    assert stored is not None
    return task_json(stored)


@router.get("/api/v1/evaluation/", include_in_schema=False)
@router.get("/api/v1/evaluation", response_model=DetailEnvelope,
            responses=documented_errors(400, 401, 404),
            tags=["evaluation"], summary="an evaluation task's status, params and metrics")
async def detail(principal: ReadAccess, service: ServiceDep, task_id: TaskIdQuery) -> Response:
    # SQLite writes the answer from the stored JSON (this is what pollers hit, many times
    # a second while a task runs): the row is neither parsed nor encoded again here.
    found = service.store.detail_json(task_id, principal.tenant)
    if found is None:
        service.own_task(principal, task_id)  # 404, as for every endpoint
    assert found is not None
    status, data = found
    if status == 0:  # queued: where in the queue (rare, and cheap to parse)
        queued = json.loads(data)
        queued["queue_position"] = service.runner.queue_position(task_id)
        return ok(queued)
    return Response(f'{{"success":true,"data":{data}}}'.encode(), media_type="application/json")


@router.get("/api/v1/evaluations", response_model=PageEnvelope,
            responses=documented_errors(400, 401),
            tags=["evaluation"], summary="the tenant's tasks, newest first")
async def listing(
    principal: ReadAccess,
    service: ServiceDep,
    page: PageQuery = 1,
    page_size: Annotated[int, Query(ge=1, le=1000)] = 20,
    status: StatusQuery = None,
    dataset_id: NameQuery = None,
    config: NameQuery = None,
) -> Response:
    where = TaskFilter(principal.tenant, status, dataset_id or None, config or None)
    total, items = service.store.summaries_json(where, offset=(page - 1) * page_size,
                                                limit=page_size)
    # The store renders each summary as JSON text (SQLite's json_object): the page is
    # joined, not parsed and encoded again.
    head = f'{{"success":true,"data":{{"total":{total},"page":{page},"page_size":{page_size},'
    body = head + '"items":[' + ",".join(items) + "]}}"
    return Response(body.encode("utf-8"), media_type="application/json")


@router.post("/api/v1/evaluation/cancel", response_model=TaskEnvelope,
             responses=documented_errors(400, 401, 403, 404, 409, 413, 503),
             tags=["evaluation"], summary="stop a running task (SIGTERM) or drop a queued one")
async def cancel(body: CancelEvaluation, principal: RunAccess, service: ServiceDep) -> Response:
    return ok(await run_in_threadpool(_cancel, service, principal, body.task_id))


def _cancel(service: Service, principal: Principal, task_id: str) -> dict[str, Any]:
    service.own_task(principal, task_id)
    try:
        service.runner.cancel(task_id)
    except Conflict:
        raise ApiError(409, f"evaluation {task_id!r} has already finished",
                       field="task_id") from None
    return task_json(service.own_task(principal, task_id))


@router.get("/api/v1/evaluation/samples", response_model=PageEnvelope,
            responses=documented_errors(400, 401, 404),
            tags=["evaluation"], summary="per-question records of a task, by qid")
async def samples(
    principal: ReadAccess,
    service: ServiceDep,
    task_id: TaskIdQuery,
    page: PageQuery = 1,
    page_size: Annotated[int, Query(ge=1, le=500)] = 50,
    variant: NameQuery = None,
) -> Response:
    row = service.own_task(principal, task_id)
    if variant:
        runs = service.task_variants(row)
        if variant not in runs:
            raise ApiError(400, f"variant: task {task_id!r} runs no variant {variant!r}; "
                                f"{suggest(variant, runs, noun='variants')}",
                           field="variant")
    shown = None if variant in (None, "", "base") else variant
    items = service.samples(row, shown)
    start = (page - 1) * page_size
    return ok({"total": len(items), "page": page, "page_size": page_size,
               "items": items[start:start + page_size]})


@router.get("/api/v1/datasets", response_model=ListEnvelope,
            responses=documented_errors(400, 401), dependencies=[Depends(Requires("read"))],
            tags=["catalog"], summary="the registered datasets")
async def datasets(service: ServiceDep) -> Response:
    return ok(await run_in_threadpool(_datasets, service))


def _datasets(service: Service) -> list[dict[str, Any]]:
    try:
        entries = service.catalog.datasets()
    except RagevError as exc:
        raise ApiError(400, f"the server's catalog is invalid: {exc}") from None
    return [{"id": e.dataset_id, "source": e.source, "available": e.path.is_dir()}
            for e in entries.values()]


@router.get("/api/v1/configs", response_model=ListEnvelope,
            responses=documented_errors(400, 401), dependencies=[Depends(Requires("read"))],
            tags=["catalog"], summary="the configs the server may run, and its models")
async def configs(service: ServiceDep) -> Response:
    return ok(await run_in_threadpool(_configs, service))


def _configs(service: Service) -> list[dict[str, Any]]:
    entries = [entry.to_json() for entry in service.catalog.configs_list()]
    try:
        models = {kind: sorted(service.catalog.models(kind))
                  for kind in ("embedding", "chat", "rerank", "judge")}
    except RagevError as exc:
        raise ApiError(400, f"the server's catalog is invalid: {exc}") from None
    for entry in entries:
        for kind, names in models.items():
            entry[f"{kind}_ids"] = names
    return entries


@router.get("/healthz", tags=["service"], summary="liveness, no key needed")
async def healthz(service: ServiceDep) -> Response:
    return ok({"status": "ok", "running": service.runner.running(),
               "queued": len(service.store.pending_ids())})
