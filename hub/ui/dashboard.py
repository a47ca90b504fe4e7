"""The dashboard: server-rendered pages at /ui/ on the hub's HTTP listener (same TLS).

A sub-application (aiohttp-jinja2 templates in hub/ui/templates, htmx vendored in
hub/ui/static) mounted beside the REST gateway. Every page reads and every action writes
through the same authorization, handlers and audit as the REST and gRPC edges
(hub/api/control.py `run`), as the logged-in principal: the admin token, or a scoped token
whose role (viewer, operator of projects) limits it exactly as over the API.

Access (docs/dashboard.md):
- Nothing but the login form and the static files is served without a session. Logging in
  takes a token once (the admin token or a scoped API token); the answer is a session cookie
  (HttpOnly, SameSite=Strict, Path=/ui, Secure over TLS) holding an expiry, a nonce and the
  principal's name ("admin", "token/<name>"), signed with a key derived from the admin token,
  and recorded server-side (the nonce's hash, in the store): logging out deletes that record,
  so a copy of the cookie taken before opens nothing; revoking a scoped token deletes its
  sessions; a new admin token ends every session (the key changes); no token is ever in the
  cookie.
- Each form carries a CSRF token (an HMAC of the session nonce); a POST without the right
  one, or whose Origin is another site, is refused (403) before anything is done. The login
  form has no session yet, so no CSRF token, but checks Origin the same way.
- Every answer carries a strict Content-Security-Policy (scripts and styles from /ui/static
  only: no inline script or style, no eval), no caching, no framing, no referrer.

Pages follow the hub's Watch feed (hub/ui/live.py): an event for an object a page shows
refreshes its #live block with htmx (`hx-select` of the page's own block); forms work without
JavaScript (POST, then 303 back to the page).

The workload and cluster pages and their actions are hub/ui/actions.py; the short history the
charts draw is hub/ui/history.py. An unknown page is the dashboard's own 404 page.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import json
import pathlib
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp_jinja2
import jinja2
import yaml
from aiohttp import web
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor

from hub import access
from hub.api import jsonmap
from hub.api.control import PrincipalDispatch, PrincipalWatch
from hub.errors import NotFound, Unauthenticated, WingsmithError
from hub.ui import actions, history, live

PREFIX = "/ui"
SESSION_COOKIE = "wingsmith_session"
SESSION_TTL_S = 12 * 3600
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
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


class Sessions:
    """Signed session cookies and their CSRF tokens; the key is derived from the admin token."""

    def __init__(self, admin_token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._key = hashlib.sha256(b"wingsmith-dashboard-session\0" + admin_token.encode()).digest()
        self._clock = clock

    def issue(self, actor: str) -> str:
        """A session of `actor` ("admin", "token/<name>"): its nonce names it. Its expiry:
        `expiry(cookie)`."""
        expiry = int(self._clock()) + SESSION_TTL_S
        body = f"{expiry}.{secrets.token_urlsafe(16)}~{actor}"
        return f"{body}.{self._sign(body)}"

    @staticmethod
    def actor(nonce: str) -> str:
        return nonce.partition("~")[2]

    @staticmethod
    def expiry(cookie: str) -> float:
        return float(cookie.partition(".")[0])

    def nonce(self, cookie: str | None) -> str | None:
        """The session's nonce when the cookie is ours and unexpired, else None."""
        if not cookie or cookie.count(".") != 2:
            return None
        expiry, nonce, signature = cookie.split(".")
        if not hmac.compare_digest(signature, self._sign(f"{expiry}.{nonce}")):
            return None
        if not expiry.isdigit() or int(expiry) < self._clock():
            return None
        return nonce

    def csrf(self, nonce: str) -> str:
        return self._sign(f"csrf.{nonce}")

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class SessionStore:
    """The server-side record of sessions (hub/service/access.py), by the cookie's nonce."""

    # (nonce, actor, expiry): at login.
    open: Callable[[str, str, float], None]
    # nonce -> its principal now; None once the session ended or its token was revoked.
    principal_of: Callable[[str], access.Principal | None]
    # nonce: at logout.
    end: Callable[[str], None]


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
        self.history = history.History(self._list_as_admin, charts)
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
        env.globals.update(prefix=PREFIX, quote=_quote, static=_static_url, watching=live.watching)
        env.filters.update(when=_when, bar=_bar, digest_bar=_digest_bar)
        app.router.add_static("/static/", _HERE / "static")
        app.cleanup_ctx.append(self._sampling)
        app.add_routes(
            [
                web.get("/", self._home),
                web.get("/login", self._login_form),
                web.post("/login", self._login),
                web.post("/logout", self._logout),
                web.get("/fleet", self._fleet),
                web.get("/workloads", self._workloads),
                web.get("/deployments/{ref}", self._deployment),
                web.get("/deployments/{ref}/promote", self._promote_deployment_form),
                web.post("/deployments/{ref}/authority", self._set_authority),
                web.get("/projects", self._projects),
                web.get("/discovered", self._discovered),
                web.post("/discovered/{ref}/track", self._decide("TrackDiscovered")),
                web.post("/discovered/{ref}/ignore", self._decide("IgnoreDiscovered")),
                web.get("/discovered/{ref}/promote", self._promote_discovered_form),
                web.post("/discovered/{ref}/promote", self._promote_discovered),
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
            _secure(e.headers)
            raise
        _secure(response.headers)
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
            return self._render(request, "missing.html", {"message": message}, status=404)

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
        _check_origin(request)
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

    async def _list_as_admin(self, kind: str) -> list[dict[str, Any]]:
        """The sampler's read: every cluster or project (fleet facts), as the admin."""
        caller = _CALLER.set(access.ADMIN)
        try:
            method = "ListClusters" if kind == "clusters" else "ListProjects"
            return await self.list_all(method, kind)
        finally:
            _CALLER.reset(caller)

    async def _sampling(self, app: web.Application) -> AsyncIterator[None]:
        async with self.history.running():
            yield

    async def _history(self, request: web.Request) -> web.StreamResponse:
        kind = "cluster" if request.match_info["kind"] == "clusters" else "project"
        name = request.match_info["name"]
        data = await self.history.chart(kind, name)
        if data is None:
            raise web.HTTPNotFound(text=f"no history of {kind} {name}")
        return web.json_response(data)

    # -- login --------------------------------------------------------------------------------

    async def _home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(f"{PREFIX}/fleet")

    async def _login_form(self, request: web.Request) -> web.StreamResponse:
        return self._render(request, "login.html", {"next": _safe_next(request), "error": ""})

    async def _login(self, request: web.Request) -> web.StreamResponse:
        # No session yet, so no CSRF token: Origin is what tells a cross-site login (one that
        # would log the victim into the attacker's session) from ours.
        _check_origin(request)
        form = await request.post()
        presented = str(form.get("token", "")).strip()
        next_path = _safe_next(request, str(form.get("next", "")))
        try:
            principal = await asyncio.to_thread(self._authenticate, presented)
        except Unauthenticated:
            context = {"next": next_path, "error": "unknown or revoked token"}
            return self._render(request, "login.html", context, status=401)
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

    # -- pages --------------------------------------------------------------------------------

    async def _fleet(self, request: web.Request) -> web.StreamResponse:
        clusters = await self.list_all("ListClusters", "clusters")
        return self._render(request, "fleet.html", {"clusters": clusters, "now": time.time()})

    async def _workloads(self, request: web.Request) -> web.StreamResponse:
        workloads = await self.list_all("ListWorkloads", "workloads")
        deployments = await self.list_all("ListDeployments", "deployments")
        by_id = {d["deployment_id"]: d for d in deployments}
        return self._render(request, "workloads.html", {"workloads": workloads, "by_id": by_id})

    async def _deployment(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        deployment = await self._get_or_404(request, "GetDeployment", ref=ref)
        if isinstance(deployment, web.StreamResponse):
            return deployment
        deployment_id = deployment["deployment_id"]
        replicas = await self.list_all("ListReplicas", "replicas", deployment_id=deployment_id)
        allocations = await self.list_all(
            "ListAllocations", "allocations", deployment_id=deployment_id
        )
        review = None
        if deployment["authority"] == "observed":
            review = await self.call("ReviewDeployment", ref=deployment_id)
        applied = None
        if deployment.get("applied"):
            applied = await self.call("GetAppliedObject", ref=deployment_id)
        context = {
            "deployment": deployment,
            "replicas": replicas,
            "allocations": allocations,
            "review": review,
            "applied": applied,
            "applied_yaml": _manifest(applied),
        }
        return self._render(request, "deployment.html", context)

    async def _promote_deployment_form(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        review = await self._get_or_404(request, "ReviewDeployment", ref=ref)
        if isinstance(review, web.StreamResponse):
            return review
        # A managed deployment has nothing to promote: the page says so, with no button.
        deployment = await self.call("GetDeployment", ref=ref)
        context = {"review": review, "error": "", "authority": deployment["authority"]}
        return self._render(request, "promote_deployment.html", context)

    async def _set_authority(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        form = await request.post()
        authority = str(form.get("authority", ""))
        accept = form.get("accept_differences") == "on"
        try:
            if authority not in ("managed", "observed"):
                raise web.HTTPBadRequest(text="authority must be managed or observed")
            number = "AUTHORITY_MANAGED" if authority == "managed" else "AUTHORITY_OBSERVED"
            await self.call(
                "SetDeploymentAuthority", ref=ref, authority=number, accept_differences=accept
            )
        except WingsmithError as e:
            review = await self.call("ReviewDeployment", ref=ref)
            deployment = await self.call("GetDeployment", ref=ref)
            context = {"review": review, "error": e.message, "authority": deployment["authority"]}
            return self._render(request, "promote_deployment.html", context, status=e.http_status)
        raise web.HTTPSeeOther(f"{PREFIX}/deployments/{_quote(ref)}")

    async def _projects(self, request: web.Request) -> web.StreamResponse:
        projects = await self.list_all("ListProjects", "projects")
        deployments = await self.list_all("ListDeployments", "deployments")
        context = {"projects": projects, "waiting": actions.waiting_by_project(deployments)}
        return self._render(request, "projects.html", context)

    async def _discovered(self, request: web.Request) -> web.StreamResponse:
        found = await self.list_all("ListDiscovered", "discovered", include_ignored=True)
        return self._render(request, "discovered.html", {"discovered": found, "error": ""})

    def _decide(self, method_name: str) -> Handler:
        async def decide(request: web.Request) -> web.StreamResponse:
            ref = request.match_info["ref"]
            try:
                await self.call(method_name, ref=ref)
            except WingsmithError as e:
                found = await self.list_all("ListDiscovered", "discovered", include_ignored=True)
                context = {"discovered": found, "error": e.message}
                return self._render(request, "discovered.html", context, status=e.http_status)
            raise web.HTTPSeeOther(f"{PREFIX}/discovered")

        return decide

    async def _promote_discovered_form(self, request: web.Request) -> web.StreamResponse:
        return await self._promote_page(request, error="", status=200)

    async def _promote_page(
        self, request: web.Request, *, error: str, status: int
    ) -> web.StreamResponse:
        entry = await self._get_or_404(request, "GetDiscovered", ref=request.match_info["ref"])
        if isinstance(entry, web.StreamResponse):
            return entry
        projects = await self.list_all("ListProjects", "projects")
        context = {"entry": entry, "projects": projects, "error": error}
        return self._render(request, "promote_discovered.html", context, status=status)

    async def _promote_discovered(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        form = await request.post()
        try:
            workload = await self.call(
                "PromoteDiscovered",
                ref=ref,
                project=str(form.get("project", "")),
                workload_name=str(form.get("workload_name", "")).strip(),
                device_class=str(form.get("device_class", "")).strip(),
            )
        except WingsmithError as e:
            return await self._promote_page(request, error=e.message, status=e.http_status)
        (deployment,) = workload["deployments"][:1] or [None]
        if deployment is not None:
            raise web.HTTPSeeOther(f"{PREFIX}/deployments/{_quote(deployment['deployment_id'])}")
        raise web.HTTPSeeOther(f"{PREFIX}/workloads")

    # -- helpers ------------------------------------------------------------------------------

    async def _get_or_404(
        self, request: web.Request, method_name: str, **fields: Any
    ) -> dict[str, Any] | web.StreamResponse:
        try:
            return await self.call(method_name, **fields)
        except NotFound as e:
            return self._render(request, "missing.html", {"message": e.message}, status=404)

    def _render(
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


# -- template helpers -------------------------------------------------------------------------


def _secure(headers: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)


def _static_url(name: str) -> str:
    return f"{PREFIX}/static/{name}"


def _quote(text: object) -> str:
    return urllib.parse.quote(str(text), safe="")


def _check_origin(request: web.Request) -> None:
    """403 for a POST whose Origin is another site (a browser always sends one on a
    cross-site POST; `null` comes from privacy-preserving contexts and file pages)."""
    origin = request.headers.get("Origin")
    if origin and origin != "null" and urllib.parse.urlsplit(origin).netloc != request.host:
        raise web.HTTPForbidden(text="cross-site request refused")


def _safe_next(request: web.Request, given: str = "") -> str:
    """Where to go after logging in: a path under /ui only (never another site)."""
    target = given or request.query.get("next", "")
    parsed = urllib.parse.urlsplit(target)
    if parsed.scheme or parsed.netloc or not target.startswith(f"{PREFIX}/"):
        return f"{PREFIX}/fleet"
    return target


def _manifest(applied: Mapping[str, Any] | None) -> str:
    """The applied object's body (canonical JSON) as the YAML manifest people read."""
    if not applied or applied.get("truncated") or not applied.get("body"):
        return ""
    try:
        document = json.loads(str(applied["body"]))
    except ValueError:
        return str(applied["body"])
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def _when(value: object) -> str:
    """RFC 3339 to the second, or "never"."""
    if not isinstance(value, str) or not value:
        return "never"
    head, _, _ = value.partition(".")
    return head.removesuffix("Z") + "Z" if "." in value else value


def _bar(parts: Mapping[str, object], total: object) -> list[dict[str, Any]]:
    """Segments of a stacked bar in percent of `total`: [{name, value, x, width}]."""
    whole = total if isinstance(total, int) and total > 0 else 0
    segments: list[dict[str, Any]] = []
    x = 0.0
    for name, value in parts.items():
        count = value if isinstance(value, int) and value > 0 else 0
        width = 100.0 * count / whole if whole else 0.0
        segments.append({"name": name, "value": count, "x": round(x, 3), "width": round(width, 3)})
        x += width
    return segments


def _digest_bar(
    live_digests: Mapping[str, int], target: str, converged: bool = False
) -> list[dict[str, Any]]:
    """Replicas per serving digest as a stacked bar: the target digest first.

    `converged`: the hub's rollout state says no replica runs another config. An adopted
    deployment whose pod template the hub keeps runs the target whatever digest label its
    pods carry (none, or an older one): the hub's word decides the colour, not the label, so
    the bar never shows an older version beside "converged"."""
    ordered = sorted(live_digests.items(), key=lambda kv: (kv[0] != target, kv[0]))
    total = sum(v for _, v in ordered)
    segments = _bar(dict(ordered), total)
    for segment in segments:
        segment["target"] = converged or segment["name"] == target
    return segments
