"""Admission on stale clusters, and which decisions count as changes (hub/admission/)."""

from __future__ import annotations

import dataclasses

import pytest

from hub.admission import AdmissionView, Demand, decide
from hub.model import REASON_INSUFFICIENT_CAPACITY, REASON_INSUFFICIENT_QUOTA, REASON_NONE
from tests.unit.hub.test_admission import H100, demand, view


def stale(the_view: AdmissionView, *clusters: str) -> AdmissionView:
    return dataclasses.replace(the_view, stale_clusters=frozenset(clusters))


@pytest.mark.parametrize(
    ("case", "the_demand", "admitted", "surge", "reason"),
    [
        ("new demand waits", demand(desired=1), 0, 0, REASON_INSUFFICIENT_CAPACITY),
        (
            "a scale-up waits, what runs stays",
            demand(desired=3, admitted=2),
            2,
            0,
            REASON_INSUFFICIENT_CAPACITY,
        ),
        ("a scale-down still releases", demand(desired=1, admitted=3), 1, 0, REASON_NONE),
        ("admitted replicas stay admitted", demand(desired=2, admitted=2), 2, 0, REASON_NONE),
        (
            "a rollout keeps its surge but gets no more",
            dataclasses.replace(demand(desired=2, admitted=2), rolling=True, surge_replicas=1),
            2,
            1,
            REASON_NONE,
        ),
    ],
)
def test_a_stale_cluster_offers_nothing_new_and_takes_nothing_back(
    case: str, the_demand: Demand, admitted: int, surge: int, reason: str
) -> None:
    (decision,) = decide([the_demand], stale(view(free=16), "east"))
    assert (decision.admitted_replicas, decision.surge_replicas, decision.reason) == (
        admitted,
        surge,
        reason,
    ), case


def test_a_demand_on_a_stale_cluster_says_the_cluster_is_stale() -> None:
    (decision,) = decide([demand(desired=1)], stale(view(free=16), "east"))
    assert "cluster east is stale" in decision.message


def test_quota_is_still_checked_first_on_a_stale_cluster() -> None:
    (decision,) = decide([demand(desired=8)], stale(view(limit=4), "east"))
    assert decision.reason == REASON_INSUFFICIENT_QUOTA


def test_room_a_scale_down_frees_on_a_stale_cluster_goes_to_no_one() -> None:
    shrinking = demand("shrinking", desired=0, admitted=2, since=0)
    waiting = demand("waiting", desired=1, since=1)
    decisions = {
        d.deployment_id: d for d in decide([shrinking, waiting], stale(view(free=0), "east"))
    }
    assert decisions["shrinking"].admitted_replicas == 0
    assert decisions["waiting"].reason == REASON_INSUFFICIENT_CAPACITY


def test_other_clusters_are_not_affected_by_a_stale_one() -> None:
    the_view = dataclasses.replace(view(), cluster_free={("east", H100): 16, ("west", H100): 16})
    decisions = decide(
        [demand("e", cluster="east"), demand("w", cluster="west")], stale(the_view, "east")
    )
    assert [d.reason for d in decisions] == [REASON_INSUFFICIENT_CAPACITY, REASON_NONE]


@pytest.mark.parametrize(
    ("case", "the_demand", "the_view", "changed"),
    [
        ("first wait", demand(desired=1), view(limit=0), True),
        (
            "still waiting, same reason",
            dataclasses.replace(demand(desired=1), reason=REASON_INSUFFICIENT_QUOTA),
            view(limit=0),
            False,
        ),
        (
            "waiting on something else now",
            dataclasses.replace(demand(desired=1), reason=REASON_INSUFFICIENT_QUOTA),
            view(free=0),
            True,
        ),
        (
            "admitted at last",
            dataclasses.replace(demand(desired=1), reason=REASON_INSUFFICIENT_QUOTA),
            view(),
            True,
        ),
        ("released", demand(desired=2, admitted=2, enabled=False), view(), True),
    ],
)
def test_a_decision_is_a_change_only_when_the_outcome_moves(
    case: str, the_demand: Demand, the_view: AdmissionView, changed: bool
) -> None:
    (decision,) = decide([the_demand], the_view)
    assert decision.changed is changed, case
