"""Placement (hub/placement.py): eligibility, spreading by free capacity, overflow, shrinking."""

from __future__ import annotations

import pytest

from hub import errors
from hub.model import Placement
from hub.placement import ClusterRoom, Share, eligible_clusters, place, shrink

LABELS = {
    "east": {"region": "us-east", "tier": "prod"},
    "west": {"region": "us-west", "tier": "prod"},
    "lab": {"region": "us-east", "tier": "dev"},
}


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        (Placement(clusters=("west", "east")), ["east", "west"]),
        (Placement(cluster_selector={"tier": "prod"}), ["east", "west"]),
        (Placement(cluster_selector={"region": "us-east", "tier": "dev"}), ["lab"]),
        (Placement(cluster_selector={"region": "eu"}), []),
        (Placement(), ["east", "lab", "west"]),
    ],
)
def test_eligible_clusters(wanted: Placement, expected: list[str]) -> None:
    assert eligible_clusters(wanted, LABELS) == expected


def test_an_explicit_cluster_that_does_not_exist_is_an_error() -> None:
    with pytest.raises(errors.InvalidArgument) as caught:
        eligible_clusters(Placement(clusters=("east", "mars")), LABELS)
    assert caught.value.field == "placement.clusters"


def rooms(**free_total: tuple[int, int]) -> list[ClusterRoom]:
    return [ClusterRoom(c, free, total) for c, (free, total) in free_total.items()]


@pytest.mark.parametrize(
    ("case", "replicas", "per_replica", "the_rooms", "expected"),
    [
        ("zero replicas", 0, 4, rooms(east=(16, 16)), {"east": 0}),
        ("all fit on one", 2, 4, rooms(east=(16, 16)), {"east": 2}),
        (
            "spread levels free capacity",
            4,
            4,
            rooms(east=(16, 16), west=(8, 8)),
            {"east": 3, "west": 1},
        ),
        ("equal free splits evenly", 4, 4, rooms(east=(8, 8), west=(8, 8)), {"east": 2, "west": 2}),
        (
            "ties go to more total then id",
            1,
            4,
            rooms(east=(4, 8), west=(4, 16)),
            {"east": 0, "west": 1},
        ),
        (
            "free counts whole replicas only",
            2,
            4,
            rooms(east=(7, 8), west=(4, 8)),
            {"east": 1, "west": 1},
        ),
        (
            "overflow goes to a cluster that got nothing",
            3,
            4,
            rooms(east=(8, 8), west=(0, 8)),
            {"east": 2, "west": 1},
        ),
        (
            "overflow avoids clusters without the class",
            3,
            4,
            rooms(east=(8, 8), lab=(0, 0), west=(0, 4)),
            {"east": 2, "lab": 0, "west": 1},
        ),
        (
            "with no devices of the class anywhere, replicas still land (pending)",
            2,
            4,
            rooms(east=(0, 0), west=(0, 0)),
            {"east": 1, "west": 1},
        ),
        (
            "overflow on the only cluster stays there",
            3,
            8,
            rooms(east=(8, 16)),
            {"east": 3},
        ),
    ],
)
def test_place(
    case: str,
    replicas: int,
    per_replica: int,
    the_rooms: list[ClusterRoom],
    expected: dict[str, int],
) -> None:
    assert place(replicas=replicas, devices_per_replica=per_replica, rooms=the_rooms) == expected, (
        case
    )


def test_adding_replicas_keeps_existing_shares() -> None:
    result = place(
        replicas=2,
        devices_per_replica=4,
        rooms=rooms(east=(0, 16), west=(8, 8)),
        existing={"east": 4},
    )
    assert result == {"east": 4, "west": 2}


def test_shrink_takes_unadmitted_replicas_first() -> None:
    shares = [Share("east", desired=4, admitted=4), Share("west", desired=2, admitted=0)]
    assert shrink(shares=shares, remove=2) == {"east": 4, "west": 0}


def test_shrink_then_takes_from_the_largest_share() -> None:
    shares = [Share("east", desired=4, admitted=4), Share("west", desired=2, admitted=2)]
    assert shrink(shares=shares, remove=3) == {"east": 2, "west": 1}


def test_shrink_never_goes_below_zero() -> None:
    assert shrink(shares=[Share("east", 1, 1)], remove=5) == {"east": 0}
