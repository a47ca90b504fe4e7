"""The Kubernetes adapter: `ClusterPort` over the official client, for a real GPU cluster.

The agent's wiring builds one ApiClient (agent/cluster/kube_config.py), hands it to
`KubernetesCluster`, calls `start()` and `wait_synced()`, then the reconciler and observer
use it exactly as they use the simulated cluster (agent/cluster/simulated.py). In a DaemonSet
only the leader needs the caches: the wiring (agent/kubernetes.py) starts the watches when its
pod comes to lead and stops them when it no longer does; `start()` after `stop()` lists
everything afresh.

Reads come from memory: list-then-watch loops (agent/cluster/kube_watch.py) keep a cache of
DGDs (all namespaces, or the configured ones: the agent also needs the DGDs it did not
create, for adoption), of the pods Dynamo made (label `nvidia.com/dynamo-graph-deployment-
name` exists) and of nodes; `revision()` moves when any of them changes. Writes are
server-side apply of DGDs with our field manager and force=False, and deletes. Read-only mode
refuses both before a request is built, and wraps the client so that nothing but GET can be
sent (agent/cluster/kube_readonly.py).

The only modules in the project that import `kubernetes` are agent/cluster/kube*.py; what
the adapter reads and writes, and the RBAC it needs, are in docs/kubernetes.md.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from agent.cluster import kube_errors, kube_mapping
from agent.cluster.kube_cache import KindCache, Revision
from agent.cluster.kube_mapping import Key
from agent.cluster.kube_readonly import ReadOnlyApiClient
from agent.cluster.kube_watch import Reflector, WatchTuning
from agent.cluster.port import (
    DGD_GROUP,
    DGD_KIND,
    DGD_PLURAL,
    DGD_VERSION,
    DYNAMO_GRAPH,
    MANAGED_BY,
    ClusterError,
    Dgd,
    Node,
    Pod,
    ReadOnlyViolation,
)

__all__ = ["FIELD_MANAGER", "KubernetesCluster", "WatchTuning"]

log = logging.getLogger(__name__)

FIELD_MANAGER = MANAGED_BY
APPLY_PATCH = "application/apply-patch+yaml"
DGD_API_VERSION = f"{DGD_GROUP}/{DGD_VERSION}"

T = TypeVar("T")


class KubernetesCluster:
    def __init__(
        self,
        api_client: ApiClient,
        *,
        namespaces: Sequence[str] = (),
        read_only: bool = False,
        tuning: WatchTuning | None = None,
        request_timeout_s: float = 30.0,
        on_change: Callable[[], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`namespaces`: watch DGDs and pods only there (empty: the whole cluster).
        `on_change` runs on a watcher thread after every cache change (keep it thread-safe).
        """
        self.read_only = read_only
        self.namespaces = tuple(dict.fromkeys(namespaces))
        self._shared = api_client
        client: ApiClient = ReadOnlyApiClient(api_client) if read_only else api_client
        self._core = CoreV1Api(client)
        self._custom = CustomObjectsApi(client)
        self._timeout = request_timeout_s
        self._refused = 0
        self._stopping = threading.Event()
        self._started = False
        self._lifecycle = threading.Lock()
        self._revision = Revision()
        if on_change is not None:
            self._revision.add_listener(on_change)
        self._dgds: KindCache[Dgd] = KindCache(self._revision)
        self._pods: KindCache[Pod] = KindCache(self._revision)
        self._nodes: KindCache[Node] = KindCache(self._revision)
        self._tuning = tuning or WatchTuning()
        self._rng = rng or random.Random()
        self._reflectors: list[Reflector[Any]] = []

    @property
    def api_client(self) -> ApiClient:
        """The shared client this adapter was given (writable even in read-only mode)."""
        return self._shared

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the watchers (again, after a stop: each lists afresh before it watches)."""
        with self._lifecycle:
            if self._started:
                return
            self._started = True
            self._stopping = threading.Event()
            self._reflectors = self._build_reflectors()
            for reflector in self._reflectors:
                reflector.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every watcher; True if all threads ended within `timeout`. The caches keep
        their last contents, unsynced, until a new start lists again."""
        with self._lifecycle:
            self._stopping.set()
            for reflector in self._reflectors:
                reflector.interrupt()
            if not self._started:
                return True
            self._started = False
            deadline = time.monotonic() + timeout
            ended = [r.join(max(0.0, deadline - time.monotonic())) for r in self._reflectors]
            return all(ended)

    @property
    def running(self) -> bool:
        return self._started

    def wait_synced(self, timeout: float) -> bool:
        """Wait until every watcher has listed once; False if `timeout` passed first, or if
        the watchers are not running."""
        reflectors = self._reflectors if self._started else []
        deadline = time.monotonic() + timeout
        waits = [r.synced.wait(max(0.0, deadline - time.monotonic())) for r in reflectors]
        return bool(reflectors) and all(waits) and self._started

    @property
    def synced(self) -> bool:
        reflectors = self._reflectors if self._started else []
        return bool(reflectors) and all(r.synced.is_set() for r in reflectors)

    def __enter__(self) -> KubernetesCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- ClusterPort: reads (from the caches) -------------------------------------------------

    def revision(self) -> int:
        return self._revision.value

    def list_dgds(self) -> list[Dgd]:
        return self._dgds.values()

    def list_pods(self) -> list[Pod]:
        return self._pods.values()

    def list_nodes(self) -> list[Node]:
        return self._nodes.values()

    # -- ClusterPort: writes ------------------------------------------------------------------

    @property
    def mutations_refused(self) -> int:
        """How many apply_dgd/delete_dgd calls read-only mode refused."""
        return self._refused

    def apply_dgd(self, manifest: Mapping[str, Any]) -> None:
        """Server-side apply as FIELD_MANAGER, never forced: a field another manager owns
        raises ApplyConflict naming it, and nothing is changed."""
        self._refuse_if_read_only("apply_dgd")
        body = _apply_body(manifest)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        self._check_watched(namespace)
        try:
            self._custom.patch_namespaced_custom_object(
                DGD_GROUP,
                DGD_VERSION,
                namespace,
                DGD_PLURAL,
                name,
                body,
                field_manager=FIELD_MANAGER,
                force=False,
                _content_type=APPLY_PATCH,
                _request_timeout=self._timeout,
            )
        except kube_errors.CLIENT_ERRORS as e:
            raise kube_errors.wrap(e, operation=f"apply {namespace}/{name}") from e

    def delete_dgd(self, namespace: str, name: str) -> None:
        self._refuse_if_read_only("delete_dgd")
        try:
            self._custom.delete_namespaced_custom_object(
                DGD_GROUP,
                DGD_VERSION,
                namespace,
                DGD_PLURAL,
                name,
                # Dynamo's children (DCDs, pods) go with it, in the background.
                propagation_policy="Background",
                _request_timeout=self._timeout,
            )
        except ApiException as e:
            if e.status == 404:
                return
            raise kube_errors.wrap(e, operation=f"delete {namespace}/{name}") from e
        except kube_errors.CLIENT_ERRORS as e:
            raise kube_errors.wrap(e, operation=f"delete {namespace}/{name}") from e

    # -- internals ----------------------------------------------------------------------------

    def _refuse_if_read_only(self, operation: str) -> None:
        if self.read_only:
            self._refused += 1
            raise ReadOnlyViolation(operation)

    def _check_watched(self, namespace: str) -> None:
        # A DGD we cannot see would look missing forever, and be re-applied on every pass.
        if self.namespaces and namespace not in self.namespaces:
            raise ClusterError(
                f"namespace {namespace!r} is not one this agent watches "
                f"({', '.join(self.namespaces)})",
                retryable=False,
            )

    def _build_reflectors(self) -> list[Reflector[Any]]:
        reflectors: list[Reflector[Any]] = []
        for namespace in self.namespaces or (None,):
            reflectors.append(
                self._reflector(
                    "dgds",
                    namespace=namespace,
                    list_call=self._dgd_lister(namespace),
                    mapper=kube_mapping.dgd,
                    cache=self._dgds,
                )
            )
            reflectors.append(
                self._reflector(
                    "pods",
                    namespace=namespace,
                    list_call=self._pod_lister(namespace),
                    mapper=kube_mapping.pod,
                    cache=self._pods,
                )
            )
        reflectors.append(
            self._reflector(
                "nodes",
                namespace=None,
                list_call=self._core.list_node,
                mapper=kube_mapping.node,
                cache=self._nodes,
            )
        )
        return reflectors

    def _reflector(
        self,
        kind: str,
        *,
        namespace: str | None,
        list_call: Callable[..., Any],
        mapper: Callable[[Mapping[str, Any]], T],
        cache: KindCache[T],
    ) -> Reflector[T]:
        def map_item(obj: Mapping[str, Any]) -> tuple[Key, T]:
            return kube_mapping.key(obj), mapper(obj)

        return Reflector(
            name=kind if namespace is None else f"{kind}/{namespace}",
            list_call=list_call,
            map_item=map_item,
            cache=cache,
            namespace=namespace,
            tuning=self._tuning,
            stopping=self._stopping,
            # One generator per watcher, seeded from the shared one: jitter differs per loop.
            rng=random.Random(self._rng.random()),
        )

    def _dgd_lister(self, namespace: str | None) -> Callable[..., Any]:
        if namespace is None:
            return functools.partial(
                self._custom.list_cluster_custom_object, DGD_GROUP, DGD_VERSION, DGD_PLURAL
            )
        return functools.partial(
            self._custom.list_namespaced_custom_object,
            DGD_GROUP,
            DGD_VERSION,
            namespace,
            DGD_PLURAL,
        )

    def _pod_lister(self, namespace: str | None) -> Callable[..., Any]:
        # Only pods Dynamo made for a DGD: the selector "key exists" keeps the cache (and the
        # watch traffic) to the pods that matter, not every pod of the cluster.
        if namespace is None:
            return functools.partial(
                self._core.list_pod_for_all_namespaces, label_selector=DYNAMO_GRAPH
            )
        return functools.partial(
            self._core.list_namespaced_pod, namespace, label_selector=DYNAMO_GRAPH
        )


def _apply_body(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as plain JSON values, checked to be a DGD with a namespace and a name."""
    body = _plain(manifest)
    if not isinstance(body, dict):
        raise ClusterError("a DGD manifest must be a mapping", retryable=False)
    body.setdefault("apiVersion", DGD_API_VERSION)
    body.setdefault("kind", DGD_KIND)
    if (body["apiVersion"], body["kind"]) != (DGD_API_VERSION, DGD_KIND):
        raise ClusterError(
            f"not a {DGD_API_VERSION} {DGD_KIND}: {body['apiVersion']} {body['kind']}",
            retryable=False,
        )
    meta = body.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
        raise ClusterError(
            "a DGD manifest needs metadata.name and metadata.namespace", retryable=False
        )
    # The server's fields: a copied resourceVersion would turn the apply into a precondition
    # that fails once anything changed, and managedFields are not ours to send.
    for server_field in ("resourceVersion", "managedFields", "uid", "creationTimestamp"):
        meta.pop(server_field, None)
    body.pop("status", None)
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
