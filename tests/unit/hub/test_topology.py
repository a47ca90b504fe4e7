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
