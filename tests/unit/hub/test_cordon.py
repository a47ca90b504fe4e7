"""Cordons in the pure cores: admission (hub/admission/) and placement (hub/placement.py).

A cordoned cluster, or one cordoned for a device class, takes no new demand (it waits on
`cordoned`, saying how to undo it) and no new replica from placement while an open eligible
cluster exists; what it already admitted or holds stays (docs/placement.md, "Cordon and
drain").
"""

from __future__ import annotations

import pytest

from hub import placement
from hub.admission import AdmissionView, Demand, decide
from hub.model import (
    REASON_CORDONED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
    Maintenance,
)

H100 = "H100-80GB"
A100 = "A100-40GB"


def demand(
    *, cluster: str = "east", desired: int = 2, admitted: int = 0, device_class: str = H100
) -> Demand:
    return Demand(
        deployment_id="d1",
        project="search",
        cluster_id=cluster,
        device_class=device_class,
        devices_per_replica=2,
        desired_replicas=desired,
        admitted_replicas=admitted,
        enabled=True,
        pending_since=0.0,
    )


def view(
    *, cordoned: frozenset[str] = frozenset(), classes: frozenset[tuple[str, str]] = frozenset()
) -> AdmissionView:
    return AdmissionView(
        quota_limits={("search", H100): 16, ("search", A100): 16},
        quota_charged={},
        cluster_free={("east", H100): 16, ("east", A100): 16},
        cordoned_clusters=cordoned,
        cordoned_classes=classes,
    )


@pytest.mark.parametrize(
    ("case", "the_demand", "the_view", "admitted", "reason", "says"),
    [
        ("open cluster: admitted", demand(), view(), 2, REASON_NONE, ""),
        (
            "cordoned cluster: new demand waits, saying how to undo it",
            demand(),
            view(cordoned=frozenset({"east"})),
            0,
            REASON_CORDONED,
            "cluster east is cordoned: it takes no new placements until it is uncordoned"
            " (wingsmith uncordon cluster east)",
        ),
        (
            "cordoned cluster: a scale-up waits, what was admitted stays",
            demand(desired=4, admitted=2),
            view(cordoned=frozenset({"east"})),
            2,
            REASON_CORDONED,
            "2 of 4 replicas admitted",
        ),
        (
            "cordoned cluster: a scale-down still releases at once",
            demand(desired=1, admitted=2),
            view(cordoned=frozenset({"east"})),
            1,
            REASON_NONE,
            "",
        ),
        (
            "cordoned for its class: waits, naming the class",
            demand(),
            view(classes=frozenset({("east", H100)})),
            0,
            REASON_CORDONED,
            f"cluster east is cordoned for {H100}",
        ),
        (
            "cordoned for another class: admitted",
            demand(device_class=A100),
            view(classes=frozenset({("east", H100)})),
            2,
            REASON_NONE,
            "",
        ),
        (
            "another cluster cordoned: admitted",
            demand(),
            view(cordoned=frozenset({"west"})),
            2,
            REASON_NONE,
            "",
        ),
    ],
)
def test_admission_on_a_cordoned_cluster(
    case: str, the_demand: Demand, the_view: AdmissionView, admitted: int, reason: str, says: str
) -> None:
    (decision,) = decide([the_demand], the_view)
    assert (decision.admitted_replicas, decision.reason) == (admitted, reason), case
    assert says in decision.message, (case, decision.message)


def test_quota_is_still_checked_first_on_a_cordoned_cluster() -> None:
    over = AdmissionView(
        quota_limits={("search", H100): 2},
        quota_charged={},
        cluster_free={("east", H100): 16},
        cordoned_clusters=frozenset({"east"}),
    )
    (decision,) = decide([demand(desired=2)], over)
    assert decision.reason == REASON_INSUFFICIENT_QUOTA


def test_a_cordoned_cluster_with_no_room_says_cordoned_not_capacity() -> None:
    full = AdmissionView(
        quota_limits={("search", H100): 16},
        quota_charged={},
        cluster_free={("east", H100): 0},
        cordoned_clusters=frozenset({"east"}),
    )
    (decision,) = decide([demand()], full)
    assert decision.reason == REASON_CORDONED != REASON_INSUFFICIENT_CAPACITY


def room(cluster_id: str, free: int, *, closed: bool = False) -> placement.ClusterRoom:
    return placement.ClusterRoom(cluster_id, free, 16, closed=closed)


@pytest.mark.parametrize(
    ("case", "rooms", "existing", "replicas", "expected"),
    [
        (
            "new replicas skip the cordoned cluster, however free",
            [room("east", 16, closed=True), room("west", 2)],
            {},
            4,
            {"east": 0, "west": 4},
        ),
        (
            "its existing share stays; only the added replicas go elsewhere",
            [room("east", 16, closed=True), room("west", 8)],
            {"east": 3},
            2,
            {"east": 3, "west": 2},
        ),
        (
            "every eligible cluster cordoned: they land there (and wait, cordoned)",
            [room("east", 16, closed=True), room("west", 16, closed=True)],
            {},
            2,
            {"east": 1, "west": 1},
        ),
        (
            "no cordon: today's leveling (4 and 2 free slots: 4 replicas go 3 and 1)",
            [room("east", 8), room("west", 4)],
            {},
            4,
            {"east": 3, "west": 1},
        ),
    ],
)
def test_placement_skips_cordoned_clusters(
    case: str,
    rooms: list[placement.ClusterRoom],
    existing: dict[str, int],
    replicas: int,
    expected: dict[str, int],
) -> None:
    got = placement.place(replicas=replicas, devices_per_replica=2, rooms=rooms, existing=existing)
    assert got == expected, case


@pytest.mark.parametrize(
    ("marks", "device_class", "closed"),
    [
        (Maintenance(), H100, False),
        (Maintenance(cordoned=True), H100, True),
        (Maintenance(draining=True), A100, True),
        (Maintenance(device_classes=(H100,)), H100, True),
        (Maintenance(device_classes=(H100,)), A100, False),
        # A node cordon closes no class: it only takes the node's idle devices away.
        (Maintenance(nodes=("gpu-1",)), H100, False),
    ],
)
def test_which_marks_close_a_cluster_to_a_class(
    marks: Maintenance, device_class: str, closed: bool
) -> None:
    assert marks.closed_to(device_class) is closed


def test_a_preferred_cluster_that_is_cordoned_is_skipped_for_the_next_step() -> None:
    steps = [placement.Step(("east",)), placement.Step(("west",))]
    rooms = [room("east", 16, closed=True), room("west", 16)]
    got = placement.place(replicas=2, devices_per_replica=2, rooms=rooms, steps=steps)
    assert got == {"east": 0, "west": 2}
    # Open again: the first step fills first, as the preferences say.
    rooms = [room("east", 16), room("west", 16)]
    got = placement.place(replicas=2, devices_per_replica=2, rooms=rooms, steps=steps)
    assert got == {"east": 2, "west": 0}
