"""Topology checks (hub/topology.py)."""

from __future__ import annotations

import pytest

from hub.model import HeldDevice
from hub.topology import violations


def held(*devices: tuple[str, str, str | None]) -> list[HeldDevice]:
    return [HeldDevice(d, n, v) for d, n, v in devices]


@pytest.mark.parametrize(
    ("case", "requirement", "devices", "reason"),
    [
        ("no requirement", "", held(("g1", "n1", "a"), ("g2", "n2", "b")), None),
        ("node: one node", "node", held(("g1", "n1", ""), ("g2", "n1", "")), None),
        (
            "node: two nodes",
            "node",
            held(("g1", "n1", "a"), ("g2", "n2", "a")),
            "devices on 2 nodes",
        ),
        (
            "nvlink: one domain across nodes",
            "nvlink_domain",
            held(("g1", "n1", "a"), ("g2", "n2", "a")),
            None,
        ),
        (
            "nvlink: two domains",
            "nvlink_domain",
            held(("g1", "n1", "a"), ("g2", "n1", "b")),
            "span 2 NVLink domains",
        ),
        (
            "nvlink: a device without a domain",
            "nvlink_domain",
            held(("g1", "n1", "a"), ("g2", "n1", "")),
            "no NVLink domain reported for g2",
        ),
        (
            "nvlink: a device no inventory lists",
            "nvlink_domain",
            held(
                ("g1", "n1", None),
            ),
            "no NVLink domain reported for g1",
        ),
    ],
)
def test_violations(
    case: str, requirement: str, devices: list[HeldDevice], reason: str | None
) -> None:
    found = violations(requirement, {("rep_1", "pod-1"): devices})
    if reason is None:
        assert found == [], case
    else:
        (only,) = found
        assert (only.replica_id, only.name) == ("rep_1", "pod-1")
        assert reason in only.reason, case


def pod(node: str, domain: str, *, role: str = "worker", digest: str = "svg_1") -> list[HeldDevice]:
    return [HeldDevice(f"{node}-{domain}-{role}", node, domain, role, digest)]


def test_aggregated_worker_pods_are_each_a_replica() -> None:
    found = violations(
        "node", {("rep_1", "chat-0"): pod("n1", "a"), ("rep_2", "chat-1"): pod("n2", "a")}
    )

    assert found == []


@pytest.mark.parametrize(
    ("requirement", "decode_at", "reason"),
    [
        ("node", ("n1", "a"), None),
        ("node", ("n2", "a"), "devices on 2 nodes: n1, n2"),
        ("nvlink_domain", ("n2", "a"), None),  # one NVL72 domain across two nodes
        ("nvlink_domain", ("n1", "b"), "span 2 NVLink domains"),
    ],
)
def test_the_prefill_and_decode_pods_of_one_generation_are_checked_together(
    requirement: str, decode_at: tuple[str, str], reason: str | None
) -> None:
    replicas = {
        ("rep_1", "chat-prefill-0"): pod("n1", "a", role="prefill"),
        ("rep_2", "chat-decode-0"): pod(*decode_at, role="decode"),
    }

    found = violations(requirement, replicas)

    if reason is None:
        assert found == []
    else:
        (only,) = found
        assert only.replica_id == "rep_1" and only.name == "chat-prefill-0, chat-decode-0"
        assert reason in only.reason


def test_two_generations_of_a_rollout_are_checked_apart() -> None:
    replicas = {
        ("rep_1", "old-prefill"): pod("n1", "a", role="prefill", digest="svg_old"),
        ("rep_2", "old-decode"): pod("n1", "a", role="decode", digest="svg_old"),
        ("rep_3", "new-prefill"): pod("n2", "a", role="prefill", digest="svg_new"),
        ("rep_4", "new-decode"): pod("n2", "a", role="decode", digest="svg_new"),
    }

    assert violations("node", replicas) == []
