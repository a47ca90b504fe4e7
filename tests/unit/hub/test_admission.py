"""Admission decisions (hub/admission/): table-driven over quota, capacity and order."""

from __future__ import annotations

import dataclasses

import pytest

from hub.admission import AdmissionView, Demand, decide
from hub.model import (
    REASON_DISABLED,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
)

H100 = "H100-80GB"


def demand(
    deployment_id: str = "d1",
    *,
    project: str = "search",
    cluster: str = "east",
    per_replica: int = 4,
    desired: int = 1,
    admitted: int = 0,
    enabled: bool = True,
    since: float = 0.0,
    device_class: str = H100,
) -> Demand:
    return Demand(
        deployment_id=deployment_id,
        project=project,
        cluster_id=cluster,
        device_class=device_class,
        devices_per_replica=per_replica,
        desired_replicas=desired,
        admitted_replicas=admitted,
        enabled=enabled,
        pending_since=since,
    )


def view(*, limit: int | None = 16, charged: int = 0, free: int = 16) -> AdmissionView:
    return AdmissionView(
        quota_limits={} if limit is None else {("search", H100): limit},
        quota_charged={("search", H100): charged},
        cluster_free={("east", H100): free},
    )


@pytest.mark.parametrize(
    ("case", "the_demand", "the_view", "admitted", "reason"),
    [
        ("fits", demand(desired=2), view(), 2, REASON_NONE),
        ("quota exactly full after", demand(desired=4), view(limit=16), 4, REASON_NONE),
        (
            "quota one device short: the replicas that fit run, the last waits",
            demand(desired=4),
            view(limit=15),
            3,
            REASON_INSUFFICIENT_QUOTA,
        ),
        ("quota already spent", demand(desired=1), view(charged=14), 0, REASON_INSUFFICIENT_QUOTA),
        (
            "no quota for the class",
            demand(desired=1),
            view(limit=None),
            0,
            REASON_INSUFFICIENT_QUOTA,
        ),
        ("capacity exactly enough", demand(desired=2), view(free=8), 2, REASON_NONE),
        (
            "capacity short: one replica fits and runs",
            demand(desired=2),
            view(free=7),
            1,
            REASON_INSUFFICIENT_CAPACITY,
        ),
        (
            "capacity short of one replica",
            demand(desired=2),
            view(free=3),
            0,
            REASON_INSUFFICIENT_CAPACITY,
        ),
        (
            "cluster without the class",
            demand(desired=1),
            view(free=0),
            0,
            REASON_INSUFFICIENT_CAPACITY,
        ),
        (
            "quota is checked before capacity",
            demand(desired=8),
            view(limit=4, free=0),
            0,
            REASON_INSUFFICIENT_QUOTA,
        ),
        ("zero replicas need nothing", demand(desired=0), view(limit=0, free=0), 0, REASON_NONE),
        (
            "scale-down releases at once",
            demand(desired=1, admitted=3),
            view(limit=0, free=0),
            1,
            REASON_NONE,
        ),
        (
            "disabled releases everything",
            demand(desired=3, admitted=3, enabled=False),
            view(),
            0,
            REASON_DISABLED,
        ),
        (
            "scale-up admits only the delta",
            demand(desired=3, admitted=2),
            view(charged=8, free=4),
            3,
            REASON_NONE,
        ),
        (
            "scale-up that does not fit keeps what runs and adds what fits",
            demand(desired=4, admitted=2),
            view(charged=8, free=4),
            3,
            REASON_INSUFFICIENT_CAPACITY,
        ),
        (
            "scale-up with no room keeps what runs",
            demand(desired=4, admitted=2),
            view(charged=8, free=3),
            2,
            REASON_INSUFFICIENT_CAPACITY,
        ),
    ],
)
def test_one_demand(
    case: str, the_demand: Demand, the_view: AdmissionView, admitted: int, reason: str
) -> None:
    (decision,) = decide([the_demand], the_view)
    assert (decision.admitted_replicas, decision.reason) == (admitted, reason), case
    assert bool(decision.message) == (reason != REASON_NONE), case


def test_quota_is_spent_as_demands_are_admitted_so_the_second_gets_what_is_left() -> None:
    decisions = decide([demand("a", desired=2), demand("b", desired=2, since=1)], view(limit=12))
    assert [(d.deployment_id, d.admitted_replicas, d.reason) for d in decisions] == [
        ("a", 2, REASON_NONE),
        ("b", 1, REASON_INSUFFICIENT_QUOTA),
    ]
    assert decisions[1].message == (
        "1 of 2 replicas admitted; the other 1 waits: needs 4 H100-80GB; project search has 0"
        " of 12 left"
    )


def test_capacity_is_spent_as_demands_are_admitted() -> None:
    decisions = decide([demand("a", desired=3), demand("b", desired=1, since=1)], view(free=16))
    assert [d.reason for d in decisions] == [REASON_NONE, REASON_NONE]
    decisions = decide(
        [demand("a", desired=3), demand("b", desired=2, since=1)], view(limit=100, free=12)
    )
    assert [d.reason for d in decisions] == [REASON_NONE, REASON_INSUFFICIENT_CAPACITY]


def test_oldest_first_but_a_big_waiter_does_not_block_a_small_one() -> None:
    big = demand("big", desired=4, since=0)
    small = demand("small", desired=1, since=5)
    decisions = {d.deployment_id: d for d in decide([small, big], view(limit=100, free=8))}
    assert decisions["small"].admitted_replicas == 1
    # Whole demands first; then the big one gets what is left, and the rest of it waits.
    assert (decisions["big"].admitted_replicas, decisions["big"].reason) == (
        1,
        REASON_INSUFFICIENT_CAPACITY,
    )


def test_order_follows_pending_since_not_input_order() -> None:
    first = demand("z-first", desired=2, since=0)
    second = demand("a-second", desired=2, since=1)
    decisions = {d.deployment_id: d for d in decide([second, first], view(free=8))}
    assert decisions["z-first"].admitted_replicas == 2
    assert decisions["a-second"].reason == REASON_INSUFFICIENT_CAPACITY


def test_projects_and_clusters_are_accounted_separately() -> None:
    the_view = AdmissionView(
        quota_limits={("search", H100): 4, ("ads", H100): 4},
        quota_charged={},
        cluster_free={("east", H100): 4, ("west", H100): 4},
    )
    decisions = decide(
        [
            demand("a", project="search", cluster="east"),
            demand("b", project="ads", cluster="west", since=1),
        ],
        the_view,
    )
    assert all(d.admitted_replicas == 1 for d in decisions)


def test_device_classes_are_accounted_separately() -> None:
    the_view = AdmissionView(
        quota_limits={("search", H100): 4, ("search", "A100-40GB"): 4},
        quota_charged={("search", H100): 4},
        cluster_free={("east", H100): 0, ("east", "A100-40GB"): 4},
    )
    (decision,) = decide([demand(device_class="A100-40GB")], the_view)
    assert decision.admitted_replicas == 1


def test_a_scale_down_in_the_same_pass_frees_room_for_a_waiting_demand() -> None:
    shrinking = demand("a", desired=1, admitted=3, since=0)
    waiting = demand("b", desired=2, since=1)
    decisions = {d.deployment_id: d for d in decide([shrinking, waiting], view(charged=12, free=0))}
    assert decisions["a"].admitted_replicas == 1
    assert decisions["b"].admitted_replicas == 2


def test_an_adopted_deployment_holding_its_devices_needs_no_new_capacity() -> None:
    adopted = dataclasses.replace(demand(desired=2), held=8)
    (decision,) = decide([adopted], view(charged=8, free=0))
    assert decision.admitted_replicas == 2


def test_an_adopted_deployment_over_the_quota_waits() -> None:
    adopted = dataclasses.replace(demand(desired=2), held=8)
    (decision,) = decide([adopted], view(limit=4, charged=8, free=0))
    assert decision.reason == REASON_INSUFFICIENT_QUOTA


@pytest.mark.parametrize(
    ("case", "limit", "charged", "free", "surge"),
    [
        ("room for old + new", 32, 8, 16, 2),
        ("quota allows one more replica", 12, 8, 16, 1),
        ("capacity allows one more replica", 32, 8, 4, 1),
        ("full quota: replace in place", 8, 8, 16, 0),
        ("full cluster: replace in place", 32, 8, 0, 0),
    ],
)
def test_a_rolling_deployment_gets_what_surge_fits(
    case: str, limit: int, charged: int, free: int, surge: int
) -> None:
    rolling = dataclasses.replace(demand(desired=2, admitted=2), rolling=True)
    (decision,) = decide([rolling], view(limit=limit, charged=charged, free=free))
    assert (decision.admitted_replicas, decision.surge_replicas) == (2, surge), case


def test_surge_comes_after_every_regular_demand_of_the_pass() -> None:
    rolling = dataclasses.replace(demand("rolling", desired=2, admitted=2, since=0), rolling=True)
    waiting = demand("waiting", desired=1, since=5)
    decisions = {
        d.deployment_id: d for d in decide([rolling, waiting], view(limit=64, charged=8, free=4))
    }
    assert decisions["waiting"].admitted_replicas == 1
    assert decisions["rolling"].surge_replicas == 0


def test_surge_is_released_when_the_rollout_ends() -> None:
    done = dataclasses.replace(demand(desired=2, admitted=2), surge_replicas=2)
    waiting = demand("next", desired=2, since=1)
    decisions = {d.deployment_id: d for d in decide([done, waiting], view(charged=16, free=0))}
    assert decisions["d1"].surge_replicas == 0
    assert decisions["next"].admitted_replicas == 2, "the released surge went to the next"


# -- replicas no agent creates; a cluster back smaller (issue 20) ------------------------------


@pytest.mark.parametrize(
    ("case", "held", "admitted_before", "admitted", "reason"),
    [
        ("an observed deployment scaled up: none beyond what runs", 8, 2, 2, "observed"),
        ("nothing runs: nothing admitted", 0, 0, 0, "observed"),
        ("admitted before, its replicas gone: the admission goes", 4, 3, 1, "observed"),
        ("what it wants runs: nothing to say", 16, 4, 4, REASON_NONE),
    ],
)
def test_a_deployment_no_agent_creates_is_admitted_only_as_far_as_its_pods_are(
    case: str, held: int, admitted_before: int, admitted: int, reason: str
) -> None:
    wanted = dataclasses.replace(
        demand(desired=4, admitted=admitted_before),
        held=held,
        idle_reason="observed",
        idle_message="observed: hand it over",
        exists=held // 4,
    )
    (decision,) = decide([wanted], view(limit=64, free=64))
    assert (decision.admitted_replicas, decision.reason) == (admitted, reason), case
    assert decision.surge_replicas == 0
    if reason:
        assert "hand it over" in decision.message


def test_a_cluster_back_smaller_sheds_reserved_replicas_lowest_priority_newest_first() -> None:
    old = dataclasses.replace(demand("old", desired=2, admitted=2, since=1.0), held=4)
    new = dataclasses.replace(demand("new", desired=2, admitted=2, since=2.0), held=0)
    low = dataclasses.replace(
        demand("low", desired=1, admitted=1, since=0.5), held=0, priority="low"
    )
    # 8 devices allocated or reserved too many: low's reservation (4) goes first, then one of
    # new's; old's running pod keeps its devices.
    the_view = dataclasses.replace(view(limit=64, free=0), overcommitted={("east", H100): 8})
    decisions = {d.deployment_id: d for d in decide([old, new, low], the_view)}
    assert decisions["low"].admitted_replicas == 0
    assert decisions["new"].admitted_replicas == 1
    assert decisions["old"].admitted_replicas == 2
    for shed in ("low", "new"):
        assert decisions[shed].reason == REASON_INSUFFICIENT_CAPACITY
        assert decisions[shed].message
