"""RED metrics of the HTTP edge: an aiohttp middleware telling a recorder each request's
route template, method, status and latency (hub/metrics/instruments.py counts them; the gRPC
edge's twin is grpc_edge.Measured).

The route is the REST gateway's HTTP rule (`/v1/workloads/{ref}`, hub/api/rest.py ROUTE_KEY),
else aiohttp's resource (`/metrics`, the dashboard's `/ui/...`), else "unmatched": never the
raw path, whose values a client chooses. Methods outside HTTP's usual ones count as "other".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from hub.api import rest

# (route, method, status, seconds)
Record = Callable[[str, str, int, float], None]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def middleware(record: Record) -> Middleware:
    @web.middleware
    async def measured(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:
            status = e.status
            raise
        except asyncio.CancelledError:
            status = 499  # the client went away
            raise
        finally:
            route = request.get(rest.ROUTE_KEY) or resource(request)
            method = request.method if request.method in _METHODS else "other"
            record(route, method, status, time.perf_counter() - start)

    return measured


def resource(request: web.Request) -> str:
    """The template of the aiohttp route a request matched ("unmatched": none, or the REST
    gateway's catch-all when no HTTP rule matched). A sub-application's (the dashboard's)
    resources carry its prefix already."""
    info = request.match_info
    found = info.route.resource if info.route is not None else None
    canonical = found.canonical if found is not None else ""
    if not canonical or canonical == "/{tail}" or info.http_exception is not None:
        return "unmatched"
    return canonical
