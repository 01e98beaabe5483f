"""The application's routes as FastAPI sees them: what each reads from the request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fastapi.dependencies.models import Dependant

from pytest_ragev.server.app import create_app, operations
from pytest_ragev.server.dependencies import required_action
from pytest_ragev.server.settings import ServerSettings

#: (method, path) -> the access the key needs, the query parameters, the body model.
ROUTES = {
    ("POST", "/api/v1/evaluation"): ("run", set(), "CreateEvaluation"),
    ("POST", "/api/v1/evaluation/"): ("run", set(), "CreateEvaluation"),
    ("GET", "/api/v1/evaluation"): ("read", {"task_id"}, None),
    ("GET", "/api/v1/evaluation/"): ("read", {"task_id"}, None),
    ("GET", "/api/v1/evaluations"): (
        "read", {"page", "page_size", "status", "dataset_id", "config"}, None),
    ("POST", "/api/v1/evaluation/cancel"): ("run", set(), "CancelEvaluation"),
    ("GET", "/api/v1/evaluation/samples"): (
        "read", {"task_id", "page", "page_size", "variant"}, None),
    ("GET", "/api/v1/datasets"): ("read", set(), None),
    ("GET", "/api/v1/configs"): ("read", set(), None),
    ("GET", "/healthz"): (None, set(), None),
    ("GET", "/"): (None, {"page", "dataset_id", "config", "status"}, None),
    ("GET", "/login"): (None, {"next"}, None),
    ("POST", "/login"): (None, set(), None),
    ("POST", "/logout"): (None, set(), None),
    ("GET", "/runs/{task_id}"): (None, set(), None),
    ("GET", "/runs/{task_id}/report.html"): (None, set(), None),
    ("GET", "/trends"): (None, {"dataset_id", "config"}, None),
    ("GET", "/compare"): (None, {"a", "b"}, None),
    ("GET", "/assets/dashboard.js"): (None, set(), None),
}


def _tree(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _tree(sub)


def test_every_route_reads_only_its_own_parameters(tmp_path: Path) -> None:
    # The access each key needs (Requires, checked before the request is read) and what
    # each endpoint reads; a parameter that lost its Depends would show up here as a
    # body or a query parameter.
    create_app(ServerSettings(workspace=tmp_path / "ws", configs=tmp_path))
    seen = {}
    for route in operations():
        tree = list(_tree(route.dependant))
        query = {param.alias for part in tree for param in part.query_params}
        bodies = [param.field_info.annotation for part in tree for param in part.body_params]
        body = getattr(bodies[0], "__name__", None) if len(bodies) == 1 else bodies or None
        for method in route.methods or ():
            seen[(method, route.path)] = (required_action(route), query, body)
    assert seen == ROUTES
