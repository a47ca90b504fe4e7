"""Generations and rollouts on the simulated fleet: digests, surge, quota, convergence."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.harness import ApiError, Hub, SimAgent, wait_until, workload


def deployment(hub: Hub, name: str) -> dict[str, Any]:
    return hub.get(f"/v1/deployments/{name}")


def ready(d: dict[str, Any]) -> int:
    return int((d["status"] or {}).get("ready_replicas", 0))


def converged(hub: Hub, name: str, replicas: int) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        d = deployment(hub, name)
        done = (
            d["rollout"]
            and d["rollout"]["state"] == "converged"
            and list(d["live_digests"]) == [d["serving_digest"]]
            and d["live_digests"][d["serving_digest"]] == replicas
        )
        return d if done else None

    return check


def start(hub: Hub, agents: Callable[..., SimAgent], spec: str, **quota: int) -> SimAgent:
    token = hub.register_cluster("east")
    hub.create_project("search", **(quota or {"H100_80GB": 64}))
    agent = agents(cluster_id="east", token=token, spec=spec)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices reported")
    return agent


def test_a_replica_change_alone_keeps_the_generation_and_the_digest(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    start(hub, agents, "nodes=2,gpus=8,class=H100-80GB,ready_after=0.2s")
    hub.post("/v1/workloads", workload("chat", replicas=1, clusters=("east",)))
    before = wait_until(converged(hub, "chat.east", 1), what="running")
    hub.patch("/v1/workloads/chat", {"replicas": 2})
    after = wait_until(converged(hub, "chat.east", 2), what="scaled")
    assert after["generation"] == before["generation"] == 1
    assert after["serving_digest"] == before["serving_digest"]


def test_a_serving_change_rolls_out_with_both_digests_live_then_one(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    agent = start(hub, agents, "nodes=2,gpus=8,class=H100-80GB,ready_after=1s")
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    first = wait_until(converged(hub, "chat.east", 2), what="running")
    old_digest = first["serving_digest"]
    old_pods = {p.name for p in agent.cluster.list_pods() if "worker" in p.name}

    changed = hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    (summary,) = changed["deployments"]
    assert summary["generation"] == 2 and summary["serving_digest"] != old_digest
    rolling = deployment(hub, "chat.east")
    assert rolling["rollout"]["state"] == "rolling"
    assert rolling["rollout"]["surge_replicas"] == 2, "spare capacity: old + new side by side"

    both = wait_until(
        lambda: (
            (d := deployment(hub, "chat.east"))["live_digests"].get(old_digest)
            and len(d["live_digests"]) == 2
            and d
        ),
        what="two digests live",
        interval=0.02,
    )
    assert set(both["live_digests"]) == {old_digest, both["serving_digest"]}
    workload_view = hub.get("/v1/workloads/chat")
    assert workload_view["deployments"][0]["rollout_state"] == "rolling"

    done = wait_until(converged(hub, "chat.east", 2), what="converged")
    assert done["rollout"]["surge_replicas"] == 0, "the surge is released once converged"
    assert done["generation"] == 2
    replicas = hub.get("/v1/replicas?deployment_id=chat.east")["replicas"]
    assert {r["serving_digest"] for r in replicas} == {done["serving_digest"]}
    assert {r["engine_version"] for r in replicas} == {"0.11.1"}
    assert not old_pods & {p.name for p in agent.cluster.list_pods()}
    assert hub.get("/v1/workloads/chat")["deployments"][0]["rollout_state"] == "converged"


def test_a_rollout_on_a_cluster_sized_for_one_generation_converges(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    agent = start(hub, agents, "nodes=1,gpus=8,class=H100-80GB,ready_after=0.3s")
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(converged(hub, "chat.east", 2), what="running")
    peak = [0]

    def sample() -> None:
        held = sum(p.gpu_request for p in agent.cluster.list_pods() if p.phase == "Running")
        peak[0] = max(peak[0], held)

    hub.patch("/v1/workloads/chat", {"serving": {"context_length": 4096}})
    assert deployment(hub, "chat.east")["rollout"]["surge_replicas"] == 0, "no room to surge"

    def done() -> dict[str, Any] | None:
        sample()
        return converged(hub, "chat.east", 2)()

    final = wait_until(done, what="converged on a full cluster", interval=0.02)
    assert final["generation"] == 2
    assert peak[0] <= 8, "never more than the cluster has"


def test_quota_is_never_exceeded_during_a_rollout(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    # Quota for exactly one generation; the cluster has room for two.
    agent = start(hub, agents, "nodes=2,gpus=8,class=H100-80GB,ready_after=0.3s", H100_80GB=8)
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(converged(hub, "chat.east", 2), what="running")
    samples: list[tuple[int, int]] = []

    def sample() -> dict[str, Any] | None:
        usage = hub.get("/v1/projects/search")["usage"]["H100-80GB"]
        held = sum(p.gpu_request for p in agent.cluster.list_pods() if p.phase == "Running")
        samples.append((usage["used"] + usage["reserved"], held))
        return converged(hub, "chat.east", 2)()

    hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    assert deployment(hub, "chat.east")["rollout"]["surge_replicas"] == 0, "quota is full"
    wait_until(sample, what="converged within quota", interval=0.02)
    assert len(samples) > 3
    assert max(charged for charged, _ in samples) <= 8
    assert max(held for _, held in samples) <= 8, "the cluster never ran past the quota"


def test_a_rollout_takes_no_surge_a_waiting_deployment_could_use(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    start(hub, agents, "nodes=2,gpus=8,class=H100-80GB,ready_after=0.3s")
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(converged(hub, "chat.east", 2), what="running")
    hub.post("/v1/workloads", workload("big", replicas=1, tp=8, clusters=("east",)))
    wait_until(lambda: deployment(hub, "big.east")["admission_phase"] == "running")
    hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    assert deployment(hub, "chat.east")["rollout"]["surge_replicas"] == 0
    hub.post("/v1/workloads", workload("later", replicas=1, clusters=("east",)))
    assert deployment(hub, "later.east")["admission_reason"] == "insufficient_capacity"
    wait_until(converged(hub, "chat.east", 2), what="converged")


def test_a_disaggregated_deployment_counts_replicas_not_pods_through_a_rollout(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    start(hub, agents, "nodes=2,gpus=8,class=H100-80GB,ready_after=0.3s")
    split = {"mode": "disaggregated", "disaggregation": {"prefill_workers": 2, "decode_workers": 1}}
    hub.post("/v1/workloads", workload("split", replicas=2, tp=2, clusters=("east",), **split))
    wait_until(converged(hub, "split.east", 2), what="two replicas of three pods")
    wait_until(lambda: ready(deployment(hub, "split.east")) == 2, what="both ready")
    assert len(hub.get("/v1/replicas?deployment_id=split.east")["replicas"]) == 6
    assert hub.get("/v1/workloads/split")["ready_replicas"] == 2

    hub.patch("/v1/workloads/split", {"serving": {"context_length": 8192}})
    during = wait_until(
        lambda: (d := deployment(hub, "split.east"))["rollout"]["state"] == "rolling" and d
    )
    assert all(count <= 2 for count in during["live_digests"].values())
    wait_until(converged(hub, "split.east", 2), what="converged")
    done = wait_until(lambda: ready(d := deployment(hub, "split.east")) == 2 and d, what="ready")
    assert done["rollout"]["ready_on_target"] == 2


def test_zero_replicas_read_admitted_whether_created_so_or_scaled_so(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    start(hub, agents, "nodes=1,gpus=8,class=H100-80GB")
    created = hub.post("/v1/workloads", workload("idle", replicas=0, clusters=("east",)))
    assert (created["phase"], created["deployments"]) == ("admitted", [])
    hub.patch("/v1/workloads/idle", {"replicas": 1})
    wait_until(lambda: hub.get("/v1/workloads/idle")["phase"] == "running", what="running")
    hub.patch("/v1/workloads/idle", {"replicas": 0})
    scaled = wait_until(
        lambda: (w := hub.get("/v1/workloads/idle"))["phase"] == "admitted" and w,
        what="admitted at zero",
    )
    assert [d["cluster_id"] for d in scaled["deployments"]] == ["east"]


# -- waves ------------------------------------------------------------------------------------


def summaries(hub: Hub, name: str) -> dict[str, dict[str, Any]]:
    return {d["cluster_id"]: d for d in hub.get(f"/v1/workloads/{name}")["deployments"]}


def test_a_serving_change_rolls_out_one_cluster_at_a_time_pauses_resumes_and_aborts(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    """Three clusters, one in flight at a time, wave order by cluster id. wave-b's pods never
    become ready: its wave misses the deadline and the rollout pauses with wave-c untouched;
    resume gives it a new deadline; abort puts the old digest back where it was changed."""
    hub.create_project("search", H100_80GB=64)
    speeds = {"wave-a": "0.3s", "wave-b": "60m", "wave-c": "0.3s"}
    sims = {}
    for cluster_id, ready_after in speeds.items():
        token = hub.register_cluster(cluster_id)
        sims[cluster_id] = agents(
            cluster_id=cluster_id,
            token=token,
            spec=f"nodes=1,gpus=8,class=H100-80GB,ready_after={ready_after}",
        )
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    body = workload("chat", replicas=3, clusters=tuple(speeds))
    body["rollout"] = {"max_clusters_in_flight": 1, "wave_deadline_seconds": 3}
    created = hub.post("/v1/workloads", body)
    assert created["rollout"] == {"max_clusters_in_flight": 1, "wave_deadline_seconds": 3}
    assert created["rollout_status"] is None, "no rollout before a serving change"
    for cluster_id in ("wave-a", "wave-c"):
        wait_until(converged(hub, f"chat.{cluster_id}", 1), what=f"{cluster_id} running")
    wait_until(
        lambda: deployment(hub, "chat.wave-b")["live_digests"], what="wave-b's pod scheduled"
    )
    old_digest = deployment(hub, "chat.wave-a")["serving_digest"]
    c_pods = {p.name for p in sims["wave-c"].cluster.list_pods()}

    changed = hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    new_digest = changed["rollout_status"]["target_serving_digest"]
    assert new_digest != old_digest
    assert changed["rollout_status"]["previous_serving_digest"] == old_digest
    by_cluster = {d["cluster_id"]: d for d in changed["deployments"]}
    assert by_cluster["wave-a"]["serving_digest"] == new_digest
    assert [by_cluster[c]["generation"] for c in ("wave-b", "wave-c")] == [1, 1]
    assert {by_cluster[c]["serving_digest"] for c in ("wave-b", "wave-c")} == {old_digest}
    assert [(w["cluster_id"], w["state"]) for w in changed["rollout_status"]["clusters"]] == [
        ("wave-a", "rolling"),
        ("wave-b", "waiting"),
        ("wave-c", "waiting"),
    ]

    order: list[str] = []

    def paused() -> dict[str, Any] | None:
        w = hub.get("/v1/workloads/chat")
        changed = [d for d in w["deployments"] if d["serving_digest"] == new_digest]
        order.extend(d["cluster_id"] for d in changed if d["cluster_id"] not in order)
        waves = {c["cluster_id"]: c["state"] for c in w["rollout_status"]["clusters"]}
        in_flight = [c for c, state in waves.items() if state == "rolling"]
        assert len(in_flight) <= 1, f"more than one cluster in flight: {waves}"
        return w if w["rollout_status"]["state"] == "paused" else None

    stopped = wait_until(paused, what="paused at wave-b's deadline", interval=0.05)
    assert order == ["wave-a", "wave-b"]
    assert stopped["rollout_status"]["reason"] == "wave_deadline_exceeded"
    assert "wave-b (0/1 ready)" in stopped["rollout_status"]["message"]
    assert deployment(hub, "chat.wave-a")["rollout"]["state"] == "converged"

    # Paused: wave-c gets nothing, however long it waits; its pods are the same pods.
    time.sleep(1.5)
    c = deployment(hub, "chat.wave-c")
    assert (c["serving_digest"], c["generation"]) == (old_digest, 1)
    assert {p.name for p in sims["wave-c"].cluster.list_pods()} == c_pods
    assert hub.get("/v1/workloads/chat")["rollout_status"]["state"] == "paused"

    resumed = hub.post("/v1/workloads/chat:resume", {})
    assert resumed["rollout_status"]["state"] == "rolling"
    assert resumed["rollout_status"]["reason"] == ""
    again = wait_until(paused, what="paused again: wave-b is still not ready", interval=0.05)
    assert again["rollout_status"]["update_time"] > stopped["rollout_status"]["update_time"]
    assert deployment(hub, "chat.wave-c")["serving_digest"] == old_digest

    aborted = hub.post("/v1/workloads/chat:abort", {})
    assert aborted["rollout_status"]["state"] == "aborted"
    assert aborted["serving"]["engine_version"] == "0.11.0", "the previous config is back"
    after = {d["cluster_id"]: d for d in aborted["deployments"]}
    assert {c: d["serving_digest"] for c, d in after.items()} == dict.fromkeys(speeds, old_digest)
    assert [after[c]["generation"] for c in speeds] == [3, 3, 1], "wave-c was never touched"
    wait_until(converged(hub, "chat.wave-a", 1), what="wave-a back on the old digest")
    assert {p.name for p in sims["wave-c"].cluster.list_pods()} == c_pods

    with pytest.raises(ApiError) as refused:
        hub.post("/v1/workloads/chat:resume", {})
    assert refused.value.status == 409
    assert "no paused rollout (rollout: aborted)" in str(refused.value.body)


def test_without_a_wave_policy_a_change_reaches_every_cluster_at_once(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    hub.create_project("search", H100_80GB=64)
    for cluster_id in ("one", "two"):
        agents(cluster_id=cluster_id, token=hub.register_cluster(cluster_id))
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("one", "two")))
    changed = hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    assert [d["generation"] for d in changed["deployments"]] == [2, 2]
    assert changed["rollout_status"] is None
    with pytest.raises(ApiError) as refused:
        hub.post("/v1/workloads/chat:abort", {})
    assert refused.value.status == 409


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"max_clusters_in_flight": -1}, "workload.rollout.max_clusters_in_flight"),
        ({"wave_deadline_seconds": -5}, "workload.rollout.wave_deadline_seconds"),
        ({"wave_deadline_seconds": 8 * 24 * 3600}, "workload.rollout.wave_deadline_seconds"),
    ],
)
def test_a_bad_rollout_policy_is_refused_naming_the_field(
    hub: Hub, policy: dict[str, int], field: str
) -> None:
    hub.create_project("search", H100_80GB=8)
    hub.register_cluster("east")
    body = workload("chat", clusters=("east",))
    body["rollout"] = policy
    with pytest.raises(ApiError) as refused:
        hub.post("/v1/workloads", body)
    assert refused.value.status == 400
    assert field in str(refused.value.body)
    hub.post("/v1/workloads", workload("chat", clusters=("east",)))
    with pytest.raises(ApiError) as refused:
        hub.patch("/v1/workloads/chat", {"rollout": policy})
    assert refused.value.status == 400
    assert field in str(refused.value.body)
