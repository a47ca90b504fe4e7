"""A placement change that drops a cluster is make-before-break, as a drain is (issue 20
section 4, docs/placement.md "Changing a workload"): the dropped cluster's deployment keeps
running while its replicas are placed again on the remaining clusters, and goes once they run
all their replicas ready. Through the hub's use cases, on each store backend."""

from __future__ import annotations

import pytest

from hub.model import Placement
from hub.service import deployments, failover, workloads
from hub.service.context import ServiceContext
from tests import words
from tests.unit.hub.test_dry_run import fleet, shape, spec
from tests.unit.hub.test_state_words import Clock, report

# The fixtures: a store per backend, with a clock the test moves.
from tests.unit.hub.test_state_words import clock as clock
from tests.unit.hub.test_state_words import ctx as ctx


def shares(ctx: ServiceContext) -> dict[str, tuple[int, int]]:
    """Per cluster: desired and admitted replicas."""
    return {c: (d, a) for c, (d, a, _, _) in shape(workloads.get(ctx, "chat")).items()}


def test_dropping_a_cluster_replaces_its_replicas_before_removing_them(
    ctx: ServiceContext, clock: Clock
) -> None:
    # Quota for the workload's 2 replicas only: the move fits because a replica and its
    # replacement are charged once, as in a drain.
    fleet(ctx, quota=8)
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    report(ctx, "chat.east", ready=2)
    move = workloads.WorkloadChange(placement=Placement(clusters=("west",)))

    preview = workloads.preview_update(ctx, "chat", move)
    assert {c.current.deployment.name: c.effects for c in preview.changes} == {
        "chat.west": ("created", "admitted")
    }, "east is not removed by the change itself"

    moved = workloads.update(ctx, "chat", move)
    assert shape(moved) == shape(preview.workload)
    assert shares(ctx) == {"east": (2, 2), "west": (2, 2)}
    (record,) = workloads.get(ctx, "chat").failovers
    assert (record.cause, record.state, dict(record.stand_ins)) == (
        "placement",
        "failed_over",
        {"west": 2},
    )
    assert "keeps running until they do" in record.message
    assert words.check(ctx) == []

    # West runs one of two: east stays.
    report(ctx, "chat.west", ready=1)
    failover.tick(ctx)
    assert set(shares(ctx)) == {"east", "west"}
    # West runs both: east goes, the record says so.
    report(ctx, "chat.west", ready=2)
    failover.tick(ctx)
    assert shares(ctx) == {"west": (2, 2)}
    (record,) = workloads.get(ctx, "chat").failovers
    assert record.state == "moved" and not record.active
    assert "its deployment there was removed" in record.message


def test_putting_the_cluster_back_stops_the_move(ctx: ServiceContext) -> None:
    fleet(ctx, quota=64)
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    report(ctx, "chat.east", ready=2)
    workloads.update(ctx, "chat", workloads.WorkloadChange(placement=Placement(("west",))))

    workloads.update(ctx, "chat", workloads.WorkloadChange(placement=Placement(("east",))))

    assert shares(ctx) == {"east": (2, 2)}
    assert deployments.get(ctx, "chat.east").deployment.desired_replicas == 2
    assert not [r for r in workloads.get(ctx, "chat").failovers if r.active]


@pytest.mark.parametrize("replicas", [0, 1])
def test_a_move_with_a_scale_down_to_what_stays_removes_at_once(
    ctx: ServiceContext, replicas: int
) -> None:
    fleet(ctx, quota=64)
    workloads.create(ctx, spec("chat", replicas=2, where=("east", "west")))
    assert set(shares(ctx)) == {"east", "west"}
    change = workloads.WorkloadChange(replicas=replicas, placement=Placement(("west",)))

    workloads.update(ctx, "chat", change)

    assert "east" not in shares(ctx), "nothing to make first: the dropped share goes at once"


def test_a_scale_during_a_move_keeps_the_move_going(ctx: ServiceContext) -> None:
    fleet(ctx, quota=64)
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    report(ctx, "chat.east", ready=2)
    workloads.update(ctx, "chat", workloads.WorkloadChange(placement=Placement(("west",))))

    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=1))

    # East still runs its 2 until west runs the 1 the workload now wants; then it goes.
    assert shares(ctx) == {"east": (2, 2), "west": (1, 1)}
    active = [r for r in workloads.get(ctx, "chat").failovers if r.active]
    assert [(r.cluster_id, r.cause, dict(r.stand_ins)) for r in active] == [
        ("east", "placement", {"west": 1})
    ]
    report(ctx, "chat.west", ready=1)
    failover.tick(ctx)
    assert shares(ctx) == {"west": (1, 1)}
