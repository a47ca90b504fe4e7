"""Leader election through a coordination.k8s.io/v1 Lease (docs/daemonset.md).

Every agent pod of the DaemonSet runs a `LeaseElector`; the one holding the Lease reconciles
deployments and reports cluster-level state, every pod reports its own node. The algorithm is
client-go's leaderelection, simplified:

- acquire: create the Lease, or take it over when its holder has not renewed within
  leaseDurationSeconds; taking over increments leaseTransitions;
- renew: the holder rewrites renewTime every `retry_s`; writes carry the Lease's
  resourceVersion, so of two pods racing for it exactly one wins (409 Conflict for the other);
- lose: a holder that cannot renew within `renew_deadline_s` stops leading (before the Lease
  expires for the others, so two pods never lead at once on a healthy clock).

The **term** is leaseTransitions + 1 at acquisition: it increases every time leadership
changes hands. The agent sends it to the hub, which fences any session leading with an older
term (hub/sync/leadership.py): even a pod that still believes it leads, but lost the Lease
while partitioned, is told to stop reconciling.

The hub never forgets a term, but a Lease can be deleted and created again (its namespace
deleted and the agent reinstalled): the new holder starts again at term 1, below the hub's,
and a holder that keeps its Lease never moves leaseTransitions on by itself. So when the hub
fences a pod that still holds the Lease, `advance(term)` moves leaseTransitions up to the
hub's term (a write the holder is entitled to; the resourceVersion guards it like a renewal),
and the pod claims term + 1. A pod that does not hold the Lease any more just steps down.

Only a managed agent runs an elector: a read-only one writes nothing, a Lease included, and
is granted leadership by the hub instead (agent/kubernetes.py).

Runs in a daemon thread (the Kubernetes client blocks); `on_change(leading, term)` is called
from that thread whenever leadership changes.
"""

from __future__ import annotations

import datetime
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

Clock = Callable[[], datetime.datetime]
OnChange = Callable[[bool, int], None]


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_s: float = 2.0


@dataclass(frozen=True)
class LeaseState:
    leading: bool
    term: int


class LeaseElector:
    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        name: str,
        identity: str,
        on_change: OnChange = lambda leading, term: None,
        timing: LeaseTiming | None = None,
        clock: Clock = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self._api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self._on_change = on_change
        self.timing = timing or LeaseTiming()
        self._clock = clock
        self._rng = rng or random.Random()
        self._state = LeaseState(False, 0)
        self._last_renew: datetime.datetime | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # step() runs on the elector's thread, advance() on a worker thread of the agent.
        self._lock = threading.Lock()

    @property
    def state(self) -> LeaseState:
        return self._state

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lease-elector", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop; a leader releases the Lease so another pod takes over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timing.retry_s * 3)
        if release and self._state.leading:
            self._release()
        self._set(LeaseState(False, self._state.term))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            jitter = self._rng.uniform(0, self.timing.retry_s * 0.2)
            self._stop.wait(self.timing.retry_s + jitter)

    def step(self) -> LeaseState:
        """One attempt to acquire or renew; public so tests can drive it without threads."""
        with self._lock:
            now = self._clock()
            try:
                state = self._try(now)
            except ApiException as e:
                log.warning("lease %s/%s: %s %s", self.namespace, self.name, e.status, e.reason)
                state = self._unrenewed(now)
            except Exception as e:  # network errors from urllib3: same as a failed renewal
                log.warning("lease %s/%s: %s", self.namespace, self.name, e)
                state = self._unrenewed(now)
            self._set(state)
            return state

    def advance(self, past: int) -> LeaseState:
        """The hub fenced this pod at term `past`: if it still holds the Lease, move the
        Lease's transitions on so that it leads with term `past` + 1; if not, step down."""
        with self._lock:
            if self._state.leading and self._state.term > past:
                return self._state  # already past it (a fence that crossed a renewal)
            now = self._clock()
            try:
                state = self._advance(past, now)
            except Exception as e:  # as a failed renewal: the next step tries again
                log.warning("lease %s/%s: advancing the term: %s", self.namespace, self.name, e)
                state = self._unrenewed(now)
            self._set(state)
            return state

    # -- one attempt --------------------------------------------------------------------------

    def _try(self, now: datetime.datetime) -> LeaseState:
        try:
            lease = self._api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            return self._create(now)
        spec = lease.spec or client.V1LeaseSpec()
        transitions = int(spec.lease_transitions or 0)
        if spec.holder_identity == self.identity:
            return self._write(lease, spec, now, transitions=transitions, acquired=False)
        if not self._expired(spec, now):
            return LeaseState(False, transitions + 1)
        return self._write(lease, spec, now, transitions=transitions + 1, acquired=True)

    def _advance(self, past: int, now: datetime.datetime) -> LeaseState:
        lease = self._api.read_namespaced_lease(self.name, self.namespace)
        spec = lease.spec or client.V1LeaseSpec()
        transitions = int(spec.lease_transitions or 0)
        if spec.holder_identity != self.identity or self._expired(spec, now):
            return LeaseState(False, transitions + 1)
        log.warning(
            "lease %s/%s: the hub knows term %d, this Lease only %d (was it recreated?);"
            " moving its term on",
            self.namespace,
            self.name,
            past,
            transitions + 1,
        )
        return self._write(lease, spec, now, transitions=max(transitions, past), acquired=False)

    def _create(self, now: datetime.datetime) -> LeaseState:
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=self._spec(now, acquire_time=now, transitions=0),
        )
        try:
            self._api.create_namespaced_lease(self.namespace, lease)
        except ApiException as e:
            if e.status == 409:
                return LeaseState(False, self._state.term)  # another pod created it first
            raise
        self._last_renew = now
        return LeaseState(True, 1)

    def _write(
        self,
        lease: Any,
        spec: Any,
        now: datetime.datetime,
        *,
        transitions: int,
        acquired: bool,
    ) -> LeaseState:
        lease.spec = self._spec(
            now, acquire_time=now if acquired else spec.acquire_time, transitions=transitions
        )
        try:
            self._api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as e:
            if e.status == 409:
                return LeaseState(False, transitions + 1)  # lost the race this round
            raise
        self._last_renew = now
        return LeaseState(True, transitions + 1)

    def _spec(
        self, now: datetime.datetime, *, acquire_time: Any, transitions: int
    ) -> client.V1LeaseSpec:
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.timing.lease_duration_s),
            acquire_time=acquire_time,
            renew_time=now,
            lease_transitions=transitions,
        )

    def _expired(self, spec: Any, now: datetime.datetime) -> bool:
        if not spec.holder_identity or spec.renew_time is None:
            return True
        duration = datetime.timedelta(seconds=spec.lease_duration_seconds or 0)
        renew: datetime.datetime = spec.renew_time
        if renew.tzinfo is None:
            renew = renew.replace(tzinfo=datetime.UTC)
        return now > renew + duration

    def _unrenewed(self, now: datetime.datetime) -> LeaseState:
        """A failed attempt: a leader keeps leading until its renew deadline passes."""
        if not self._state.leading or self._last_renew is None:
            return LeaseState(False, self._state.term)
        if now - self._last_renew > datetime.timedelta(seconds=self.timing.renew_deadline_s):
            log.warning(
                "lease %s/%s: renew deadline passed; stepping down", self.namespace, self.name
            )
            return LeaseState(False, self._state.term)
        return self._state

    def _release(self) -> None:
        try:
            lease = self._api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self._api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception as e:  # best effort: the Lease expires on its own anyway
            log.info("releasing lease %s/%s: %s", self.namespace, self.name, e)

    def _set(self, state: LeaseState) -> None:
        if state == self._state:
            return
        changed_leading = state.leading != self._state.leading
        self._state = state
        if changed_leading or state.leading:
            log.info(
                "lease %s/%s: leading=%s term=%d",
                self.namespace,
                self.name,
                state.leading,
                state.term,
            )
            self._on_change(state.leading, state.term)
