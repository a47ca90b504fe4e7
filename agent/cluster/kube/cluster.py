"""The Kubernetes adapter: `ClusterPort` over the official client, for a real GPU cluster.

The agent's wiring builds one ApiClient (agent/cluster/kube/config.py), hands it to
`KubernetesCluster`, calls `start()` and `wait_synced()`, then the reconciler and observer
use it exactly as they use the simulated cluster (agent/cluster/simulated/). In a DaemonSet
only the leader needs the caches: the wiring (agent/kubernetes.py) starts the watches when its
pod comes to lead and stops them when it no longer does; `start()` after `stop()` lists
everything afresh.

Reads come from memory: list-then-watch loops (agent/cluster/kube/watch.py) keep a cache of
DGDs (all namespaces, or the configured ones: the agent also needs the DGDs it did not
create, for adoption), of the pods Dynamo made (label `nvidia.com/dynamo-graph-deployment-
name` exists) and of nodes; `revision()` moves when any of them changes. Writes are
server-side apply of DGDs with our field manager and force=False, and deletes. Read-only mode
refuses both before a request is built, and wraps the client so that nothing but GET can be
sent (agent/cluster/kube/readonly.py).

The only modules in the project that import `kubernetes` are agent/cluster/kube/; what
the adapter reads and writes, and the RBAC it needs, are in docs/kubernetes.md.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from agent.backoff import Backoff
from agent.cluster import dgd_versions
from agent.cluster.kube import errors, mapping, watches
from agent.cluster.kube.cache import KindCache, Revision
from agent.cluster.kube.readonly import ReadOnlyApiClient
from agent.cluster.kube.watch import Reflector, WatchStats, WatchTuning
from agent.cluster.port import (
    DGD_GROUP,
    DGD_PLURAL,
    DGD_VERSION_NONE,
    DGDSA_PLURAL,
    MANAGED_BY,
    ClusterError,
    Dgd,
    Node,
    Pod,
    ReadOnlyViolation,
    ScalingAdapter,
)

__all__ = ["FIELD_MANAGER", "KubernetesCluster", "WatchTuning"]

log = logging.getLogger(__name__)

FIELD_MANAGER = MANAGED_BY
APPLY_PATCH = "application/apply-patch+yaml"
# How often the served DGD versions are asked again (and at once after a 404 on a DGD path).
REDISCOVER_S = 60.0
# How long a take-over apply waits for the DGD watch to bring its write back (apply_dgd).
CAUGHT_UP_S = 2.0


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
        rediscover_s: float = REDISCOVER_S,
        caught_up_s: float = CAUGHT_UP_S,
    ) -> None:
        """`namespaces`: watch DGDs and pods only there (empty: the whole cluster).
        `on_change` runs on a watcher thread after every cache change (keep it thread-safe).
        `rediscover_s`: how often to ask again which DGD versions the API server serves.
        `caught_up_s`: how long a take-over apply waits for the watch to bring it back.
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
        self._adapters: KindCache[ScalingAdapter] = KindCache(self._revision)
        # Versions whose resource list has the scaling adapter (Dynamo releases with it).
        self._adapter_versions: frozenset[str] = frozenset()
        self._pods: KindCache[Pod] = KindCache(self._revision)
        self._nodes: KindCache[Node] = KindCache(self._revision)
        self._tuning = tuning or WatchTuning()
        self._rng = rng or random.Random()
        self._reflectors: list[Reflector[Any]] = []
        # DGD watches run in the version being written, so they stop and start on their own
        # when it changes (dgd_versions.choose over what discovery finds).
        self._rediscover_s = rediscover_s
        self._caught_up_s = caught_up_s
        self._served: tuple[str, ...] = ()
        self._dgd_version = ""
        self._discovered = False
        self._versions_lock = threading.Lock()
        self._dgd_reflectors: list[Reflector[Any]] = []
        self._dgd_stopping = threading.Event()
        self._rediscover = threading.Event()
        self._discovery_thread: threading.Thread | None = None

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
            # Which DGD version to watch, before anything watches (not started yet: discovery
            # only records what it finds).
            self._discover_quietly()
            self._started = True
            self._stopping = threading.Event()
            self._reflectors = watches.pods_and_nodes(
                self._core,
                self.namespaces,
                pods=self._pods,
                nodes=self._nodes,
                tuning=self._tuning,
                stopping=self._stopping,
                rng=self._rng,
            )
            for reflector in self._reflectors:
                reflector.start()
            self._start_dgd_reflectors()
            self._discovery_thread = threading.Thread(
                target=self._discovery_loop, name="kube-dgd-discovery", daemon=True
            )
            self._discovery_thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every watcher; True if all threads ended within `timeout`. The caches keep
        their last contents, unsynced, until a new start lists again."""
        with self._lifecycle:
            self._stopping.set()
            self._rediscover.set()
            with self._versions_lock:
                self._dgd_stopping.set()
                dgd_reflectors = list(self._dgd_reflectors)
            for reflector in [*self._reflectors, *dgd_reflectors]:
                reflector.interrupt()
            if not self._started:
                return True
            self._started = False
            deadline = time.monotonic() + timeout
            ended = [
                r.join(max(0.0, deadline - time.monotonic()))
                for r in [*self._reflectors, *dgd_reflectors]
            ]
            if self._discovery_thread is not None:
                self._discovery_thread.join(max(0.0, deadline - time.monotonic()))
                ended.append(not self._discovery_thread.is_alive())
            return all(ended)

    @property
    def running(self) -> bool:
        return self._started

    def wait_synced(self, timeout: float) -> bool:
        """Wait until the served DGD version is known and every watcher has listed once;
        False if `timeout` passed first, or if the watchers are not running."""
        deadline = time.monotonic() + timeout
        while True:
            reflectors = self._all_reflectors() if self._started else []
            for reflector in reflectors:
                reflector.synced.wait(max(0.0, deadline - time.monotonic()))
            if self.synced:
                return True
            if not self._started or time.monotonic() >= deadline:
                return False
            # Discovery has not answered yet, or the DGD watches were just replaced.
            self._stopping.wait(min(0.02, max(0.0, deadline - time.monotonic())))

    @property
    def synced(self) -> bool:
        reflectors = self._all_reflectors() if self._started else []
        return self._discovered and bool(reflectors) and all(r.synced.is_set() for r in reflectors)

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

    def list_scaling_adapters(self) -> list[ScalingAdapter]:
        return self._adapters.values()

    # -- ClusterPort: writes ------------------------------------------------------------------

    @property
    def mutations_refused(self) -> int:
        """How many apply_dgd/delete_dgd calls read-only mode refused."""
        return self._refused

    def apply_dgd(self, manifest: Mapping[str, Any], *, take_over: str = "") -> None:
        """Server-side apply as FIELD_MANAGER, not forced: a field another manager owns
        raises ApplyConflict naming it, and nothing is changed. `manifest` is in the internal
        form (agent/cluster/dgd_versions.py); it is written in the version the API server
        serves, and once more after a 404 that turns out to mean the version changed.

        `take_over` (a resourceVersion; ClusterPort.apply_dgd): forced, with that version as
        the apply's precondition, so what is taken is exactly what the manifest changes in the
        object it was made from; a DGD changed since answers 409 (retryable), never clobbered.
        It returns once the cache has moved past that version (or after `caught_up_s`), so that
        the next pass plans from our write, not from the object it replaced: a manifest made
        from the old one again would only be refused by its own precondition."""
        self._refuse_if_read_only("apply_dgd")
        body = mapping.apply_body(manifest)
        if take_over:
            body["metadata"]["resourceVersion"] = take_over
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        self._check_watched(namespace)
        self._with_version(
            f"apply {namespace}/{name}",
            lambda version: self._custom.patch_namespaced_custom_object(
                DGD_GROUP,
                version,
                namespace,
                DGD_PLURAL,
                name,
                dgd_versions.to_served(body, version),
                field_manager=FIELD_MANAGER,
                force=bool(take_over),
                _content_type=APPLY_PATCH,
                _request_timeout=self._timeout,
            ),
        )
        if take_over:
            self._await_cache_past(namespace, name, take_over)

    def _await_cache_past(self, namespace: str, name: str, version: str) -> None:
        """Wait (at most `caught_up_s`) until the cached DGD is no longer at `version`: the
        watch brought our write (or a later one) back, or the DGD left the cache."""
        deadline = time.monotonic() + self._caught_up_s
        while time.monotonic() < deadline and not self._stopping.is_set():
            cached = next(
                (d for d in self._dgds.values() if (d.namespace, d.name) == (namespace, name)),
                None,
            )
            if cached is None or cached.resource_version != version:
                return
            self._stopping.wait(0.01)

    def delete_dgd(self, namespace: str, name: str) -> None:
        self._refuse_if_read_only("delete_dgd")
        try:
            self._with_version(
                f"delete {namespace}/{name}",
                lambda version: self._custom.delete_namespaced_custom_object(
                    DGD_GROUP,
                    version,
                    namespace,
                    DGD_PLURAL,
                    name,
                    # Dynamo's children (DCDs, pods) go with it, in the background.
                    propagation_policy="Background",
                    _request_timeout=self._timeout,
                ),
            )
        except _NotFound:
            return

    def scale_adapter(self, namespace: str, name: str, replicas: int) -> None:
        """Set a DGDSA's spec.replicas through /scale (a JSON merge patch) as FIELD_MANAGER,
        the way an autoscaler would; Dynamo's operator writes it into the DGD."""
        self._refuse_if_read_only("scale_adapter")
        self._with_version(
            f"scale {namespace}/{name}",
            lambda version: self._custom.patch_namespaced_custom_object_scale(
                DGD_GROUP,
                version,
                namespace,
                DGDSA_PLURAL,
                name,
                {"spec": {"replicas": replicas}},
                field_manager=FIELD_MANAGER,
                _request_timeout=self._timeout,
            ),
        )

    # -- DGD versions -------------------------------------------------------------------------

    @property
    def dgd_version(self) -> str:
        """The DGD version this adapter reads and writes; "none" when the API server serves
        none it can write; "" until discovery answered."""
        if not self._discovered:
            return ""
        return self._dgd_version or DGD_VERSION_NONE

    @property
    def served_dgd_versions(self) -> tuple[str, ...]:
        """The DGD versions the API server served when last asked."""
        return self._served

    def discover_dgd_versions(self) -> str:
        """Ask the API server which DGD versions it serves (API discovery: each version's
        resource list); switch the DGD watches over if the version to write changed. Returns
        that version. Raises ClusterError when the server could not be asked."""
        served = []
        adapters = set()
        for version in dgd_versions.KNOWN_VERSIONS:
            try:
                resources = self._custom.get_api_resources(
                    DGD_GROUP, version, _request_timeout=self._timeout
                )
            except ApiException as e:
                if e.status == 404:
                    continue  # the group version is not served at all
                raise errors.wrap(e, operation=f"discover {DGD_GROUP}/{version}") from e
            except errors.CLIENT_ERRORS as e:
                raise errors.wrap(e, operation=f"discover {DGD_GROUP}/{version}") from e
            names = {getattr(r, "name", "") for r in getattr(resources, "resources", None) or []}
            if DGD_PLURAL in names:
                served.append(version)
            if DGDSA_PLURAL in names:
                adapters.add(version)
        chosen = dgd_versions.choose(served)
        with self._versions_lock:
            self._served = tuple(served)
            self._discovered = True
            changed = chosen != self._dgd_version or (
                (chosen in adapters) != (chosen in self._adapter_versions)
            )
            self._dgd_version = chosen
            self._adapter_versions = frozenset(adapters)
        if changed:
            if chosen:
                log.info("writing DynamoGraphDeployments as %s", DGD_GROUP + "/" + chosen)
            else:
                log.warning("%s", dgd_versions.no_version_message(served))
            if self._started:
                self._restart_dgd_reflectors()
            self._revision.bump()
        return chosen

    def _discover_quietly(self) -> bool:
        try:
            self.discover_dgd_versions()
        except ClusterError as e:
            log.warning("DGD version discovery failed (trying again shortly): %s", e)
            return False
        return True

    def _discovery_loop(self) -> None:
        stopping = self._stopping
        backoff = Backoff(
            base_s=self._tuning.backoff_initial_s,
            cap_s=self._tuning.backoff_max_s,
            rng=random.Random(self._rng.random()),
        )
        failed = not self._discovered
        while not stopping.is_set():
            if failed:
                stopping.wait(backoff.next_delay())
            else:
                # Every minute, or at once when a DGD path answered 404.
                self._rediscover.wait(self._rediscover_s)
                self._rediscover.clear()
            if stopping.is_set():
                return
            failed = not self._discover_quietly()
            if not failed:
                backoff.reset()

    def _with_version(self, operation: str, call: Callable[[str], Any]) -> Any:
        """`call(version)` in the version being written; after a 404, discover again and, if
        the version changed, try once more in the new one."""
        for attempt in range(2):
            version = self._dgd_version
            if not version:
                if not self._discovered or attempt == 0:
                    self._discover_or_raise(operation)
                    version = self._dgd_version
                if not version:
                    raise ClusterError(
                        f"{operation}: {dgd_versions.no_version_message(self._served)}"
                    )
            try:
                return call(version)
            except ApiException as e:
                if e.status != 404:
                    raise errors.wrap(e, operation=operation) from e
                if attempt == 0 and self._discover_or_raise(operation) != version:
                    continue
                raise _NotFound(errors.wrap(e, operation=operation)) from e
            except errors.CLIENT_ERRORS as e:
                raise errors.wrap(e, operation=operation) from e
        raise AssertionError("unreachable")

    def _discover_or_raise(self, operation: str) -> str:
        try:
            return self.discover_dgd_versions()
        except ClusterError as e:
            raise ClusterError(f"{operation}: {e}") from e

    def _start_dgd_reflectors(self) -> None:
        with self._versions_lock:
            if self._stopping.is_set():
                # stop() won the race with a version switch: it sets _stopping before it
                # takes this lock, so no watch starts after it collected the running ones.
                return
            self._dgd_stopping = threading.Event()
            version = self._dgd_version
            self._dgd_reflectors = (
                watches.dgds_and_adapters(
                    self._custom,
                    self.namespaces,
                    version,
                    with_adapters=version in self._adapter_versions,
                    dgds=self._dgds,
                    adapters=self._adapters,
                    tuning=self._tuning,
                    stopping=self._dgd_stopping,
                    rng=self._rng,
                    rediscover=self._rediscover,
                )
                if version
                else []
            )
            reflectors = list(self._dgd_reflectors)
        if not version or version not in self._adapter_versions:
            # Nothing is served: no DGD (or adapter) exists to be seen.
            for namespace in self.namespaces or (None,):
                if not version:
                    self._dgds.replace({}, namespace=namespace)
                self._adapters.replace({}, namespace=namespace)
        for reflector in reflectors:
            reflector.start()

    def _restart_dgd_reflectors(self) -> None:
        with self._versions_lock:
            self._dgd_stopping.set()
            old = list(self._dgd_reflectors)
        for reflector in old:
            reflector.interrupt()
        for reflector in old:
            reflector.join(self._tuning.connect_timeout_s + self._tuning.read_grace_s)
        if self._started and not self._stopping.is_set():
            self._start_dgd_reflectors()

    def watch_stats(self) -> dict[str, WatchStats]:
        """Each running watcher's counts, by its name (kind, version, namespace)."""
        return {r.name: r.stats for r in self._all_reflectors()}

    def _all_reflectors(self) -> list[Reflector[Any]]:
        with self._versions_lock:
            return [*self._reflectors, *self._dgd_reflectors]

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


class _NotFound(ClusterError):
    """A DGD call got 404 in the version being written (and discovery confirmed it)."""

    def __init__(self, cause: ClusterError) -> None:
        super().__init__(str(cause), retryable=cause.retryable)
