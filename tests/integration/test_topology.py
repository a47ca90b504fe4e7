"""Topology requirements checked against what the cluster allocated."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.harness import Hub, SimAgent, wait_until, workload


@pytest.mark.parametrize(
    ("nvlink", "requirement", "violated"),
    [
        (2, "nvlink_domain", True),  # interleaved domains: a 4-GPU pod spans both
        (1, "nvlink_domain", False),  # one domain per node
        (0, "nvlink_domain", True),  # no fabric at all: nothing shows one domain
        (2, "node", False),  # a pod is always on one node
    ],
)
def test_a_replica_outside_its_required_domain_shows_a_violation(
    hub: Hub, agents: Callable[..., SimAgent], nvlink: int, requirement: str, violated: bool
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agents(
        cluster_id="east",
        token=token,
        spec=f"nodes=1,gpus=8,class=H100-80GB,nvlink={nvlink},ready_after=0.1s",
    )
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    body = workload("chat", replicas=1, tp=4, clusters=("east",))
    body["placement"]["topology"] = requirement
    created = hub.post("/v1/workloads", body)
    assert created["placement"]["topology"] == requirement
    wait_until(lambda: hub.get("/v1/allocations?deployment_id=chat.east")["allocations"])
    violations = hub.get("/v1/deployments/chat.east")["topology_violations"]
    if violated:
        (one,) = violations
        assert one["name"].startswith("chat-") and one["reason"]
    else:
        assert violations == []


def test_an_unknown_topology_is_refused(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    body = workload("chat", clusters=("east",))
    body["placement"]["topology"] = "rack"
    status, error = hub.rest("POST", "/v1/workloads", body, check=False)
    assert status == 400 and "topology" in error["error"]["message"]


@pytest.mark.parametrize(
    ("spec", "violated"),
    [
        ("nodes=2,gpus=4", True),  # a 4-GPU prefill pod and a 4-GPU decode pod: a node each
        ("nodes=1,gpus=8", False),
    ],
)
def test_a_disaggregated_replica_is_its_prefill_and_decode_pods_together(
    hub: Hub, agents: Callable[..., SimAgent], spec: str, violated: bool
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agents(cluster_id="east", token=token, spec=f"{spec},class=H100-80GB,ready_after=0.1s")
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    body = workload(
        "chat",
        replicas=1,
        tp=4,
        clusters=("east",),
        mode="disaggregated",
        disaggregation={"prefill_workers": 1, "decode_workers": 1},
    )
    body["placement"]["topology"] = "node"
    hub.post("/v1/workloads", body)
    wait_until(
        lambda: len(hub.get("/v1/allocations?deployment_id=chat.east")["allocations"]) == 2,
        what="both pods hold devices",
    )
    violations = hub.get("/v1/deployments/chat.east")["topology_violations"]
    if violated:
        (one,) = violations
        assert len(one["name"].split(", ")) == 2 and "devices on 2 nodes" in one["reason"]
    else:
        assert violations == []
