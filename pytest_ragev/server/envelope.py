"""The original's JSON envelope: ``{"success": true, "data": ...}`` and its error form.

Every answer of the API is one of the two (the dashboard's HTML pages aside). An error
is ``{"success": false, "error": {"code", "message", "details"}}`` with the original's
code for its HTTP status and, for bad input, ``details.field`` naming the field.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from pytest_ragev.server.schemas import ErrorEnvelope

#: The original's error codes (``internal/errors``), by HTTP status.
CODES = {400: 1000, 401: 1001, 403: 1002, 404: 1003, 405: 1004, 409: 1005, 413: 1000,
         422: 1010, 500: 1007, 503: 1008}
#: What each error status means, as the OpenAPI document says it.
ERROR_MEANINGS = {
    400: "bad input in the body or a query parameter (malformed JSON, a wrong type, an "
         "unknown field or name; error.details.field names it), or a server catalog that "
         "does not load",
    401: "missing, invalid or revoked API key",
    403: "the key may not run evaluations: that needs an admin key with run_evaluations "
         "or full_access",
    404: "no such task (another tenant's task answers the same)",
    409: "the task has already finished",
    413: "request body larger than the server's limit (64 KiB by default)",
    503: "the server's storage refused the write (its database locked by another process, "
         "its disk full or read-only); nothing was changed: try again once the cause is gone "
         "(Retry-After)",
}


def documented_errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a route really sends, for its OpenAPI entry (``responses=``)."""
    return {status: {"model": ErrorEnvelope, "description": ERROR_MEANINGS[status]}
            for status in statuses}


class ApiError(Exception):
    """An answer other than 200: the status, one line, and the field it is about.

    Raised anywhere below a route (an endpoint, a dependency, the service); the app's
    exception handler turns it into :func:`error_response`.
    """

    def __init__(self, status: int, message: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers


def error_response(status: int, message: str, *, field: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """The original's error envelope."""
    details = {"field": field} if field else None
    body = {"success": False,
            "error": {"code": CODES.get(status, 1000), "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


def ok(data: Any) -> JSONResponse:
    """``{"success": true, "data": data}``."""
    return JSONResponse({"success": True, "data": data})
