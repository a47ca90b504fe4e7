"""A model-based test of the hub's invariants: random sequences of what users and clusters do,
driven through real hubs and real agents on simulated clusters, with tests/invariants.py
checked after every step and once the fleet has settled.

`FleetMachine` is a hypothesis `RuleBasedStateMachine`; `machine_for(backend, hubs)` makes one
for a store backend ("sqlite", "postgres") and a number of hubs sharing it (two hubs: calls
alternate between them, agents stream to either). tests/integration/test_invariants_model.py
runs a derandomized fixed set in CI; tests/soak.py runs it as long as asked (docs/operations.md
"Soak").

The fleet: three clusters of two nodes of 8 H100-80GB (one replica is 4 devices: TP 4), two
projects with quotas the sequences raise and lower, workloads from a small set of names (so
sequences revisit them). Operations: create, scale (to 0 too), enable/disable a deployment,
delete, change placement, roll out a new serving config (at once or in waves), resume, abort;
cordon, uncordon, drain; stop an agent (past the failover toleration, given a `pause` step),
restart it with fewer nodes or read-only; discover, track and promote a DGD an agent found;
raise and lower quotas; preemption is on. A refused call (4xx) is fine, a 5xx is a violation;
every acknowledged write must read back the same from another hub (invariant 6).
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import yaml
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from hub.service.context import Settings
from tests import invariants, stores
from tests.harness import (
    ApiError,
    Hub,
    LoopThread,
    SimAgent,
    start_agent,
    wait_until,
    workload,
)

CLASS = "H100-80GB"
CLUSTERS = ("east", "west", "north")
PROJECTS = ("search", "ads")
NAMES = ("alpha", "beta", "gamma", "delta")
PRIORITIES = ("low", "normal", "high")
FULL = "nodes=2,gpus=8,class=H100-80GB,ready_after=0.2s"
SMALL = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
# A DGD the west agent finds running that nobody declared: discover, track, promote.
SEED_DGD = "legacy"
SETTINGS = Settings(stale_after_s=1.0, heartbeat_interval_s=0.2, preemption=True)
FAILOVER = {"toleration_seconds": 1, "stabilization_seconds": 1}
# Each project's quota to begin with: four replicas, a third of the fleet; quotas move within
# 0..48 (the whole fleet) as sequences raise and lower them.
QUOTA = 16

# What the soak reports: sequences and steps run, calls acknowledged and refused.
COUNTS = {"sequences": 0, "steps": 0, "acknowledged": 0, "refused": 0}
REFUSALS: dict[str, int] = {}
# Every violation seen, with the trace of the sequence that met it (the calls and cluster
# events, in order), even when hypothesis cannot replay it to shrink (a real fleet's timing).
VIOLATIONS: list[tuple[str, list[str]]] = []
# The running sequence's trace.
TRACE: list[str] = []


def seed_dgd() -> dict[str, Any]:
    args = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "4"]
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.1"
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": SEED_DGD, "namespace": "ml"},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": image}},
                },
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "replicas": 1,
                    "resources": {"limits": {"gpu": "4"}},
                    "extraPodSpec": {
                        "mainContainer": {
                            "image": image,
                            "command": ["python3", "-m", "dynamo.vllm"],
                            "args": args,
                        }
                    },
                },
            },
        },
    }


class Violation(AssertionError):
    """An invariant broke: the message lists every violation of the step."""


class Fleet:
    """The hubs, agents and store one sequence drives."""

    def __init__(self, backend: str, hub_count: int) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="wingsmith-model-")
        tmp = Path(self._tmp.name)
        self.loop = LoopThread()
        url = stores.store_url(tmp, backend)
        self.hubs: list[Hub] = []
        for _ in range(hub_count):
            self.hubs.append(Hub(loop=self.loop, db_path=url, settings=SETTINGS).start())
        self.seed = tmp / "seed.yaml"
        self.seed.write_text(yaml.safe_dump(seed_dgd()))
        self.tokens = {c: self.hubs[0].register_cluster(c) for c in CLUSTERS}
        self.agents: dict[str, SimAgent] = {}
        self.modes: dict[str, tuple[str, bool]] = {}
        self._turn = itertools.count()
        for c in CLUSTERS:
            self.start_agent(c, FULL, read_only=False)
        for project in PROJECTS:
            self.hubs[0].create_project(project, H100_80GB=QUOTA)
        wait_until(
            lambda: all(
                self.hubs[0].get(f"/v1/clusters/{c}")["devices"].get(CLASS, {}).get("total")
                for c in CLUSTERS
            ),
            timeout=60,
            what="every cluster's devices",
        )

    @property
    def ctx(self) -> Any:
        server = self.hubs[0].server
        assert server is not None and server.ctx is not None
        return server.ctx

    @property
    def store(self) -> Any:
        return self.ctx.db

    def hub(self) -> Hub:
        """The next hub, in turn: calls spread over every hub."""
        return self.hubs[next(self._turn) % len(self.hubs)]

    def other(self) -> Hub:
        return self.hubs[next(self._turn) % len(self.hubs)]

    def start_agent(self, cluster: str, spec: str, *, read_only: bool) -> None:
        hub = self.hubs[CLUSTERS.index(cluster) % len(self.hubs)]
        self.agents[cluster] = start_agent(
            self.loop,
            hub,
            cluster_id=cluster,
            token=self.tokens[cluster],
            spec=spec,
            read_only=read_only,
            seed_path=str(self.seed) if cluster == "west" else None,
        )
        self.modes[cluster] = (spec, read_only)
        TRACE.append(f"agent {cluster} started ({spec}{', read-only' if read_only else ''})")

    def stop_agent(self, cluster: str) -> None:
        agent = self.agents.pop(cluster, None)
        if agent is not None:
            agent.stop()
            TRACE.append(f"agent {cluster} stopped")

    def close(self) -> None:
        for cluster in list(self.agents):
            with contextlib.suppress(Exception):
                self.stop_agent(cluster)
        for hub in self.hubs:
            with contextlib.suppress(Exception):
                hub.stop()
        self.loop.close()
        self._tmp.cleanup()


def call(hub: Hub, method: str, path: str, body: Any = None) -> dict[str, Any] | None:
    """One user call: its answer, or None when refused (4xx). A 5xx is a violation: bad
    input gets a clear refusal, never a server error."""
    TRACE.append(f"{method} {path} {body if body is not None else ''}".rstrip())
    try:
        answer = hub.rest(method, path, body)[1]
    except ApiError as e:
        if e.status >= 500:
            raise Violation(f"{method} {path} {body!r}: {e.status} {e.body}") from None
        COUNTS["refused"] += 1
        message = str(e.body.get("error", {}).get("message", ""))[:60]
        key = f"{method} {path.split('/')[2]} {e.status} {message}"
        REFUSALS[key] = REFUSALS.get(key, 0) + 1
        return None
    COUNTS["acknowledged"] += 1
    return answer


class FleetMachine(RuleBasedStateMachine):
    backend: ClassVar[str] = "sqlite"
    hub_count: ClassVar[int] = 1

    def __init__(self) -> None:
        super().__init__()
        COUNTS["sequences"] += 1
        TRACE.clear()
        self.fleet = Fleet(self.backend, self.hub_count)
        self.before: invariants.Snapshot | None = None
        # (project, class) -> the charge a quota lowering left running (docs/admission.md).
        self.allowance: dict[tuple[str, str], int] = {}
        self.quotas = {p: QUOTA for p in PROJECTS}
        self.created: set[str] = set()
        self.serial = itertools.count(1)

    # -- users ------------------------------------------------------------------------------

    @initialize(data=st.data())
    def begin(self, data: st.DataObject) -> None:
        """Every sequence starts with two workloads, so what follows has something to act on."""
        self.check()
        for name in NAMES[:2]:
            self.create(
                name=name,
                project=data.draw(st.sampled_from(PROJECTS), label="project"),
                replicas=data.draw(st.integers(1, 4), label="replicas"),
                clusters=data.draw(
                    st.lists(st.sampled_from(CLUSTERS), unique=True, max_size=2), label="clusters"
                ),
                failover=data.draw(st.booleans(), label="failover"),
                priority=data.draw(st.sampled_from(PRIORITIES), label="priority"),
                preferred=None,
            )
        self.check()

    @rule(
        name=st.sampled_from(NAMES),
        project=st.sampled_from(PROJECTS),
        replicas=st.integers(0, 4),
        clusters=st.lists(st.sampled_from(CLUSTERS), unique=True, max_size=2),
        failover=st.booleans(),
        priority=st.sampled_from(PRIORITIES),
        preferred=st.sampled_from((None, *CLUSTERS)),
    )
    def create(
        self,
        name: str,
        project: str,
        replicas: int,
        clusters: list[str],
        failover: bool,
        priority: str,
        preferred: str | None,
    ) -> None:
        body = workload(name, project=project, replicas=replicas, clusters=tuple(clusters))
        placement = body.setdefault("placement", {})
        if failover:
            placement["failover"] = dict(FAILOVER)
        if preferred is not None:
            placement["preferences"] = [{"clusters": [preferred]}]
        body["priority"] = priority
        done = call(self.fleet.hub(), "POST", "/v1/workloads", body)
        if done is not None:
            self.created.add(name)
            self.readable(name, {"replicas": replicas, "priority": priority})

    def pick(self, data: st.DataObject) -> str:
        """A workload of the sequence: one it created when there is one (a call on a name
        nobody created is only a 404)."""
        # An index, mapped onto what exists now: the strategy is the same in every replay
        # (hypothesis replays and shrinks by it), whatever the hub answered this time.
        index = data.draw(st.integers(0, len(NAMES) - 1), label="workload")
        names = sorted(self.created) or list(NAMES)
        return names[index % len(names)]

    @rule(data=st.data(), replicas=st.integers(0, 5))
    def scale(self, data: st.DataObject, replicas: int) -> None:
        name = self.pick(data)
        if call(self.fleet.hub(), "PATCH", f"/v1/workloads/{name}", {"replicas": replicas}):
            self.readable(name, {"replicas": replicas})

    @rule(data=st.data(), cluster=st.sampled_from(CLUSTERS), on=st.booleans())
    def enable(self, data: st.DataObject, cluster: str, on: bool) -> None:
        name = self.pick(data)
        ref = f"/v1/deployments/{name}.{cluster}"
        if call(self.fleet.hub(), "PATCH", ref, {"enabled": on}):
            back = call(self.fleet.other(), "GET", ref)
            self.violations(
                invariants.readable({"enabled": on}, back or {}, what=f"deployment {name}")
            )

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = self.pick(data)
        if call(self.fleet.hub(), "DELETE", f"/v1/workloads/{name}") is not None:
            self.created.discard(name)
            status, _ = self.fleet.other().rest("GET", f"/v1/workloads/{name}", check=False)
            if status != 404:
                self.violations([f"write: workload {name} was deleted but reads {status}"])

    @rule(
        data=st.data(),
        clusters=st.lists(st.sampled_from(CLUSTERS), unique=True, min_size=1, max_size=3),
        failover=st.booleans(),
    )
    def move(self, data: st.DataObject, clusters: list[str], failover: bool) -> None:
        name = self.pick(data)
        placement: dict[str, Any] = {"clusters": clusters}
        if failover:
            placement["failover"] = dict(FAILOVER)
        call(self.fleet.hub(), "PATCH", f"/v1/workloads/{name}", {"placement": placement})

    @rule(data=st.data(), waves=st.booleans())
    def roll_out(self, data: st.DataObject, waves: bool) -> None:
        name = self.pick(data)
        args = ["--seed", str(next(self.serial))]
        body: dict[str, Any] = {"serving": {"engine_args": args}}
        if waves:
            body["rollout"] = {"max_clusters_in_flight": 1, "wave_deadline_seconds": 30}
        call(self.fleet.hub(), "PATCH", f"/v1/workloads/{name}", body)

    @rule(data=st.data(), verb=st.sampled_from(("resume", "abort")))
    def rollout_verb(self, data: st.DataObject, verb: str) -> None:
        name = self.pick(data)
        call(self.fleet.hub(), "POST", f"/v1/workloads/{name}:{verb}", {})

    @rule(project=st.sampled_from(PROJECTS), limit=st.integers(0, 48))
    def set_quota(self, project: str, limit: int) -> None:
        done = call(
            self.fleet.hub(), "PATCH", f"/v1/projects/{project}", {"quotas": {CLASS: limit}}
        )
        if done is None:
            return
        key = (project, CLASS)
        lowered = limit < self.quotas[project]
        self.quotas[project] = limit
        back = call(self.fleet.other(), "GET", f"/v1/projects/{project}") or {}
        self.violations(invariants.readable({CLASS: limit}, back.get("quotas") or {}, what=project))
        if lowered:
            # What runs keeps running (docs/admission.md "Lowering a quota"): the charge at
            # the lowering is allowed until it comes down.
            charged = invariants.read(self.fleet.store).charged.get(key, 0)
            if charged > limit:
                self.allowance[key] = max(self.allowance.get(key, 0), charged)

    # -- clusters ---------------------------------------------------------------------------

    @rule(cluster=st.sampled_from(CLUSTERS), verb=st.sampled_from(("cordon", "uncordon", "drain")))
    def maintain(self, cluster: str, verb: str) -> None:
        call(self.fleet.hub(), "POST", f"/v1/clusters/{cluster}:{verb}", {})

    @precondition(lambda self: len(self.fleet.agents) > 1)
    @rule(cluster=st.sampled_from(CLUSTERS))
    def stop_agent(self, cluster: str) -> None:
        self.fleet.stop_agent(cluster)

    @rule(
        cluster=st.sampled_from(CLUSTERS),
        small=st.booleans(),
        read_only=st.booleans(),
    )
    def restart_agent(self, cluster: str, small: bool, read_only: bool) -> None:
        self.fleet.stop_agent(cluster)
        self.fleet.start_agent(cluster, SMALL if small else FULL, read_only=read_only)

    @rule()
    def pause(self) -> None:
        """Let time pass: past the failover toleration and the stale grace period."""
        TRACE.append("pause 1.5 s")
        time.sleep(1.5)

    @precondition(lambda self: len(self.fleet.agents) > 1)
    @rule(cluster=st.sampled_from(CLUSTERS))
    def lose_cluster(self, cluster: str) -> None:
        """A cluster goes silent past every failover toleration (its stand-ins placed)."""
        self.fleet.stop_agent(cluster)
        TRACE.append("pause 2.5 s")
        time.sleep(2.5)

    # -- adoption ---------------------------------------------------------------------------

    @rule(verb=st.sampled_from(("track", "promote")), project=st.sampled_from(PROJECTS))
    def adopt(self, verb: str, project: str) -> None:
        body = {"project": project} if verb == "promote" else {}
        call(self.fleet.hub(), "POST", f"/v1/discovered/west.ml.{SEED_DGD}/{verb}", body)

    @rule(replicas=st.integers(0, 3))
    def scale_adopted(self, replicas: int) -> None:
        call(self.fleet.hub(), "PATCH", f"/v1/workloads/{SEED_DGD}", {"replicas": replicas})

    @rule(authority=st.sampled_from(("managed", "observed")))
    def hand_over(self, authority: str) -> None:
        call(
            self.fleet.hub(),
            "POST",
            f"/v1/deployments/{SEED_DGD}.west/authority",
            {"authority": authority, "accept_differences": True},
        )

    # -- checks -----------------------------------------------------------------------------

    def readable(self, name: str, fields: dict[str, Any]) -> None:
        back = call(self.fleet.other(), "GET", f"/v1/workloads/{name}") or {}
        self.violations(invariants.readable(fields, back, what=f"workload {name}"))

    def violations(self, found: list[str]) -> None:
        if found:
            VIOLATIONS.append(("\n".join(found), list(TRACE)))
            raise Violation("\n".join(found))

    @invariant()
    def holds(self) -> None:
        COUNTS["steps"] += 1
        self.check()

    def check(self) -> None:
        snap = invariants.read(self.fleet.store)
        found = invariants.check_all(snap, before=self.before, allowance=self.allowance)
        found += invariants.state_words(self.fleet.ctx)
        self.before = snap
        # A lowering's allowance shrinks with the charge: what went is not given back.
        for key, allowed in list(self.allowance.items()):
            charged = snap.charged.get(key, 0)
            if charged <= snap.quota_limits.get(key, 0):
                del self.allowance[key]
            else:
                self.allowance[key] = min(allowed, charged)
        self.violations(found)

    def settle(self) -> None:
        """Wait until admission and what the agents hold stop changing, then check again."""

        def shape() -> tuple[Any, ...]:
            snap = invariants.read(self.fleet.store)
            return tuple(
                (
                    d.deployment_id,
                    d.desired_replicas,
                    d.admitted_replicas,
                    d.surge_replicas,
                    d.admission_reason,
                    snap.held.get(d.deployment_id, 0),
                )
                for d in snap.deployments
            )

        # Settled: the same for two seconds running (agents report about every second), or
        # ten seconds passed (a rollout in waves may wait on its deadline far longer).
        last, stable = shape(), 0
        deadline = time.monotonic() + 10
        while stable < 2 and time.monotonic() < deadline:
            time.sleep(1.0)
            now = shape()
            stable = stable + 1 if now == last else 0
            last = now
        self.check()

    def teardown(self) -> None:
        try:
            self.settle()
        finally:
            self.fleet.close()


def machine_for(backend: str, hubs: int = 1) -> type[FleetMachine]:
    return type(
        f"FleetMachine_{backend}_{hubs}",
        (FleetMachine,),
        {"backend": backend, "hub_count": hubs},
    )
