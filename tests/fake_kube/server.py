"""A small Kubernetes API server for the adapter's tests: real HTTP on 127.0.0.1, port 0.

Speaks enough of the API for agent/cluster/kube/, over the same wire the real client uses:
- GET list of pods, nodes and DGDs (cluster-wide or in a namespace) with labelSelector,
  limit/continue, and the list's resourceVersion; GET one object;
- watch (?watch=true): chunked JSON lines from a resourceVersion (or every object as ADDED
  when none is given), timeoutSeconds, allowWatchBookmarks (BOOKMARK every
  `bookmark_interval_s`), 410 Gone (an ERROR event, or an HTTP 410 with `gone_as_status`)
  for a compacted version;
- PATCH with application/apply-patch+yaml: server-side apply with field ownership
  (tests/fake_kube/ssa.py): 409 Conflict naming the other managers, as the real server does,
  `force=true` taking the fields instead, and a `metadata.resourceVersion` in the applied
  configuration checked as a precondition (409 "the object has been modified");
- DELETE (404 when absent);
- a request log, with the status each request was answered with (`Request.status`;
  `refused()`: those answered 4xx/5xx), fault injection (`fail()`: a status for matching
  requests, or a dropped connection), and watch controls (`close_watches()`,
  `expire_watches()`).

Runs in daemon threads and stops by itself: `close()` (the context manager's exit) ends
every open watch and connection; a lifetime timer closes a server a test forgot. Optional
TLS and a required bearer token let the in-cluster configuration path run against it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from tests.fake_kube import crd_schema, dynamo, selectors, ssa
from tests.fake_kube import dynamo as dynamo_module
from tests.fake_kube.store import (
    DGDS,
    DGDS_V1BETA1,
    DGDSAS,
    DGDSAS_V1BETA1,
    KINDS,
    AlreadyExists,
    Kind,
    Store,
    VersionConflict,
)

APPLY_PATCH = "application/apply-patch+yaml"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

_CORE = re.compile(
    r"^/api/v1/(?:namespaces/(?P<ns>[^/]+)/)?(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)
_SCALE = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/"
    r"(?P<plural>[^/]+)/(?P<name>[^/]+)/scale$"
)
_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)(?:/(?P<version>[^/]+))?/?$")
_GROUP = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?:namespaces/(?P<ns>[^/]+)/)?"
    r"(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    content_type: str
    authorization: str
    body: bytes
    # The HTTP status it was answered with; 0 while unanswered (or dropped unanswered).
    status: int = 0

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")

    @property
    def verb(self) -> str:
        """get | list | watch | patch | delete | ..., as RBAC names them."""
        if self.method != "GET":
            return self.method.lower()
        if self.watch:
            return "watch"
        return "get" if _route(self.path)[3] else "list"


@dataclass
class Fault:
    status: int
    times: int | None  # None: forever
    method: str | None
    path: str | None  # a substring of the path
    watch: bool | None
    drop: bool  # close the connection without an answer
    # Only requests with this Authorization header: one client of several (a partition).
    authorization: str | None = None
    hits: int = 0

    def matches(self, request: Request) -> bool:
        return (
            (self.times is None or self.hits < self.times)
            and (self.method is None or request.method == self.method)
            and (self.path is None or self.path in request.path)
            and (self.watch is None or request.watch == self.watch)
            and (self.authorization is None or request.authorization == self.authorization)
        )


@dataclass
class _Watches:
    """Counters open watches poll: bumping one ends them (closed) or sends 410 (expired)."""

    closed: int = 0
    expired: int = 0
    open: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class KubeEmulator:
    def __init__(
        self,
        *,
        bookmark_interval_s: float | None = None,
        gone_as_status: bool = False,
        max_watch_s: float = 30.0,
        token: str | None = None,
        tls: ssl.SSLContext | None = None,
        lifetime_s: float = 120.0,
        dynamo: tuple[str, ...] | list[str] = (dynamo.ALPHA,),
        dynamo_adapters: bool | None = None,
        dynamo_release: str = "",
        operator_version: str = "",
        other_operators: bool = False,
    ) -> None:
        """`dynamo`: the DynamoGraphDeployment versions served (tests/fake_kube/dynamo.py);
        the default is a Dynamo before 1.3, serving v1alpha1 only. `dynamo_adapters`: serve
        the scaling adapter CRD too (default: where v1beta1 is served). `dynamo_release`
        ("1.5" or "1.3"): a real Dynamo release instead, its own CRD files the rules
        (tests/fake_kube/crd_schema.py: versions, storage, pruning, defaults, validation, list
        types) and its operator's webhooks; `operator_version` what they stamp (default: the
        release's .0). `other_operators`: the GPU Operator also serves nvidia.com/v1alpha1
        (ClusterPolicy, NVIDIADriver), with no DGD in it when Dynamo does not serve that
        version."""
        self.store = Store()
        self.other_operators = other_operators
        # (plural, namespace, selector, resourceVersion) -> the items of a paginated list.
        self._snapshots: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
        # Called after each list page that has a next one (a test compacts the store there).
        self.after_page: Callable[[], None] | None = None
        if dynamo_release:
            crd = crd_schema.load(dynamo_release)
            self.dynamo = dynamo_module.DynamoCrd(
                crd.served,
                adapters=True,
                release=dynamo_release,
                operator_version=operator_version or f"{dynamo_release}.0",
            )
            self._serve_schemas()
        else:
            self.dynamo = _dynamo_crd(dynamo, dynamo_adapters)
        self.bookmark_interval_s = bookmark_interval_s
        self.gone_as_status = gone_as_status
        self.max_watch_s = max_watch_s
        self.token = token
        self._log: list[Request] = []
        self._warned: list[Request] = []
        self._log_lock = threading.Lock()
        self._faults: list[Fault] = []
        self._watches = _Watches()
        self._stopping = threading.Event()
        self._server = _Server(self, tls=tls)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        scheme = "https" if self._server.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> KubeEmulator:
        self._thread.start()
        self._timer.start()
        return self

    def close(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._timer.cancel()
        with self.store.cond:
            self.store.cond.notify_all()
        self._server.shutdown()
        self._server.drop_connections()
        self._server.server_close()

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests look at and do ----------------------------------------------------------

    def requests(self, *, method: str | None = None) -> list[Request]:
        with self._log_lock:
            return [r for r in self._log if method is None or r.method == method]

    def refused(self) -> list[Request]:
        """Requests answered with an error status (a webhook's 403, a 409 conflict, a 422
        validation error, an injected fault...)."""
        return [r for r in self.requests() if r.status >= 400]

    def mutating_requests(self) -> list[Request]:
        return [r for r in self.requests() if r.method in MUTATING]

    def requests_by(self, authorization: str) -> list[Request]:
        """The requests one client sent (its bearer token, when clients are told apart)."""
        return [r for r in self.requests() if r.authorization == authorization]

    def fail(
        self,
        status: int = 500,
        *,
        times: int | None = None,
        method: str | None = None,
        path: str | None = None,
        watch: bool | None = None,
        drop: bool = False,
        authorization: str | None = None,
    ) -> Fault:
        fault = Fault(status, times, method, path, watch, drop, authorization)
        with self._log_lock:
            self._faults.append(fault)
        return fault

    @property
    def dgd_kind(self) -> Kind:
        """The kind DGDs are stored as (the CRD's storage version): for `store` calls."""
        return DGDS_V1BETA1 if self.dynamo.storage == dynamo.BETA else DGDS

    def serve_dynamo(self, versions: tuple[str, ...] | list[str]) -> None:
        """Change the DGD versions served, as a Dynamo upgrade or downgrade would: stored
        objects are rewritten in the new storage version (the operator's migration)."""
        crd = _dynamo_crd(versions)
        with self.store.cond:
            old_kind = self.dgd_kind
            self.dynamo = crd
            if self.dgd_kind != old_kind:
                items, _ = self.store.list(old_kind, "", lambda labels: True)
                for obj in items:
                    self.store.migrate(old_kind, self.dgd_kind, crd.convert(obj, crd.storage))
        # Open DGD watches end (410): clients list again, in whatever version they then use.
        self.expire_watches()

    def _serve_schemas(self) -> None:
        """The storage version's schemas, for server-side apply's list types (store.schemas)."""
        storage = self.dynamo.storage
        self.store.schemas[DGDS.plural] = self.schema(DGDS.plural, storage) or {}
        self.store.schemas[DGDSAS.plural] = self.schema(DGDSAS.plural, storage) or {}

    def schema(self, plural: str, version: str) -> Mapping[str, Any] | None:
        """The real CRD's schema of one version (None: the hand-made CRD has none)."""
        if not self.dynamo.release:
            return None
        file = crd_schema.DGD_FILE if plural == DGDS.plural else crd_schema.DGDSA_FILE
        return crd_schema.load(self.dynamo.release, file).schemas.get(version)

    @property
    def dgdsa_kind(self) -> Kind:
        """The kind scaling adapters are stored as."""
        return DGDSAS_V1BETA1 if self.dynamo.storage == dynamo.BETA else DGDSAS

    def put_dgd(self, obj: Mapping[str, Any], *, manager: str = "kubectl") -> dict[str, Any]:
        """Create or replace a DGD as another actor would, in the version its apiVersion
        names (converted to the storage version, as the API server does)."""
        stored = self.dynamo.convert(obj, self.dynamo.storage)
        written = self.store.update(self.dgd_kind, stored, manager=manager)
        self.operator_reconcile(written)
        return self.dynamo.convert(written, dynamo.version_of(obj) or self.dynamo.storage)

    def get_adapter(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A DynamoGraphDeploymentScalingAdapter, in v1beta1."""
        obj = self.store.get(self.dgdsa_kind, namespace, name)
        return None if obj is None else self.dynamo.convert(obj, dynamo.BETA)

    def operator_reconcile(self, dgd: Mapping[str, Any]) -> None:
        """Dynamo's operator after a DGD changed: a scaling adapter for each component that
        opts in (starting at the component's replicas), none for the others."""
        if not self.dynamo.adapters:
            return
        beta = self.dynamo.convert(dgd, dynamo.BETA)
        meta = beta["metadata"]
        wanted = dynamo.wanted_adapters(beta)
        kind = self.dgdsa_kind
        with self.store.cond:
            items, _ = self.store.list(kind, meta.get("namespace", ""), lambda labels: True)
            for item in items:
                ref = (self.dynamo.convert(item, dynamo.BETA).get("spec") or {}).get("dgdRef")
                name = item["metadata"]["name"]
                if (ref or {}).get("name") == meta["name"] and name not in wanted:
                    self.store.delete(kind, item["metadata"]["namespace"], name)
            for name, adapter in wanted.items():
                if self.store.get(kind, meta.get("namespace", ""), name) is None:
                    stored = self.dynamo.convert(adapter, self.dynamo.storage)
                    self.store.update(kind, stored, manager=dynamo.OPERATOR)

    def operator_scaled(self, adapter: Mapping[str, Any]) -> None:
        """Dynamo's adapter controller: the adapter's spec.replicas is the source of truth,
        written into the DGD component's replicas (as the operator, whom the webhook lets)."""
        beta = self.dynamo.convert(adapter, dynamo.BETA)
        spec, meta = beta.get("spec") or {}, beta["metadata"]
        ref = spec.get("dgdRef") or {}
        replicas = spec.get("replicas", 1)
        with self.store.cond:
            live = self.store.get(self.dgd_kind, meta["namespace"], ref.get("name", ""))
            if live is None:
                return
            graph = self.dynamo.convert(live, dynamo.BETA)
            for component in graph["spec"].get("components", []):
                if component.get("name") == ref.get("componentName"):
                    if component.get("replicas") == replicas:
                        return
                    component["replicas"] = replicas
            self.store.update(
                self.dgd_kind,
                self.dynamo.convert(graph, self.dynamo.storage),
                manager=dynamo.OPERATOR,
            )
            self.store.edit(
                self.dgdsa_kind,
                meta["namespace"],
                meta["name"],
                lambda obj: obj.setdefault("status", {}).update(replicas=replicas),
                manager=dynamo.OPERATOR,
            )

    def get_dgd(self, namespace: str, name: str, *, version: str) -> dict[str, Any] | None:
        """A DGD as a client reading `version` sees it."""
        obj = self.store.get(self.dgd_kind, namespace, name)
        return None if obj is None else self.dynamo.convert(obj, version)

    @property
    def warnings(self) -> list[Request]:
        """Requests answered with a deprecation Warning header."""
        with self._log_lock:
            return list(self._warned)

    def heal(self) -> None:
        with self._log_lock:
            self._faults.clear()

    def close_watches(self) -> None:
        """End every open watch cleanly, as the server's timeout would."""
        with self._watches.lock:
            self._watches.closed += 1
        with self.store.cond:
            self.store.cond.notify_all()

    def expire_watches(self) -> None:
        """Send every open watch an ERROR event with code 410, and compact the history."""
        self.store.compact()
        with self._watches.lock:
            self._watches.expired += 1
        with self.store.cond:
            self.store.cond.notify_all()

    def break_connections(self) -> None:
        """Cut every open connection mid-stream, as a network failure or a crash would."""
        self._server.drop_connections()

    @property
    def open_watches(self) -> int:
        with self._watches.lock:
            return self._watches.open

    # -- the handler's side -----------------------------------------------------------------

    def _record(self, request: Request) -> tuple[int, Fault | None]:
        """Log a request: (its index in the log, the fault it meets or None)."""
        with self._log_lock:
            self._log.append(request)
            index = len(self._log) - 1
            for fault in self._faults:
                if fault.matches(request):
                    fault.hits += 1
                    return index, fault
        return index, None

    def _answered(self, index: int, status: int) -> None:
        with self._log_lock:
            self._log[index] = replace(self._log[index], status=status)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, emulator: KubeEmulator, *, tls: ssl.SSLContext | None) -> None:
        self.emulator = emulator
        self.tls = tls
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is not None:
            sock.settimeout(5)
            sock = self.tls.wrap_socket(sock, server_side=True)
            sock.settimeout(None)
        with self._sockets_lock:
            self._sockets.add(sock)
        return sock, address

    def shutdown_request(self, request: Any) -> None:
        with self._sockets_lock:
            self._sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-stream is normal here (stop(), interrupted watches).
        pass

    def drop_connections(self) -> None:
        with self._sockets_lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the emulator's, not stderr's

    def do_GET(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    # -- dispatch ---------------------------------------------------------------------------

    @property
    def emulator(self) -> KubeEmulator:
        return self.server.emulator

    _logged = -1  # the request's index in the emulator's log

    def send_response(self, code: int, message: str | None = None) -> None:
        if self._logged >= 0:
            self.emulator._answered(self._logged, code)
        super().send_response(code, message)

    def _dispatch(self) -> None:
        try:
            self._handle()
        finally:
            self._logged = -1  # what this connection answers next is another request's

    def _handle(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request = Request(
            method=self.command,
            path=split.path,
            query=dict(parse_qsl(split.query)),
            content_type=self.headers.get("Content-Type", ""),
            authorization=self.headers.get("Authorization", ""),
            body=self.rfile.read(length) if length else b"",
        )
        self._logged, fault = self.emulator._record(request)
        if fault is not None and fault.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None:
            return self._status(fault.status, "InternalError", "injected fault")
        if self.emulator.token and not _authorized(request.authorization, self.emulator.token):
            return self._status(401, "Unauthorized", "Unauthorized")
        self._view = None
        self._warning = ""
        discovery = _DISCOVERY.match(request.path)
        if discovery and discovery.group("group") == dynamo.GROUP and request.method == "GET":
            return self._discovery(discovery.group("version"))
        scale = _SCALE.match(request.path)
        if scale and scale.group("plural") == DGDSAS.plural and self.emulator.dynamo.adapters:
            return self._scale(request, scale)
        kind, namespace, plural, name = _route(request.path)
        if kind is not None and kind.plural in (DGDS.plural, DGDSAS.plural):
            crd = self.emulator.dynamo
            unserved = kind.plural == DGDSAS.plural and not crd.adapters
            if kind.version not in crd.served or unserved:
                kind = None  # an unserved version is no resource at all
            else:
                if crd.deprecated(kind.version):
                    self._warning = f'299 - "{dynamo.DEPRECATION}"'
                    with self.emulator._log_lock:
                        self.emulator._warned.append(request)
                # Stored in one version, served in the one asked for (conversion).
                self._view = kind.version
                self._plural = kind.plural
                dgd = kind.plural == DGDS.plural
                kind = self.emulator.dgd_kind if dgd else self.emulator.dgdsa_kind
        if kind is None:
            return self._status(404, "NotFound", f"the server could not find {request.path}")
        if kind.namespaced is False and namespace:
            return self._status(404, "NotFound", f"{plural} is cluster-scoped")
        self._serve(request, kind, namespace, name)

    _view: str | None = None
    _plural = ""
    _warning = ""

    def _discovery(self, version: str | None) -> None:
        crd = self.emulator.dynamo
        other = self.emulator.other_operators
        if version is None:
            served = list(crd.served)
            if other and dynamo.ALPHA not in served:
                served.append(dynamo.ALPHA)
            versions = [{"groupVersion": f"{dynamo.GROUP}/{v}", "version": v} for v in served]
            preferred = {"groupVersion": f"{dynamo.GROUP}/{crd.storage}", "version": crd.storage}
            return self._json(
                200,
                {
                    "kind": "APIGroup",
                    "apiVersion": "v1",
                    "name": dynamo.GROUP,
                    "versions": versions,
                    "preferredVersion": preferred,
                },
            )
        gpu_operator = other and version == dynamo.ALPHA
        if version not in crd.served and not gpu_operator:
            return self._status(404, "NotFound", f"the server could not find {self.path}")
        listed = dynamo.resource_list(version, adapters=crd.adapters)
        if version not in crd.served:
            listed["resources"] = []
        if gpu_operator:
            # NVIDIA's GPU Operator serves nvidia.com/v1alpha1 too (its own kinds).
            listed["resources"] = [*listed["resources"], *dynamo.GPU_OPERATOR_RESOURCES]
        self._json(200, listed)

    def _scale(self, request: Request, match: re.Match[str]) -> None:
        """GET and PATCH (JSON merge patch) of a scaling adapter's /scale subresource."""
        crd, emulator = self.emulator.dynamo, self.emulator
        if match.group("version") not in crd.served:
            return self._status(404, "NotFound", f"the server could not find {request.path}")
        kind, namespace, name = emulator.dgdsa_kind, match.group("ns"), match.group("name")
        live = emulator.store.get(kind, namespace, name)
        if live is None:
            return self._status(404, "NotFound", f'{kind.plural} "{name}" not found')
        if request.method == "GET":
            return self._json(200, dynamo.scale_object(live))
        if request.method != "PATCH":
            return self._status(405, "MethodNotAllowed", f"{request.method} is not supported")
        if request.content_type.split(";")[0].strip() != "application/merge-patch+json":
            return self._status(415, "UnsupportedMediaType", "only merge patches are served")
        patch = json.loads(request.body or b"{}")
        replicas = (patch.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            return self._status(422, "Invalid", "spec.replicas: must be an integer >= 0")
        manager = request.query.get("fieldManager") or "unknown"
        live.setdefault("spec", {})["replicas"] = replicas
        written = emulator.store.update(kind, live, manager=manager, subresource="scale")
        emulator.operator_scaled(written)
        written = emulator.store.get(kind, namespace, name) or written
        self._json(200, dynamo.scale_object(written))

    def _out(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """An object as the client's version spells it."""
        if self._view is None:
            return dict(obj)
        return self.emulator.dynamo.convert(obj, self._view)

    def _into_storage(self, body: Any, *, applied: bool = False) -> Any:
        """The request's object in the storage version. With a real CRD, as the API server
        decodes it: pruned by the request version's schema (and defaulted, unless it is an
        applied configuration: defaults go on the merged object, owned by nobody), converted,
        and pruned again by the storage version's."""
        if self._view is None or not isinstance(body, dict):
            return body
        body.setdefault("apiVersion", f"{dynamo.GROUP}/{self._view}")
        if dynamo.version_of(body) != self._view:
            return None
        crd = self.emulator.dynamo
        schema = self.emulator.schema(self._plural, self._view)
        if schema is not None:
            body = crd_schema.prune(body, schema)
            if not applied:
                body = crd_schema.default(body, schema)
        stored = crd.convert(body, crd.storage)
        storage_schema = self.emulator.schema(self._plural, crd.storage)
        return crd_schema.prune(stored, storage_schema) if storage_schema else stored

    def _validator(
        self,
    ) -> Callable[[dict[str, Any] | None, dict[str, Any]], dict[str, Any] | None] | None:
        if self._view is None:
            return None
        crd, view, plural = self.emulator.dynamo, self._view, self._plural
        if not crd.release:
            if crd.storage != dynamo.BETA:
                return None
            return _no_change(dynamo.validate)
        storage_schema = self.emulator.schema(plural, crd.storage) or {}
        view_schema = self.emulator.schema(plural, view) or {}
        dgd = plural == DGDS.plural

        def admit(live: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
            """What the API server does to a write after merging it: schema defaults, the
            operator's mutating webhook, the schema's validation (in the version asked
            for), the operator's validating webhook."""
            new = crd_schema.default(new, storage_schema)
            if dgd:
                dynamo.mutate(live, new, operator_version=crd.operator_version)
                dynamo.check_provider(live, new)
            causes = crd_schema.validate(crd.convert(new, view), view_schema)
            if causes:
                name = str((new.get("metadata") or {}).get("name", ""))
                kind = dynamo.ADAPTER_KIND if not dgd else "DynamoGraphDeployment"
                raise crd_schema.Invalid(kind, name, causes)
            if dgd:
                beta = crd.convert(new, dynamo.BETA)
                dynamo.validate(
                    crd.convert(live, dynamo.BETA) if live else None,
                    beta,
                    runtime_versions=crd.release != "1.3",
                )
            return new

        return admit

    def _serve(self, request: Request, kind: Kind, namespace: str, name: str) -> None:
        if request.method == "GET" and request.watch:
            return self._watch(request, kind, namespace)
        if request.method == "GET" and not name:
            return self._list(request, kind, namespace)
        if request.method == "GET":
            obj = self.emulator.store.get(kind, namespace, name)
            if obj is None:
                return self._status(404, "NotFound", f'{kind.plural} "{name}" not found')
            return self._json(200, self._out(obj))
        if request.method == "PATCH" and name:
            return self._apply(request, kind, namespace, name)
        if request.method == "POST" and not name:
            return self._create(request, kind, namespace)
        if request.method == "PUT" and name:
            return self._replace(request, kind, namespace, name)
        if request.method == "DELETE" and name:
            gone = self.emulator.store.delete(kind, namespace, name)
            if gone is None:
                return self._status(404, "NotFound", f'{kind.plural} "{name}" not found')
            if kind == self.emulator.dgd_kind:
                # Its adapters are owned by it: garbage-collected with it.
                self._after_write(kind, {**gone, "spec": {}})
            return self._json(200, self._out(gone))
        return self._status(405, "MethodNotAllowed", f"{request.method} is not supported here")

    # -- verbs ------------------------------------------------------------------------------

    def _create(self, request: Request, kind: Kind, namespace: str) -> None:
        body = self._into_storage(json.loads(request.body or b"{}"))
        if body is None:
            return self._status(400, "BadRequest", "apiVersion does not match the URL")
        try:
            created = self.emulator.store.create(
                kind,
                namespace,
                body,
                manager=request.query.get("fieldManager", "client"),
                validate=self._validator(),
            )
        except AlreadyExists as e:
            return self._status(409, "AlreadyExists", f'{kind.plural} "{e}" already exists')
        except dynamo.Denied as e:
            return self._denied(e)
        except crd_schema.Invalid as e:
            return self._invalid(e)
        self._after_write(kind, created)
        return self._json(201, self._out(created))

    def _replace(self, request: Request, kind: Kind, namespace: str, name: str) -> None:
        body = self._into_storage(json.loads(request.body or b"{}"))
        if body is None:
            return self._status(400, "BadRequest", "apiVersion does not match the URL")
        try:
            replaced = self.emulator.store.replace(
                kind,
                namespace,
                name,
                body,
                manager=request.query.get("fieldManager", "client"),
                validate=self._validator(),
            )
        except dynamo.Denied as e:
            return self._denied(e)
        except crd_schema.Invalid as e:
            return self._invalid(e)
        except KeyError:
            return self._status(404, "NotFound", f'{kind.plural} "{name}" not found')
        except VersionConflict:
            return self._modified(kind, name)
        self._after_write(kind, replaced)
        return self._json(200, self._out(replaced))

    def _list(self, request: Request, kind: Kind, namespace: str) -> None:
        """One page of a list. Every page of one list is the same snapshot, at the first
        page's resourceVersion (the continue token names it); once the store is compacted past
        it, the token has expired: 410 Expired, and the client must list again from the start,
        as the real API server (etcd compaction) answers."""
        selector = request.query.get("labelSelector", "")
        emulator = self.emulator
        token = request.query.get("continue") or ""
        if token:
            try:
                rv, start = (int(part) for part in token.split(":", 1))
            except ValueError:
                return self._status(400, "BadRequest", f"invalid continue token {token!r}")
            snapshot = emulator._snapshots.get((kind.plural, namespace, selector, rv))
            if snapshot is None or rv < emulator.store.floor:
                return self._status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list"
                    " result. You can start a new list without the continue parameter.",
                )
            items = snapshot
        else:
            items, rv = emulator.store.list(kind, namespace, selectors.parse(selector))
            start = 0
        limit = int(request.query.get("limit") or 0) or len(items)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if start + limit < len(items):
            meta["continue"] = f"{rv}:{start + limit}"
            with emulator._log_lock:
                emulator._snapshots[(kind.plural, namespace, selector, rv)] = items
                while len(emulator._snapshots) > 64:
                    emulator._snapshots.pop(next(iter(emulator._snapshots)))
        if emulator.after_page is not None and "continue" in meta:
            emulator.after_page()
        self._json(
            200,
            {
                "kind": f"{kind.kind}List",
                "apiVersion": f"{kind.group}/{self._view}" if self._view else kind.api_version,
                "metadata": meta,
                "items": [self._out(obj) for obj in page],
            },
        )

    def _apply(self, request: Request, kind: Kind, namespace: str, name: str) -> None:
        if request.content_type.split(";")[0].strip() != APPLY_PATCH:
            return self._status(415, "UnsupportedMediaType", "only apply patches are served")
        manager = request.query.get("fieldManager")
        if not manager:
            return self._status(400, "BadRequest", "fieldManager is required for apply patch")
        try:
            body = yaml.safe_load(request.body.decode())
        except yaml.YAMLError as e:
            return self._status(400, "BadRequest", f"cannot parse the applied object: {e}")
        meta = body.get("metadata", {}) if isinstance(body, dict) else {}
        if meta.get("name") != name:
            return self._status(400, "BadRequest", "metadata.name does not match the URL")
        body = self._into_storage(body, applied=True)
        if body is None:
            return self._status(400, "BadRequest", "apiVersion does not match the URL")
        try:
            obj, created = self.emulator.store.apply(
                kind,
                namespace,
                name,
                body,
                manager=manager,
                force=request.query.get("force") == "true",
                validate=self._validator(),
            )
        except ssa.Conflict as e:
            return self._json(409, _conflict_status(e.conflicts, api_version=kind.api_version))
        except VersionConflict:
            return self._modified(kind, name)
        except dynamo.Denied as e:
            return self._denied(e)
        except crd_schema.Invalid as e:
            return self._invalid(e)
        self._after_write(kind, obj)
        self._json(201 if created else 200, self._out(obj))

    def _after_write(self, kind: Kind, obj: Mapping[str, Any]) -> None:
        """What Dynamo's operator does next (tests/fake_kube/dynamo.py)."""
        if self._view is None:
            return
        if kind == self.emulator.dgd_kind:
            self.emulator.operator_reconcile(obj)
        elif kind == self.emulator.dgdsa_kind:
            self.emulator.operator_scaled(obj)

    def _modified(self, kind: Kind, name: str) -> None:
        """409 for a resourceVersion precondition that failed (PUT, or an apply naming one)."""
        self._status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {kind.plural} "{name}": the object has been'
            " modified; please apply your changes to the latest version and try again",
        )

    def _invalid(self, error: crd_schema.Invalid) -> None:
        """422 Invalid with one cause per field, as the API server reports a schema violation."""
        causes = [
            {"reason": "FieldValueInvalid", "message": message, "field": path}
            for path, message in error.causes
        ]
        self._json(
            422,
            _status(
                422,
                "Invalid",
                str(error),
                details={
                    "name": error.name,
                    "group": dynamo.GROUP,
                    "kind": error.kind,
                    "causes": causes,
                },
            ),
        )

    def _denied(self, error: dynamo.Denied) -> None:
        # Dynamo's webhooks deny with a field error: the API server answers 422 Invalid
        # (shared/reference/dynamo-crds/README.md), not 403.
        self._status(
            422,
            "Invalid",
            f'admission webhook "{dynamo.WEBHOOK}" denied the request: {error}',
        )

    def _watch(self, request: Request, kind: Kind, namespace: str) -> None:
        store, watches = self.emulator.store, self.emulator._watches
        match = selectors.parse(request.query.get("labelSelector", ""))
        timeout = min(float(request.query.get("timeoutSeconds") or 1800), self.emulator.max_watch_s)
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        with store.cond:
            since_text = request.query.get("resourceVersion") or "0"
            since = int(since_text)
            if since_text != "0" and since < store.floor:
                return self._gone(since)
            initial = []
            if since_text == "0":
                items, since = store.list(kind, namespace, match)
                initial = [("ADDED", obj) for obj in items]
        with watches.lock:
            closed, expired = watches.closed, watches.expired
            watches.open += 1
        try:
            self._start_stream(200)
            self._stream(
                kind,
                namespace,
                match,
                initial=initial,
                since=since,
                timeout=timeout,
                bookmarks=bookmarks,
                closed=closed,
                expired=expired,
            )
            self._chunk(b"")
        except OSError:
            self.close_connection = True  # the client hung up: the usual end of a watch
        finally:
            with watches.lock:
                watches.open -= 1

    def _stream(
        self,
        kind: Kind,
        namespace: str,
        match: Callable[[Mapping[str, str]], bool],
        *,
        initial: list[tuple[str, dict[str, Any]]],
        since: int,
        timeout: float,
        bookmarks: bool,
        closed: int,
        expired: int,
    ) -> None:
        store, watches, emulator = self.emulator.store, self.emulator._watches, self.emulator
        for event_type, obj in initial:
            self._event(event_type, obj)
        deadline = time.monotonic() + timeout
        interval = emulator.bookmark_interval_s
        next_bookmark = time.monotonic() + interval if bookmarks and interval else None
        while not emulator._stopping.is_set():
            with watches.lock:
                if watches.expired != expired:
                    return self._event("ERROR", _gone_status(since))
                if watches.closed != closed:
                    return
            now = time.monotonic()
            if now >= deadline or self._client_hung_up():
                return
            if next_bookmark is not None and now >= next_bookmark:
                self._event(
                    "BOOKMARK",
                    {
                        "kind": kind.kind,
                        "apiVersion": kind.api_version,
                        "metadata": {"resourceVersion": str(since)},
                    },
                )
                next_bookmark = now + (interval or 0)
            with store.cond:
                events, latest = store.events_after(since, kind, namespace, match)
                if not events:
                    wake = min(deadline, next_bookmark or deadline) - now
                    store.cond.wait(timeout=max(0.0, min(wake, 0.5)))
                    events, latest = store.events_after(since, kind, namespace, match)
            for event_type, obj in events:
                self._event(event_type, obj)
            since = latest

    def _client_hung_up(self) -> bool:
        # A watching client sends nothing: a readable socket means it closed its end (EOF),
        # which the real server notices too, and ends the watch.
        readable, _, _ = select.select([self.connection], [], [], 0)
        return bool(readable)

    # -- responses --------------------------------------------------------------------------

    def _gone(self, since: int) -> None:
        if self.emulator.gone_as_status:
            return self._json(410, _gone_status(since))
        self._start_stream(200)
        self._event("ERROR", _gone_status(since))
        self._chunk(b"")

    def _start_stream(self, code: int) -> None:
        self.send_response(code)
        if self._warning:
            self.send_header("Warning", self._warning)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _event(self, event_type: str, obj: Mapping[str, Any]) -> None:
        if event_type != "ERROR":
            obj = self._out(obj)
        self._chunk(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, code: int, obj: Mapping[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self._warning:
            self.send_header("Warning", self._warning)
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._json(code, _status(code, reason, message))


def _dynamo_crd(
    versions: tuple[str, ...] | list[str], adapters: bool | None = None
) -> dynamo.DynamoCrd:
    unknown = set(versions) - {dynamo.ALPHA, dynamo.BETA}
    if unknown:
        raise ValueError(f"the emulator knows no DGD version {sorted(unknown)}")
    if adapters is None:
        adapters = dynamo.BETA in versions
    return dynamo.DynamoCrd(tuple(versions), adapters=adapters)


def _no_change(
    check: Callable[[dict[str, Any] | None, dict[str, Any]], None],
) -> Callable[[dict[str, Any] | None, dict[str, Any]], dict[str, Any] | None]:
    def admit(live: dict[str, Any] | None, new: dict[str, Any]) -> None:
        check(copy.deepcopy(live) if live else None, copy.deepcopy(new))

    return admit


def _authorized(header: str, token: str) -> bool:
    scheme, _, credential = header.partition(" ")
    return scheme.lower() == "bearer" and credential == token  # the scheme is case-insensitive


def _route(path: str) -> tuple[Kind | None, str, str, str]:
    """(kind, namespace, plural, name) of an API path; kind None if not served."""
    core = _CORE.match(path)
    if core:
        group, version = "", "v1"
        found = core
    else:
        found = _GROUP.match(path)
        if not found:
            return None, "", "", ""
        group, version = found.group("group"), found.group("version")
    plural, namespace, name = found.group("plural"), found.group("ns") or "", found.group("name")
    return KINDS.get((group, version, plural)), namespace, plural, name or ""


def _status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
        **extra,
    }


def _gone_status(since: int) -> dict[str, Any]:
    return _status(410, "Expired", f"too old resource version: {since}")


def _conflict_status(conflicts: list[tuple[str, ssa.Path]], *, api_version: str) -> dict[str, Any]:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{manager}" using {api_version}',
            "field": ssa.dotted(path),
        }
        for manager, path in conflicts
    ]
    lines = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
    noun = "conflict" if len(causes) == 1 else "conflicts"
    return _status(
        409,
        "Conflict",
        f"Apply failed with {len(causes)} {noun}:\n{lines}",
        details={"causes": causes},
    )
