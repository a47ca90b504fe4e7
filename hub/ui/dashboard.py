"""The dashboard: server-rendered pages at /ui/ on the hub's HTTP listener (same TLS).

A sub-application (aiohttp-jinja2 templates in hub/ui/templates, htmx vendored in
hub/ui/static) mounted beside the REST gateway. Every page reads and every action writes
through the same authorization, handlers and audit as the REST and gRPC edges
(hub/api/control.py `run`), as the logged-in principal: the admin token, or a scoped token
whose role (viewer, operator of projects) limits it exactly as over the API.

This module is the frame: the app, its session guard, logging in and out, the calls through
the API's dispatch, and rendering. Around it, by role:
- hub/ui/sessions.py: signed session cookies, CSRF tokens, the origin checks.
- hub/ui/templating.py: the security headers every answer carries, the templates' filters.
- hub/ui/pages.py: the read pages (Fleet, Workloads, a deployment, Projects, Discovered).
- hub/ui/actions.py: a workload's and a cluster's page and the forms that act.
- hub/ui/live.py: the pages' live updates from the Watch feed.
- hub/ui/history.py: the short history the charts draw.

Access (docs/dashboard.md): nothing but the login form and the static files is served
without a session. A POST without the session's CSRF token, or whose Origin is another site,
is refused (403) before anything is done; the login form has no session yet, so no CSRF
token, but checks Origin the same way. Every answer carries a strict Content-Security-Policy
(scripts and styles from /ui/static only: no inline script or style, no eval), no caching,
no framing, no referrer.

Pages follow the hub's Watch feed (hub/ui/live.py): an event for an object a page shows
refreshes its #live block with htmx (`hx-select` of the page's own block); forms work without
JavaScript (POST, then 303 back to the page). An unknown page is the dashboard's own 404 page.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import pathlib
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor

from hub import access
from hub.api import jsonmap
from hub.api.control import PrincipalDispatch, PrincipalWatch
from hub.errors import NotFound, Unauthenticated
from hub.ui import actions, history, live, pages, templating
from hub.ui.sessions import (
    SESSION_COOKIE,
    SESSION_TTL_S,
    Sessions,
    SessionStore,
    check_origin,
    safe_next,
)
from hub.ui.templating import CSP, SECURITY_HEADERS

__all__ = [
    "CSP",
    "PREFIX",
    "SECURITY_HEADERS",
    "SESSION_COOKIE",
    "SESSION_TTL_S",
    "Dashboard",
    "SessionStore",
    "caller",
]

PREFIX = "/ui"
_HERE = pathlib.Path(__file__).parent
_PUBLIC = ("/login", "/static/")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# The session's CSRF token, set on a request once its session is checked.
CSRF_KEY = web.RequestKey("csrf", str)
# The watch feed's revision read before a page's own reads (hub/ui/live.py).
REVISION_KEY = web.RequestKey("revision", int)
# Who the current request's session belongs to (set by the guard, read by `call`).
_CALLER: contextvars.ContextVar[access.Principal] = contextvars.ContextVar("dashboard_caller")


def caller() -> access.Principal | None:
    """The principal of the request being served, once its session was checked."""
    return _CALLER.get(None)


class Dashboard:
    def __init__(
        self,
        *,
        service: ServiceDescriptor,
        dispatch: PrincipalDispatch,
        admin_token: str,
        authenticate: Callable[[str], access.Principal],
        store: SessionStore,
        secure_cookies: bool,
        charts: history.Keeper,
        watch: PrincipalWatch | None = None,
    ) -> None:
        """`authenticate`: a presented token -> its principal (Unauthenticated otherwise);
        `store`: the sessions held server-side. Both may read or write the store: they run in
        a worker thread. `charts`: where the charts' samples are kept (the store); `watch`:
        the hub's watch feed, which the pages follow (None: they poll slowly)."""
        self._service = service
        self._dispatch = dispatch
        self._authenticate = authenticate
        self._store = store
        self._sessions = Sessions(admin_token)
        self._secure = secure_cookies
        self.history = history.History(charts)
        self.live = live.Live(watch, caller)

    # -- the app ------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard, self._not_found])
        aiohttp_jinja2.setup(
            app,
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=jinja2.select_autoescape(default=True),
            undefined=jinja2.StrictUndefined,
        )
        env = aiohttp_jinja2.get_env(app)
        env.globals.update(
            prefix=PREFIX,
            quote=templating.quote,
            static=templating.static_url,
            watching=live.watching,
        )
        env.filters.update(
            when=templating.when, bar=templating.bar, digest_bar=templating.digest_bar
        )
        app.router.add_static("/static/", _HERE / "static")
        app.cleanup_ctx.append(self._sampling)
        app.add_routes(
            [
                web.get("/", self._home),
                web.get("/login", self._login_form),
                web.post("/login", self._login),
                web.post("/logout", self._logout),
                *pages.routes(self),
                *actions.routes(self),
                web.get("/history/{kind:clusters|projects}/{name}", self._history),
                web.get(live.PATH, self.live.stream),
            ]
        )
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await self._guarded(request, handler)
        except web.HTTPException as e:  # redirects and refusals carry the headers too
            templating.secure(e.headers)
            raise
        templating.secure(response.headers)
        return response

    @web.middleware
    async def _not_found(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """An unknown page is the dashboard's own 404 page (inside the session guard: a
        stranger is sent to the login form, as for any page), not aiohttp's plain text."""
        try:
            return await handler(request)
        except web.HTTPNotFound:
            if request.path.startswith(f"{PREFIX}/static/"):
                raise
            message = f"page {request.path} not found: follow the links from the Fleet page"
            return self.render(request, "missing.html", {"message": message}, status=404)

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path.removeprefix(PREFIX)
        if path.startswith(_PUBLIC):
            return await handler(request)
        nonce = self._sessions.nonce(request.cookies.get(SESSION_COOKIE))
        principal = None
        if nonce is not None:
            principal = await asyncio.to_thread(self._store.principal_of, nonce)
        if nonce is None or principal is None:
            if request.method != "GET":
                raise web.HTTPUnauthorized(text="log in first")
            target = urllib.parse.quote(request.path_qs, safe="")
            raise web.HTTPSeeOther(f"{PREFIX}/login?next={target}")
        request[CSRF_KEY] = self._sessions.csrf(nonce)
        if request.method == "POST":
            await self._check_csrf(request)
        caller = _CALLER.set(principal)
        try:
            if request.method == "GET" and not path.startswith((live.PATH, "/history/")):
                request[REVISION_KEY] = await self.live.revision()
            return await handler(request)
        finally:
            _CALLER.reset(caller)

    async def _check_csrf(self, request: web.Request) -> None:
        check_origin(request)
        form = await request.post()
        presented = str(form.get("csrf", ""))
        if not hmac.compare_digest(presented, request[CSRF_KEY]):
            raise web.HTTPForbidden(text="missing or wrong CSRF token: reload the page")

    # -- calls through the API's own dispatch -------------------------------------------------

    async def call(self, method_name: str, **fields: Any) -> dict[str, Any]:
        method = self._service.methods_by_name[method_name]
        request = message_factory.GetMessageClass(method.input_type)(**fields)
        response = await self._dispatch(method, request, _CALLER.get())
        return jsonmap.to_json(response)

    async def list_all(self, method_name: str, key: str, **filters: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.call(method_name, page_size=500, page_token=token, **filters)
            items += page[key]
            token = page["next_page_token"]
            if not token:
                return items

    # -- the charts' history (hub/ui/history.py) ---------------------------------------------

    async def _sampling(self, app: web.Application) -> AsyncIterator[None]:
        async with self.history.running():
            yield

    async def _history(self, request: web.Request) -> web.StreamResponse:
        kind = "cluster" if request.match_info["kind"] == "clusters" else "project"
        name = request.match_info["name"]
        body = await self.history.chart_json(kind, name)
        if body is None:
            raise web.HTTPNotFound(text=f"no history of {kind} {name}")
        return web.Response(body=body, content_type="application/json")

    # -- login --------------------------------------------------------------------------------

    async def _home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(f"{PREFIX}/fleet")

    async def _login_form(self, request: web.Request) -> web.StreamResponse:
        return self.render(request, "login.html", {"next": safe_next(request), "error": ""})

    async def _login(self, request: web.Request) -> web.StreamResponse:
        # No session yet, so no CSRF token: Origin is what tells a cross-site login (one that
        # would log the victim into the attacker's session) from ours.
        check_origin(request)
        form = await request.post()
        presented = str(form.get("token", "")).strip()
        next_path = safe_next(request, str(form.get("next", "")))
        try:
            principal = await asyncio.to_thread(self._authenticate, presented)
        except Unauthenticated:
            context = {"next": next_path, "error": "unknown or revoked token"}
            return self.render(request, "login.html", context, status=401)
        response = web.HTTPSeeOther(next_path)
        cookie = self._sessions.issue(principal.actor)
        nonce = self._sessions.nonce(cookie)
        assert nonce is not None
        await asyncio.to_thread(self._store.open, nonce, principal.actor, Sessions.expiry(cookie))
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=SESSION_TTL_S,
            path=PREFIX,
            httponly=True,
            samesite="Strict",
            secure=self._secure,
        )
        raise response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        # Ended server-side: a copy of the cookie opens nothing from now on.
        nonce = self._sessions.nonce(request.cookies.get(SESSION_COOKIE))
        if nonce is not None:
            await asyncio.to_thread(self._store.end, nonce)
        response = web.HTTPSeeOther(f"{PREFIX}/login")
        response.del_cookie(SESSION_COOKIE, path=PREFIX)
        raise response

    # -- helpers ------------------------------------------------------------------------------

    async def get_or_404(
        self, request: web.Request, method_name: str, **fields: Any
    ) -> dict[str, Any] | web.StreamResponse:
        try:
            return await self.call(method_name, **fields)
        except NotFound as e:
            return self.render(request, "missing.html", {"message": e.message}, status=404)

    def render(
        self,
        request: web.Request,
        template: str,
        context: Mapping[str, Any],
        *,
        status: int = 200,
    ) -> web.StreamResponse:
        caller = _CALLER.get(None)
        full = {
            "csrf": request.get(CSRF_KEY, ""),
            "path": request.path,
            "revision": request.get(REVISION_KEY, 0),
            "may_change": lambda project: bool(caller and actions.may_change(caller, project)),
            "is_admin": caller is not None and caller.role == access.ROLE_ADMIN,
            **context,
        }
        return aiohttp_jinja2.render_template(template, request, full, status=status)
