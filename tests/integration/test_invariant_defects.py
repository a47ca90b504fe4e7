"""Defects the invariants found (issue 20), each as the sequence that broke one, on a real hub
with real agents on simulated clusters; tests/invariants.py says what must hold after it.

- a scale-up after a failover turned the stand-in's admission into an ordinary replica with
  no quota check, and the project stayed over its quota after failback;
- scaling an observed (adopted) deployment, or a managed one on a read-only cluster, reserved
  devices for replicas no agent will create;
- a cluster whose agent came back with fewer nodes kept a reservation it cannot hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.service.context import Settings
from tests import invariants
from tests.harness import Hub, LoopThread, SimAgent, running_hub, start_agent, wait_until, workload
from tests.integration.test_adoption import legacy_dgd, seeded

SPEC = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
H100 = "H100-80GB"


@pytest.fixture
def fast(tmp_path: Path) -> Iterator[tuple[LoopThread, Hub]]:
    with running_hub(tmp_path, Settings(stale_after_s=1.0, heartbeat_interval_s=0.2)) as pair:
        yield pair


def store(hub: Hub) -> Any:
    assert hub.server is not None and hub.server.ctx is not None
    return hub.server.ctx.db


def ready(hub: Hub, ref: str) -> int:
    status = hub.get(f"/v1/deployments/{ref}").get("status") or {}
    return int(status.get("ready_replicas") or 0)


def charged(hub: Hub, project: str = "search") -> int:
    usage = hub.get(f"/v1/projects/{project}")["usage"].get(H100, {})
    return int(usage.get("used", 0)) + int(usage.get("reserved", 0))


def test_a_scale_up_after_a_failover_waits_on_the_quota_and_failback_leaves_it_within(
    fast: tuple[LoopThread, Hub],
) -> None:
    loop, hub = fast
    hub.create_project("search", H100_80GB=8)
    tokens = {c: hub.register_cluster(c) for c in ("east", "west")}
    # East holds one replica and no more: a new replica can only go to west.
    specs = {
        "east": "nodes=1,gpus=4,class=H100-80GB,ready_after=0.2s",
        "west": "nodes=1,gpus=16,class=H100-80GB,ready_after=0.2s",
    }
    agents: dict[str, SimAgent] = {
        c: start_agent(loop, hub, cluster_id=c, token=t, spec=specs[c]) for c, t in tokens.items()
    }
    started = list(agents.values())
    try:
        for c in tokens:
            wait_until(lambda c=c: hub.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
        failover = {"toleration_seconds": 1, "stabilization_seconds": 1}
        body = workload("llama", replicas=1, clusters=("east",))
        body["placement"]["failover"] = failover
        hub.post("/v1/workloads", body)
        placement = {"clusters": ["east", "west"], "failover": failover}
        hub.patch("/v1/workloads/llama", {"replicas": 2, "placement": placement})
        wait_until(lambda: ready(hub, "llama.east") == ready(hub, "llama.west") == 1, what="ready")

        agents["east"].stop()
        wait_until(lambda: admitted(hub, "llama.west") == 2, timeout=15, what="the stand-in")
        invariants.assert_holds(store(hub))
        # The quota is spent: east's replica (lost, still charged) and its stand-in on west
        # count once; a third replica does not fit.
        hub.patch("/v1/workloads/llama", {"replicas": 3})
        snap = invariants.assert_holds(store(hub))
        west = next(d for d in snap.deployments if d.cluster_id == "west")
        assert west.desired_replicas == 3
        assert west.admission_reason == "insufficient_quota", west

        # East comes back; after failback the project is within its quota for good.
        agents["east"] = start_agent(
            loop, hub, cluster_id="east", token=tokens["east"], spec=specs["east"]
        )
        started.append(agents["east"])
        wait_until(
            lambda: all(f["state"] == "failed_back" for f in failovers(hub, "llama")),
            timeout=20,
            what="failed back",
        )
        wait_until(lambda: charged(hub) <= 8, timeout=20, what="the charge within the quota")
        snap = invariants.assert_holds(store(hub))
        assert sum(d.admitted_replicas for d in snap.deployments) == 2
    finally:
        for agent in started:
            agent.stop()


def admitted(hub: Hub, ref: str) -> int:
    name, cluster = ref.rsplit(".", 1)
    for d in invariants.read(store(hub)).deployments:
        if (d.workload_name, d.cluster_id) == (name, cluster):
            return d.admitted_replicas
    return 0


def failovers(hub: Hub, name: str) -> list[dict[str, Any]]:
    return list(hub.get(f"/v1/workloads/{name}").get("failovers") or [])


def test_scaling_an_observed_deployment_reserves_nothing_and_says_why(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agents(cluster_id="east", token=token, seed_path=seeded(tmp_path, legacy_dgd()))
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"], what="seen")
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    wait_until(lambda: ready(hub, "legacy-qwen.east") == 2, what="its two replicas reported")
    before = charged(hub)
    hub.patch("/v1/workloads/legacy-qwen", {"replicas": 4})
    invariants.assert_holds(store(hub))
    assert charged(hub) == before, "nothing reserved for replicas the agent never creates"
    deployment = hub.get("/v1/deployments/legacy-qwen.east")
    assert admitted(hub, "legacy-qwen.east") == 2
    assert deployment["admission_reason"] == "observed"
    assert "hand it over" in deployment["admission_message"]
    # Handed over, the agent creates them: then they are admitted (and charged).
    hub.post(
        "/v1/deployments/legacy-qwen.east/authority",
        {"authority": "managed", "accept_differences": True},
    )
    wait_until(
        lambda: admitted(hub, "legacy-qwen.east") == 4,
        what="admitted once managed",
    )
    invariants.assert_holds(store(hub))


def test_a_managed_deployment_on_a_read_only_cluster_reserves_nothing_and_says_why(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    reader = agents(cluster_id="east", token=token, read_only=True)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices reported")
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    invariants.assert_holds(store(hub))
    assert charged(hub) == 0
    cluster = hub.get("/v1/clusters/east")["devices"][H100]
    assert cluster["reserved"] == 0 and cluster["free"] == 16, cluster
    deployment = hub.get("/v1/deployments/chat.east")
    assert admitted(hub, "chat.east") == 0
    assert deployment["admission_reason"] == "cluster_read_only"
    assert "read-only" in deployment["admission_message"]
    # The operator switches the agent to managing: admitted, charged, running.
    reader.stop()
    agents(cluster_id="east", token=token)
    wait_until(lambda: ready(hub, "chat.east") == 2, what="running once managed")
    assert charged(hub) == 8
    invariants.assert_holds(store(hub))


def test_a_cluster_that_came_back_smaller_releases_the_reservation_it_cannot_hold(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=24)
    big = agents(cluster_id="east", token=token, spec="nodes=3,gpus=8,ready_after=0.1s")
    hub.post("/v1/workloads", workload("chat", replicas=3, tp=8, clusters=("east",)))
    wait_until(lambda: ready(hub, "chat.east") == 3, what="three replicas running")
    big.stop()
    agents(cluster_id="east", token=token, spec="nodes=2,gpus=8,ready_after=0.1s")
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"][H100]["total"] == 16, what="smaller")
    wait_until(lambda: admitted(hub, "chat.east") == 2, what="the replica that cannot fit waiting")
    deployment = hub.get("/v1/deployments/chat.east")
    assert deployment["admission_reason"] == "insufficient_capacity"
    assert "16" in deployment["admission_message"] or "free" in deployment["admission_message"]
    invariants.assert_holds(store(hub))
    wait_until(lambda: charged(hub) == 16, what="the charge released")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_deleting_a_workload_that_has_no_deployment_is_no_server_error(
    tmp_path: Path, backend: str
) -> None:
    # Found by the soak on two hubs sharing PostgreSQL: a workload of 0 replicas has no
    # deployment; deleting it ran an admission pass scoped to no cluster, whose query read
    # "IN ()": a 500 on PostgreSQL (SQLite accepts it).
    with running_hub(tmp_path, backend=backend) as (_, hub):
        hub.create_project("search", H100_80GB=8)
        hub.register_cluster("east")
        hub.post("/v1/workloads", workload("empty", replicas=0, clusters=("east",)))
        assert hub.get("/v1/workloads/empty")["deployments"] == []
        status, body = hub.rest("DELETE", "/v1/workloads/empty", check=False)
        assert status == 200, body
        assert hub.rest("GET", "/v1/workloads/empty", check=False)[0] == 404
