"""What the endpoints of ``ragev serve`` get through ``Depends``, and who may call them.

- :data:`ServiceDep`, :data:`SettingsDep`: the application's :class:`Service` and its
  settings;
- :data:`ReadAccess`, :data:`RunAccess`: the caller's :class:`Principal`, for a route
  that needs a key that may read (a viewer or admin key, or a dashboard login) or run
  evaluations (an admin key with ``run_evaluations`` or ``full_access``); 401 or 403
  otherwise;
- :class:`AuthFirstRoute`: the route class that checks those keys before FastAPI reads
  the request, so a caller without a key hears 401 whatever the body holds.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import Response
from fastapi.routing import APIRoute

from pytest_ragev.server.keys import Action, Principal
from pytest_ragev.server.service import Service
from pytest_ragev.server.settings import ServerSettings


async def get_service(request: Request) -> Service:
    """The application's service (``create_app`` puts it on ``app.state``)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


async def get_settings(service: ServiceDep) -> ServerSettings:
    """The server's settings."""
    return service.settings


SettingsDep = Annotated[ServerSettings, Depends(get_settings)]


class Requires:
    """The dependency of a route that needs a key allowed to ``action``: the caller.

    ``Depends(Requires("run"))`` gives the endpoint the caller's :class:`Principal`, or
    answers 401 (no valid key) or 403 (a key that may not). :class:`AuthFirstRoute`
    calls :meth:`authenticate` before FastAPI reads the request; the dependency then
    returns whom that found. Like the endpoints, the dependencies of this module are
    coroutines: FastAPI runs a plain function in its thread pool, a hop these cheap
    look-ups need not pay on every request.
    """

    def __init__(self, action: Action) -> None:
        self.action = action
        self._state_key = f"ragev.principal.{action}"

    def authenticate(self, request: Request) -> Principal:
        """Check the caller (401/403 otherwise) and keep whom it found for the request."""
        service: Service = request.app.state.service
        principal = service.authorize(request, self.action)
        request.scope["state"][self._state_key] = principal
        return principal

    async def __call__(self, request: Request) -> Principal:
        found = request.scope["state"].get(self._state_key)
        return found if isinstance(found, Principal) else self.authenticate(request)


ReadAccess = Annotated[Principal, Depends(Requires("read"))]
RunAccess = Annotated[Principal, Depends(Requires("run"))]


def _requirements(dependant: Dependant) -> Iterator[Requires]:
    for sub in dependant.dependencies:
        if isinstance(sub.call, Requires):
            yield sub.call
        yield from _requirements(sub)


def required_action(route: APIRoute) -> Action | None:
    """What a route's key must be allowed to do; ``None`` for a route that needs no key."""
    return next((requires.action for requires in _requirements(route.dependant)), None)


class AuthFirstRoute(APIRoute):
    """A route that checks the key before FastAPI reads the body and the query.

    FastAPI parses the JSON body before it resolves any dependency, so a key checked
    only by a dependency comes too late: a request with no key and a bad body would
    learn about the body (400) before hearing it may not ask (401). This route runs the
    :class:`Requires` dependencies of its endpoint first; a route without one is served
    as FastAPI serves it.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        requirements = list(_requirements(self.dependant))
        if not requirements:
            return handler

        async def checked(request: Request) -> Response:
            for requires in requirements:
                requires.authenticate(request)
            return await handler(request)

        return checked
