"""Placement and admission over random fleets and demands (hypothesis): whenever some of a
workload's replicas could run, some do, and nothing is ever admitted past a quota or a
cluster's free devices (docs/placement.md, docs/admission.md).

A workload's replicas are spread by `placement.place` (without preferences, and with random
ordered or weighted steps), one deployment per cluster, and each deployment is admitted by
`admission.decide`, exactly as hub/service/workloads.py and hub/service/admit.py chain them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from hub.admission import AdmissionView, Decision, Demand, decide
from hub.placement import ClusterRoom, Step, place

CLASS = "H100-80GB"
# Deterministic (the same examples on every run and in CI), no example database on disk.
PROPERTY = settings(max_examples=300, deadline=None, database=None, derandomize=True)


@dataclass(frozen=True)
class Fleet:
    rooms: tuple[ClusterRoom, ...]
    quota_limit: int
    quota_charged: int


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    names = draw(st.lists(st.sampled_from("abcdefghijk"), min_size=1, max_size=11, unique=True))
    rooms = []
    for name in sorted(names):
        total = draw(st.sampled_from([0, 4, 8, 16, 24, 32, 64]))
        free = draw(st.integers(min_value=0, max_value=total))
        rooms.append(ClusterRoom(name, free_devices=free, total_devices=total))
    limit = draw(st.integers(min_value=0, max_value=128))
    charged = draw(st.integers(min_value=0, max_value=limit))
    return Fleet(tuple(rooms), limit, charged)


def expand_and_admit(
    fleet: Fleet, *, replicas: int, per_replica: int, steps: Sequence[Step] = ()
) -> tuple[dict[str, int], list[Decision]]:
    shares = place(
        replicas=replicas, devices_per_replica=per_replica, rooms=fleet.rooms, steps=steps
    )
    demands = [
        Demand(
            deployment_id=cluster_id,
            project="search",
            cluster_id=cluster_id,
            device_class=CLASS,
            devices_per_replica=per_replica,
            desired_replicas=share,
            admitted_replicas=0,
            enabled=True,
            pending_since=0.0,
        )
        for cluster_id, share in sorted(shares.items())
        if share > 0  # a cluster whose share is 0 gets no deployment
    ]
    view = AdmissionView(
        quota_limits={("search", CLASS): fleet.quota_limit},
        quota_charged={("search", CLASS): fleet.quota_charged},
        cluster_free={(r.cluster_id, CLASS): r.free_devices for r in fleet.rooms},
    )
    return shares, decide(demands, view)


@st.composite
def preference_steps(draw: st.DrawFn, fleet: Fleet) -> list[Step]:
    """Ordered steps over the fleet (docs/placement.md "Preferences"); some weighted."""
    order = draw(st.permutations([r.cluster_id for r in fleet.rooms]))
    steps, start = [], 0
    while start < len(order):
        size = draw(st.integers(min_value=1, max_value=len(order) - start))
        group = tuple(order[start : start + size])
        start += size
        weighted = draw(st.booleans())
        weights = {c: draw(st.integers(min_value=0, max_value=4)) for c in group}
        steps.append(Step(group, weights if weighted else None))
    return steps


@PROPERTY
@given(
    fleet=fleets(),
    replicas=st.integers(min_value=0, max_value=40),
    per_replica=st.sampled_from([1, 2, 4, 8, 16]),
    data=st.data(),
)
def test_a_workload_runs_every_replica_that_fits_and_never_more(
    fleet: Fleet, replicas: int, per_replica: int, data: st.DataObject
) -> None:
    # Half the examples without preferences (today's levelling), half with random steps.
    steps = data.draw(st.just([]) | preference_steps(fleet), label="steps")
    shares, decisions = expand_and_admit(
        fleet, replicas=replicas, per_replica=per_replica, steps=steps
    )
    assert sum(shares.values()) == replicas, "every replica is placed, running or waiting"
    admitted = {d.deployment_id: d.admitted_replicas for d in decisions}
    free = {r.cluster_id: r.free_devices for r in fleet.rooms}
    quota_left = fleet.quota_limit - fleet.quota_charged
    # Never over: a cluster's free devices, the project's quota, the deployment's share.
    for cluster_id, count in admitted.items():
        assert count * per_replica <= free[cluster_id], (cluster_id, count)
        assert count <= shares[cluster_id]
    assert sum(admitted.values()) * per_replica <= quota_left
    # Whenever some replicas could run, some do; in fact as many as quota and room allow.
    could_run = min(
        replicas, quota_left // per_replica, sum(f // per_replica for f in free.values())
    )
    assert sum(admitted.values()) == could_run, (shares, admitted)
    for decision in decisions:
        waits = decision.admitted_replicas < shares[decision.deployment_id]
        assert decision.waiting == waits, decision
        assert bool(decision.message) == waits, decision


@st.composite
def demand_sets(draw: st.DrawFn) -> tuple[list[Demand], AdmissionView]:
    clusters = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True))
    projects = draw(st.lists(st.sampled_from("pqrs"), min_size=1, max_size=4, unique=True))
    demands = []
    for index in range(draw(st.integers(min_value=1, max_value=12))):
        desired = draw(st.integers(min_value=0, max_value=8))
        demands.append(
            Demand(
                deployment_id=f"d{index:02d}",
                project=draw(st.sampled_from(projects)),
                cluster_id=draw(st.sampled_from(clusters)),
                device_class=CLASS,
                devices_per_replica=draw(st.sampled_from([1, 2, 4, 8])),
                desired_replicas=desired,
                admitted_replicas=draw(st.integers(min_value=0, max_value=desired)),
                enabled=True,
                pending_since=float(draw(st.integers(min_value=0, max_value=5))),
            )
        )
    limits = {
        (p, CLASS): draw(st.integers(min_value=0, max_value=64))
        for p in projects
        if draw(st.booleans()) or p == projects[0]
    }
    view = AdmissionView(
        quota_limits=limits,
        quota_charged={
            key: draw(st.integers(min_value=0, max_value=limit)) for key, limit in limits.items()
        },
        cluster_free={(c, CLASS): draw(st.integers(min_value=0, max_value=64)) for c in clusters},
        stale_clusters=frozenset(c for c in clusters if draw(st.integers(0, 5)) == 0),
    )
    return demands, view


@PROPERTY
@given(demand_sets())
def test_no_waiting_deployment_could_take_one_more_replica(
    drawn: tuple[list[Demand], AdmissionView],
) -> None:
    demands, view = drawn
    decisions = {d.deployment_id: d for d in decide(demands, view)}
    granted = _granted(demands, decisions)
    quota_left = {
        key: limit - view.quota_charged.get(key, 0) - granted["quota"].get(key, 0)
        for key, limit in view.quota_limits.items()
    }
    free_left = {
        key: free - granted["cluster"].get(key, 0) for key, free in view.cluster_free.items()
    }
    # Never over: what was granted fits every quota and every (fresh) cluster's free devices.
    assert all(left >= 0 for left in quota_left.values()), quota_left
    assert all(left >= 0 for left in free_left.values()), free_left
    for key, devices in granted["cluster"].items():
        assert devices == 0 or key[0] not in view.stale_clusters, "a stale cluster admits none"
    # Whenever one more replica of a waiting deployment could run, it was admitted.
    for d in demands:
        decision = decisions[d.deployment_id]
        assert d.admitted_replicas <= decision.admitted_replicas <= d.desired_replicas
        if decision.admitted_replicas == d.desired_replicas:
            continue
        quota = quota_left.get((d.project, CLASS))
        free = 0 if d.cluster_id in view.stale_clusters else free_left[(d.cluster_id, CLASS)]
        fits_one_more = quota is not None and min(quota, free) >= d.devices_per_replica
        assert not fits_one_more, (d, decision, quota, free)
        assert decision.waiting and decision.message


def _granted(
    demands: Sequence[Demand], decisions: Mapping[str, Decision]
) -> dict[str, dict[tuple[str, str], int]]:
    """Devices newly admitted, per (project, class) and per (cluster, class)."""
    quota: dict[tuple[str, str], int] = {}
    cluster: dict[tuple[str, str], int] = {}
    for d in demands:
        devices = (decisions[d.deployment_id].admitted_replicas - d.admitted_replicas) * (
            d.devices_per_replica
        )
        quota[(d.project, CLASS)] = quota.get((d.project, CLASS), 0) + devices
        cluster[(d.cluster_id, CLASS)] = cluster.get((d.cluster_id, CLASS), 0) + devices
    return {"quota": quota, "cluster": cluster}


def test_overflow_that_spreads_over_every_cluster_still_runs_what_fits() -> None:
    # The case from issue 9: 5 replicas of 4 devices on east (2 free slots of 4) and west (1 of
    # 4). Overflow lands on both, so neither share fits whole; 3 replicas run all the same.
    fleet = Fleet((ClusterRoom("east", 8, 16), ClusterRoom("west", 4, 16)), 64, 0)
    shares, decisions = expand_and_admit(fleet, replicas=5, per_replica=4)
    assert shares == {"east": 3, "west": 2}
    assert {d.deployment_id: (d.admitted_replicas, d.reason) for d in decisions} == {
        "east": (2, "insufficient_capacity"),
        "west": (1, "insufficient_capacity"),
    }
    east = next(d for d in decisions if d.deployment_id == "east")
    assert east.message == (
        "2 of 3 replicas admitted; the other 1 waits: needs 4 H100-80GB; cluster east has 0 free"
    )
