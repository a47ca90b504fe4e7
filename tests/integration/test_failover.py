"""Failover, failback and drain on a real hub with real agents on simulated clusters.

Killing an agent makes its cluster stale; past the workload's toleration its replicas stand in
on another cluster (nothing deleted on the lost one); restarting the agent brings it back, and
after the stabilization window the stand-ins go. A drain re-places a cluster's managed
deployments first and removes them there once their stand-ins run (docs/placement.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import (
    SHORT_GRACE,
    Hub,
    LoopThread,
    SimAgent,
    running_hub,
    start_agent,
    wait_until,
    workload,
)
from tests.integration.test_rejects_and_paging import FOREIGN_DGD

SPEC = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"


@pytest.fixture
def fast(tmp_path: Path) -> Iterator[tuple[LoopThread, Hub]]:
    with running_hub(tmp_path, SHORT_GRACE) as pair:
        yield pair


def ready(hub: Hub, name: str) -> int:
    status = hub.get(f"/v1/deployments/{name}").get("status") or {}
    return int(status.get("ready_replicas") or 0)


def shares(hub: Hub, name: str) -> dict[str, int]:
    return {
        d["cluster_id"]: d["desired_replicas"]
        for d in hub.get(f"/v1/workloads/{name}")["deployments"]
    }


def failovers(hub: Hub, name: str) -> list[dict[str, Any]]:
    return list(hub.get(f"/v1/workloads/{name}").get("failovers") or [])


def charged(hub: Hub) -> int:
    usage = hub.get("/v1/projects/search")["usage"]["H100-80GB"]
    return int(usage.get("used", 0)) + int(usage.get("reserved", 0))


def test_a_stale_cluster_fails_over_and_back_charging_the_quota_once(
    fast: tuple[LoopThread, Hub],
) -> None:
    loop, hub = fast
    # Quota for exactly the workload's two replicas: a stand-in runs on the lost replica's
    # charge, or it could not run at all.
    hub.create_project("search", H100_80GB=8)
    tokens = {c: hub.register_cluster(c) for c in ("east", "west")}
    agents = {
        c: start_agent(loop, hub, cluster_id=c, token=t, spec=SPEC) for c, t in tokens.items()
    }
    started: list[SimAgent] = list(agents.values())
    try:
        for c in tokens:
            wait_until(lambda c=c: hub.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
        body = workload("llama", replicas=2, clusters=("east", "west"))
        body["placement"]["failover"] = {"toleration_seconds": 1, "stabilization_seconds": 2}
        created = hub.post("/v1/workloads", body)
        assert created["placement"]["failover"] == {
            "toleration_seconds": 1,
            "stabilization_seconds": 2,
        }
        assert shares(hub, "llama") == {"east": 1, "west": 1}
        wait_until(lambda: ready(hub, "llama.east") == ready(hub, "llama.west") == 1, what="ready")

        agents["east"].stop()  # east goes quiet
        wait_until(lambda: failovers(hub, "llama"), what="failover")
        (event,) = failovers(hub, "llama")
        assert (event["cluster_id"], event["cause"], event["state"]) == (
            "east",
            "stale",
            "failed_over",
        )
        assert event["stand_ins"] == {"west": 1}
        assert "nothing was deleted on east" in event["message"]
        # The lost deployment stays; west carries one stand-in, and it runs within the quota.
        assert shares(hub, "llama") == {"east": 1, "west": 2}
        west = hub.get("/v1/deployments/llama.west")
        assert (west["failover_replicas"], west["failover_for"]) == (1, ["east"])
        wait_until(lambda: ready(hub, "llama.west") == 2, what="the stand-in running on west")
        assert hub.get("/v1/workloads/llama")["ready_replicas"] == 2
        assert charged(hub) <= 8

        # East comes back: its replica is ready again, the stand-in goes after the window.
        agents["east"] = start_agent(loop, hub, cluster_id="east", token=tokens["east"], spec=SPEC)
        started.append(agents["east"])
        wait_until(
            lambda: failovers(hub, "llama")[0]["state"] in ("recovering", "failed_back"),
            what="recovering",
        )
        assert charged(hub) <= 8
        wait_until(lambda: failovers(hub, "llama")[0]["state"] == "failed_back", what="back")
        (event,) = failovers(hub, "llama")
        assert "stand-ins removed" in event["message"] and event.get("end_time")
        assert shares(hub, "llama") == {"east": 1, "west": 1}
        assert hub.get("/v1/deployments/llama.west").get("failover_replicas", 0) == 0
        wait_until(lambda: ready(hub, "llama.west") == 1, what="west back to one replica")
        # The stand-in's devices are charged (held) until its pod is gone, like any scale-down.
        wait_until(lambda: charged(hub) == 8, what="the stand-in's devices released")
    finally:
        for agent in started:
            agent.stop()


def test_stand_ins_go_to_the_most_preferred_open_cluster(fast: tuple[LoopThread, Hub]) -> None:
    loop, hub = fast
    hub.create_project("search", H100_80GB=32)
    tokens = {c: hub.register_cluster(c) for c in ("east", "west", "north")}
    started = [start_agent(loop, hub, cluster_id=c, token=t, spec=SPEC) for c, t in tokens.items()]
    try:
        for c in tokens:
            wait_until(lambda c=c: hub.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
        body = workload("llama", replicas=2)
        body["placement"] = {
            "clusters": ["east", "west", "north"],
            # east first; then north before west. Without preferences the two stand-ins
            # would level over west and north (one each).
            "preferences": [{"clusters": ["east"]}, {"clusters": ["north"]}],
            "failover": {"toleration_seconds": 1, "stabilization_seconds": 60},
        }
        hub.post("/v1/workloads", body)
        assert shares(hub, "llama") == {"east": 2}
        wait_until(lambda: ready(hub, "llama.east") == 2, what="ready on east")

        started[0].stop()  # east goes quiet
        wait_until(lambda: failovers(hub, "llama"), what="failover")
        (event,) = failovers(hub, "llama")
        assert event["stand_ins"] == {"north": 2}, event
        assert shares(hub, "llama") == {"east": 2, "north": 2}
        wait_until(lambda: ready(hub, "llama.north") == 2, what="the stand-ins running on north")
    finally:
        for agent in started:
            agent.stop()


def test_drain_replaces_a_clusters_replicas_first_then_removes_them_there(
    fast: tuple[LoopThread, Hub],
) -> None:
    loop, hub = fast
    hub.create_project("search", H100_80GB=8)
    tokens = {c: hub.register_cluster(c) for c in ("east", "west")}
    started = [start_agent(loop, hub, cluster_id=c, token=t, spec=SPEC) for c, t in tokens.items()]
    try:
        for c in tokens:
            wait_until(lambda c=c: hub.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
        hub.post("/v1/workloads", workload("llama", replicas=2))  # no failover asked: drain anyway
        assert shares(hub, "llama") == {"east": 1, "west": 1}
        wait_until(lambda: ready(hub, "llama.east") == ready(hub, "llama.west") == 1, what="ready")

        cluster = hub.post("/v1/clusters/east:drain", {})
        assert cluster["draining"] is True
        # Make before break: east keeps its replica until west runs the stand-in.
        (event,) = failovers(hub, "llama")
        assert (event["cause"], event["stand_ins"]) == ("draining", {"west": 1})
        wait_until(lambda: "east" not in shares(hub, "llama"), what="east removed")
        assert ready(hub, "llama.west") == 2
        (event,) = failovers(hub, "llama")
        assert event["state"] == "drained" and "drained" in event["message"]
        assert shares(hub, "llama") == {"west": 2}
        assert charged(hub) <= 8
        # Drained: new work goes elsewhere until it is uncordoned.
        assert hub.get("/v1/clusters/east")["draining"] is True
        hub.post("/v1/clusters/east:uncordon", {})
        assert hub.get("/v1/clusters/east").get("draining", False) is False
    finally:
        for agent in started:
            agent.stop()


def test_drain_moves_managed_deployments_and_leaves_an_observed_one_running(
    fast: tuple[LoopThread, Hub], tmp_path: Path
) -> None:
    loop, hub = fast
    hub.create_project("search", H100_80GB=16)
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))  # a DGD someone else made, 4 GPUs
    tokens = {c: hub.register_cluster(c) for c in ("east", "west")}
    east = start_agent(
        loop, hub, cluster_id="east", token=tokens["east"], spec=SPEC, seed_path=str(seed)
    )
    west = start_agent(loop, hub, cluster_id="west", token=tokens["west"], spec=SPEC)
    try:
        for c in tokens:
            wait_until(lambda c=c: hub.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
        wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="the DGD discovered")
        hub.post("/v1/discovered/east.wingsmith.chat/promote", {"project": "search"})
        assert hub.get("/v1/deployments/chat.east")["authority"] == "observed"
        body = workload("llama", replicas=1, clusters=("east", "west"))
        body["placement"]["preferences"] = [{"clusters": ["east"]}]
        hub.post("/v1/workloads", body)
        assert shares(hub, "llama") == {"east": 1}
        wait_until(lambda: ready(hub, "llama.east") == 1, what="ready on east")
        foreign_before = next(d for d in east.cluster.list_dgds() if d.name == "chat").spec

        hub.post("/v1/clusters/east:drain", {})
        wait_until(lambda: "east" not in shares(hub, "llama"), what="llama moved")
        assert shares(hub, "llama") == {"west": 1}
        assert ready(hub, "llama.west") == 1
        # What Wingsmith does not manage stays where it is, as it was, and still reports.
        observed = hub.get("/v1/deployments/chat.east")
        assert (observed["authority"], observed["desired_replicas"]) == ("observed", 1)
        assert failovers(hub, "chat") == []
        (foreign,) = [d for d in east.cluster.list_dgds() if d.name == "chat"]
        assert foreign.spec == foreign_before, "the drain wrote nothing to a DGD it does not own"
        assert [d.name for d in east.cluster.list_dgds()] == ["chat"], "llama's DGD removed"
    finally:
        east.stop()
        west.stop()


def test_failover_is_set_changed_and_turned_off_by_patch_and_checked(
    fast: tuple[LoopThread, Hub],
) -> None:
    _, hub = fast
    hub.create_project("search", H100_80GB=8)
    hub.register_cluster("east")
    body = workload("llama", replicas=1, clusters=("east",))
    body["placement"]["failover"] = {}
    created = hub.post("/v1/workloads", body)
    # 0 means the default, shown as such.
    assert created["placement"]["failover"] == {
        "toleration_seconds": 300,
        "stabilization_seconds": 300,
    }
    changed = hub.patch(
        "/v1/workloads/llama", {"placement": {"failover": {"toleration_seconds": 60}}}
    )
    assert changed["placement"]["failover"]["toleration_seconds"] == 60
    assert changed["placement"]["clusters"] == ["east"]
    off = hub.patch("/v1/workloads/llama", {"placement": {"failover": None}})
    assert off["placement"].get("failover") is None
    assert off["placement"]["clusters"] == ["east"]
    status, answer = hub.rest(
        "PATCH",
        "/v1/workloads/llama",
        {"placement": {"failover": {"toleration_seconds": -1}}},
        check=False,
    )
    assert status == 400
    assert "workload.placement.failover.toleration_seconds" in answer["error"]["message"]
    assert "1 to 86400 seconds" in answer["error"]["message"]


def test_a_cordon_fails_a_workload_over_and_uncordon_fails_it_back(
    fast: tuple[LoopThread, Hub],
) -> None:
    loop, hub = fast
    hub.create_project("search", H100_80GB=16)
    tokens = {c: hub.register_cluster(c) for c in ("east", "west")}
    started = [start_agent(loop, hub, cluster_id=c, token=t, spec=SPEC) for c, t in tokens.items()]
    try:
        for c in tokens:
            wait_until(lambda c=c: hub.get(f"/v1/clusters/{c}")["devices"], what=f"{c} devices")
        body = workload("llama", replicas=2)
        body["placement"] = {"failover": {"toleration_seconds": 60, "stabilization_seconds": 1}}
        hub.post("/v1/workloads", body)
        wait_until(lambda: ready(hub, "llama.east") == ready(hub, "llama.west") == 1, what="ready")
        # Cordoned: failover at once (no toleration: the cluster is not silent), east runs on.
        hub.post("/v1/clusters/west:cordon", {})
        (event,) = failovers(hub, "llama")
        assert (event["cause"], event["stand_ins"]) == ("cordoned", {"east": 1})
        assert shares(hub, "llama") == {"east": 2, "west": 1}
        wait_until(lambda: ready(hub, "llama.east") == 2, what="the stand-in on east")
        assert ready(hub, "llama.west") == 1  # nothing moved off the cordoned cluster
        hub.post("/v1/clusters/west:uncordon", {})
        wait_until(lambda: failovers(hub, "llama")[0]["state"] == "failed_back", what="back")
        assert shares(hub, "llama") == {"east": 1, "west": 1}
    finally:
        for agent in started:
            agent.stop()
