"""Placement preferences on a real hub with real agents on simulated clusters: the first step
fills before the next, a weighted step splits in proportion, a scale down empties the least
preferred clusters first, and bad preferences are a 400 naming the field (docs/placement.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness import Hub, SimAgent, wait_until, workload

# One node of 8 GPUs per cluster; TP 2: room for 4 replicas on each.
SPEC = "nodes=1,gpus=8,class=H100-80GB,ready_after=0.2s"
PREFERENCES = [
    {"clusters": ["onprem"]},
    {"weights": {"cloud-east": 2, "cloud-west": 1}},
]


def shares(hub: Hub, name: str) -> dict[str, int]:
    found = hub.get(f"/v1/workloads/{name}")["deployments"]
    return {d["cluster_id"]: d["desired_replicas"] for d in found}


def ready(hub: Hub, name: str) -> dict[str, int]:
    found = hub.get(f"/v1/workloads/{name}")["deployments"]
    return {d["cluster_id"]: d["ready_replicas"] for d in found}


def fleet(hub: Hub, agents: Callable[..., SimAgent]) -> dict[str, SimAgent]:
    hub.create_project("search", H100_80GB=64)
    started = {}
    for cluster_id in ("onprem", "cloud-east", "cloud-west"):
        token = hub.register_cluster(cluster_id)
        started[cluster_id] = agents(cluster_id=cluster_id, token=token, spec=SPEC)
    for cluster_id in started:
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    return started


def test_fill_the_first_step_spill_by_weight_and_scale_down_least_preferred_first(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    started = fleet(hub, agents)
    body: dict[str, Any] = workload("chat", replicas=4, tp=2)
    body["placement"] = {"preferences": PREFERENCES}
    created = hub.post("/v1/workloads", body)
    assert created["placement"]["preferences"][1]["weights"] == {"cloud-east": 2, "cloud-west": 1}
    # Without preferences 4 replicas would level over the three clusters; with them the
    # preferred cluster takes all it has room for.
    assert shares(hub, "chat") == {"onprem": 4}
    wait_until(lambda: ready(hub, "chat") == {"onprem": 4}, what="4 ready on onprem")

    # Onprem is full: the next step takes the rest, 2 : 1 by weight.
    hub.patch("/v1/workloads/chat", {"replicas": 10})
    assert shares(hub, "chat") == {"onprem": 4, "cloud-east": 4, "cloud-west": 2}
    wait_until(
        lambda: ready(hub, "chat") == {"onprem": 4, "cloud-east": 4, "cloud-west": 2},
        what="10 ready",
    )

    # Scale down: the least preferred step gives up replicas first, keeping its proportion;
    # the preferred cluster keeps every replica while the cloud runs any.
    hub.patch("/v1/workloads/chat", {"replicas": 5})
    assert shares(hub, "chat") == {"onprem": 4, "cloud-east": 1, "cloud-west": 0}
    wait_until(
        lambda: ready(hub, "chat") == {"onprem": 4, "cloud-east": 1, "cloud-west": 0},
        what="cloud scaled down",
    )
    assert [d.name for d in started["onprem"].cluster.list_dgds()] == ["chat"]


def test_preferences_change_through_the_update_mask_and_steer_the_next_scale_up(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    fleet(hub, agents)
    hub.post("/v1/workloads", workload("chat", replicas=2, tp=2))
    before = shares(hub, "chat")
    # Changing preferences moves nothing that runs; the next scale up follows them.
    changed = hub.patch(
        "/v1/workloads/chat", {"placement": {"preferences": [{"clusters": ["cloud-west"]}]}}
    )
    assert changed["placement"]["preferences"] == [
        {"clusters": ["cloud-west"], "cluster_selector": {}, "weights": {}}
    ]
    assert shares(hub, "chat") == before
    hub.patch("/v1/workloads/chat", {"replicas": 2 + 3})
    after = shares(hub, "chat")
    assert after["cloud-west"] == before.get("cloud-west", 0) + 3
    assert hub.get("/v1/workloads/chat")["placement"]["preferences"][0]["clusters"] == [
        "cloud-west"
    ]
    # Narrowing the eligible clusters under a preference that names another is refused.
    status, answer = hub.rest(
        "PATCH", "/v1/workloads/chat", {"placement": {"clusters": ["onprem"]}}, check=False
    )
    assert status == 400, answer
    assert answer["error"]["message"].startswith("workload.placement.preferences[0].clusters[0]")
    assert shares(hub, "chat") == after


def test_bad_preferences_are_refused_naming_the_field(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    fleet(hub, agents)
    cases = [
        ([{"weights": {"onprem": -1}}], 'workload.placement.preferences[0].weights["onprem"]'),
        ([{"weights": {"onprem": 5000}}], 'workload.placement.preferences[0].weights["onprem"]'),
        ([{"clusters": ["onprem", "mars"]}], "workload.placement.preferences[0].clusters[1]"),
        (
            [{"clusters": ["onprem"], "cluster_selector": {"site": "x"}}],
            "workload.placement.preferences[0]",
        ),
    ]
    for preferences, field in cases:
        body: dict[str, Any] = workload("bad", replicas=1, tp=2)
        body["placement"] = {"preferences": preferences}
        status, answer = hub.rest("POST", "/v1/workloads", body, check=False)
        assert status == 400, answer
        assert answer["error"]["status"] == "INVALID_ARGUMENT"
        assert answer["error"]["message"].startswith(field + ": "), answer
    # A cluster outside the workload's placement.clusters is refused too: it could never count.
    body = workload("bad", replicas=1, tp=2, clusters=("onprem",))
    body["placement"]["preferences"] = [{"clusters": ["cloud-east"]}]
    status, answer = hub.rest("POST", "/v1/workloads", body, check=False)
    assert status == 400 and "not eligible" in str(answer), answer
    status, _ = hub.rest("GET", "/v1/workloads/bad", check=False)
    assert status == 404
