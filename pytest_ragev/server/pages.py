"""The dashboard's routes: the login, the pages, a run's HTML report and the script.

The HTML itself is :mod:`.dashboard`'s (pure functions of the task rows); these routes
find the rows and answer with the page and its headers. A page needs a dashboard login
(or a key in a header): a visitor without one is sent to ``/login``. None of these
routes is in the OpenAPI document.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pytest_ragev.server import dashboard
from pytest_ragev.server.dependencies import AuthFirstRoute, ServiceDep, SettingsDep
from pytest_ragev.server.envelope import ApiError, error_response
from pytest_ragev.server.keys import Principal, split_key, verify
from pytest_ragev.server.schemas import (
    NameQuery,
    PageQuery,
    StatusQuery,
    TaskIdQuery,
    summary_json,
)
from pytest_ragev.server.service import SESSION_COOKIE
from pytest_ragev.server.store import TaskFilter

router = APIRouter(route_class=AuthFirstRoute, include_in_schema=False)

#: The headers of every dashboard page: its own script and inline CSS, nothing else.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
#: The inline scripts of a plugin HTML report (it writes them bare: ``<script>...</script>``;
#: the report's own text is escaped, so no question can open one).
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
#: Runs per page of the runs list.
_RUNS_PER_PAGE = 50


def report_headers(page: str) -> dict[str, str]:
    """The headers of a run's HTML report: its own inline scripts may run (the sortable,
    filterable questions table), by hash, and nothing else; the document is sandboxed
    without ``allow-same-origin``, so those scripts get an origin of their own: no
    cookie, no request to this server, no reach into the dashboard around them."""
    hashes = sorted({
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest())
        .decode("ascii") + "'"
        for script in _INLINE_SCRIPT.findall(page)
    })
    scripts = f"script-src {' '.join(hashes)}; " if hashes else ""
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; {scripts}"
            "frame-ancestors 'self'; base-uri 'none'; form-action 'none'; "
            "sandbox allow-scripts"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


async def current_login(request: Request, service: ServiceDep) -> Principal | None:
    """Who is logged in (a session cookie, or a key in a header) and may read; else
    ``None``: a page then sends the visitor to the login form instead of an error."""
    try:
        return service.authorize(request, "read")
    except ApiError:
        return None


Login = Annotated[Principal | None, Depends(current_login)]


def html(text: str, status: int = 200) -> HTMLResponse:
    """A dashboard page with :data:`PAGE_HEADERS`."""
    return HTMLResponse(text, status_code=status, headers=PAGE_HEADERS)


def login_redirect(request: Request) -> Response:
    """To the login form, which comes back to this page (path and query) afterwards."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)


@router.get("/")
async def home(
    request: Request,
    principal: Login,
    service: ServiceDep,
    page: PageQuery = 1,
    dataset_id: NameQuery = None,
    config: NameQuery = None,
    status: StatusQuery = None,
) -> Response:
    """The runs list, newest first, filtered by dataset, config and status."""
    if principal is None:
        return login_redirect(request)
    where = TaskFilter(principal.tenant, status, dataset_id or None, config or None)
    total, rows = service.store.tasks(where, offset=(page - 1) * _RUNS_PER_PAGE,
                                      limit=_RUNS_PER_PAGE)
    return html(dashboard.runs_page(
        [summary_json(r) for r in rows], total=total, page=page, page_size=_RUNS_PER_PAGE,
        principal=principal, filters={"dataset_id": dataset_id, "config": config,
                                      "status": status},
        series=service.store.series_names(principal.tenant)))


@router.get("/login")
async def login_form(
    next_path: Annotated[str | None, Query(alias="next", max_length=2000)] = None,
) -> Response:
    """The login form; ``next`` is where a successful login goes."""
    return html(dashboard.login_page(next_path=next_path))


@router.post("/login")
async def login(request: Request, service: ServiceDep, settings: SettingsDep) -> Response:
    """Check the key of the form and start a session: a cookie with a random token (the
    store keeps its digest), never the key itself."""
    # Parsed here: FastAPI's Form() needs python-multipart, which [server] does not install.
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    text = (form.get("key") or [""])[0].strip()
    next_path = dashboard.safe_next((form.get("next") or ["/"])[0])
    parts = split_key(text)
    stored = service.stored_key(parts[0]) if parts else None
    if parts is None or stored is None or not verify(stored, parts[1]):
        return html(dashboard.login_page("That key is not valid (or was revoked).",
                                         next_path), 401)
    request.scope["state"]["key_id"] = stored.key_id
    token = secrets.token_urlsafe(32)
    lifetime = settings.session_hours * 3600.0
    service.store.add_session(token, stored.key_id, lifetime)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(SESSION_COOKIE, token, max_age=int(lifetime), httponly=True,
                        samesite="strict", path="/")
    return response


@router.post("/logout")
async def logout(request: Request, service: ServiceDep) -> Response:
    """End the session (its token is forgotten) and go to the login form."""
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        service.store.drop_session(token)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/runs/{task_id}")
async def run_page(request: Request, principal: Login, service: ServiceDep,
                   settings: SettingsDep, task_id: str) -> Response:
    """One run: settings, metrics, verdict, the log's end when it failed, its report."""
    if principal is None:
        return login_redirect(request)
    row = service.store.task(task_id, tenant=principal.tenant)
    if row is None:
        return html(dashboard.not_found(f"No evaluation task {task_id!r}."), 404)
    folder = settings.tasks_dir / task_id
    previous = [r for r in service.store.history(principal.tenant, row["dataset_id"],
                                                 row["config"], row["limit_n"])
                if r["id"] != task_id]
    return html(dashboard.run_page(
        summary_json(row), params=row["params"],
        has_report=(folder / "report.html").is_file() and row["status"] in (2, 3),
        log_tail=(_log_tail(folder) or "").replace(str(service.catalog.configs) + os.sep, "")
        if row["status"] == 3 else None,
        previous=previous[-1]["id"] if previous else None, principal=principal))


@router.get("/runs/{task_id}/report.html")
async def run_report(principal: Login, settings: SettingsDep, service: ServiceDep,
                     task_id: str) -> Response:
    """The plugin's HTML report of a run, for the run page's sandboxed frame."""
    if principal is None:
        return error_response(401, "log in first")
    row = service.store.task(task_id, tenant=principal.tenant)
    path = settings.tasks_dir / task_id / "report.html"
    if row is None or not path.is_file():
        return html(dashboard.not_found("This run has no HTML report."), 404)
    page = path.read_text(encoding="utf-8")
    return HTMLResponse(page, headers=report_headers(page))


@router.get("/trends")
async def trends(request: Request, principal: Login, service: ServiceDep,
                 dataset_id: NameQuery = None, config: NameQuery = None) -> Response:
    """Each metric over the finished runs, per dataset and config (one pair if named)."""
    if principal is None:
        return login_redirect(request)
    names = service.store.series_names(principal.tenant)
    if dataset_id and config:
        names = [(d, c, n) for d, c, n in names if d == dataset_id and c == config]
    series = [(d, c, n, service.store.history(principal.tenant, d, c, n)) for d, c, n in names]
    return html(dashboard.trends_page(series, principal))


@router.get("/compare")
async def compare_page(request: Request, principal: Login, service: ServiceDep,
                       a: TaskIdQuery, b: TaskIdQuery) -> Response:
    """Run ``b`` against run ``a``: the gate's paired comparison of their reports."""
    if principal is None:
        return login_redirect(request)
    rows = []
    for task_id in (a, b):
        row = service.store.task(task_id, tenant=principal.tenant)
        if row is None:
            return html(dashboard.not_found(f"No evaluation task {task_id!r}."), 404)
        rows.append(row)
    try:
        before, after = (service.report_runs(row)[0] for row in rows)
    except ApiError as exc:
        return html(dashboard.not_found(exc.message), 404)
    return html(dashboard.compare_page(summary_json(rows[0]), summary_json(rows[1]),
                                       before, after, principal))


@router.get("/assets/dashboard.js")
async def script() -> Response:
    """The dashboard's one script (progress polling), cached for five minutes."""
    return Response(dashboard.SCRIPT, media_type="text/javascript",
                    headers={"Cache-Control": "max-age=300",
                             "X-Content-Type-Options": "nosniff"})


def _log_tail(folder: Path, lines: int = 30) -> str | None:
    """The last ``lines`` of the task's newest log (``pytest-<attempt>.log``)."""
    logs = sorted(folder.glob("pytest-*.log"), key=lambda p: int(p.stem.split("-")[-1]))
    if not logs:
        return None
    try:
        text = logs[-1].read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return "\n".join(text.splitlines()[-lines:])
