"""Failover, failback and drain decisions (hub/failover.py): table-driven cases, and property
tests over random up/down histories of a cluster (no flapping, failback only after the
stabilization window) and over random covers (admission never exceeds a quota)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub import failover
from hub.admission import AdmissionView, Cover, Demand, decide
from hub.failover import Share, Site, WorkloadState
from hub.model import FailoverPolicy, FailoverRecord
from hub.placement import ClusterRoom, Step

POLICY = FailoverPolicy(toleration_s=60, stabilization_s=120)
H100 = "H100-80GB"


def rooms(*clusters: str, free: int = 32) -> dict[str, ClusterRoom]:
    return {c: ClusterRoom(c, free, 32) for c in clusters}


def state(
    shares: Sequence[Share],
    *,
    policy: FailoverPolicy | None = POLICY,
    records: Sequence[FailoverRecord] = (),
    eligible: Sequence[str] = ("east", "west", "north"),
) -> WorkloadState:
    return WorkloadState("wl_1", policy, 4, eligible, shares, records)


def record(
    *,
    cluster: str = "east",
    stand_ins: Mapping[str, int] | None = None,
    cause: str = "stale",
    recovered_since: float | None = None,
) -> FailoverRecord:
    return FailoverRecord(
        workload_id="wl_1",
        cluster_id=cluster,
        deployment_id=f"dep_{cluster}",
        cause=cause,
        start_time=0.0,
        replicas=2,
        stand_ins={"west": 2} if stand_ins is None else stand_ins,
        recovered_since=recovered_since,
    )


def share(
    cluster: str, desired: int, ready: int = -1, *, movable: bool = True, observed_s: float = 1.0
) -> Share:
    """`observed_s`: when the cluster reported `ready` (after the records' start, 0.0)."""
    ready = desired if ready < 0 else ready
    return Share(f"dep_{cluster}", cluster, desired, ready, movable, observed_s)


UP = {c: Site(c) for c in ("east", "west", "north")}


def with_sites(**changes: Site) -> dict[str, Site]:
    return {**UP, **changes}


@pytest.mark.parametrize(
    ("case", "the_state", "sites", "now", "desired", "states", "remove"),
    [
        (
            "healthy: nothing",
            state([share("east", 2), share("west", 2)]),
            UP,
            1000.0,
            {},
            [],
            [],
        ),
        (
            "stale within the toleration: nothing yet",
            state([share("east", 2, 0), share("west", 2)]),
            with_sites(east=Site("east", stale=True, silent_s=59)),
            1000.0,
            {},
            [],
            [],
        ),
        (
            "stale past the toleration: its replicas stand in elsewhere, nothing deleted",
            state([share("east", 2, 0), share("west", 2)]),
            with_sites(east=Site("east", stale=True, silent_s=60)),
            1000.0,
            {"north": 1, "west": 3},
            ["failed_over"],
            [],
        ),
        (
            "no failover asked: a stale cluster's replicas wait for it",
            state([share("east", 2, 0), share("west", 2)], policy=None),
            with_sites(east=Site("east", stale=True, silent_s=10_000)),
            1000.0,
            {},
            [],
            [],
        ),
        (
            "cordoned, with failover: stand-ins, whatever its liveness",
            state([share("east", 2), share("west", 2)]),
            with_sites(east=Site("east", closed=True)),
            1000.0,
            {"north": 1, "west": 3},
            ["failed_over"],
            [],
        ),
        (
            "stand-ins never go to a stale or cordoned cluster (cordoned west fails over too)",
            state([share("east", 2, 0), share("west", 2)]),
            with_sites(
                east=Site("east", stale=True, silent_s=600),
                north=Site("north", stale=True, silent_s=5),
                west=Site("west", closed=True),
            ),
            1000.0,
            {},
            ["stays", "stays"],  # recorded, with nowhere to go: nothing failed over
            [],
        ),
        (
            "an observed (adopted) deployment is never moved",
            state([share("east", 2, 0, movable=False)]),
            with_sites(east=Site("east", stale=True, silent_s=600)),
            1000.0,
            {},
            [],
            [],
        ),
        (
            "back and ready: the window starts, stand-ins stay",
            state([share("east", 2), share("west", 4)], records=[record()]),
            UP,
            1000.0,
            {},
            ["recovering"],
            [],
        ),
        (
            "back but not all ready: stand-ins stay, no window; the record says what it waits for",
            state([share("east", 2, 1), share("west", 4)], records=[record()]),
            UP,
            1000.0,
            {},
            ["failed_over"],
            [],
        ),
        (
            "window not over: nothing",
            state([share("east", 2), share("west", 4)], records=[record(recovered_since=900)]),
            UP,
            1019.0,
            {},
            [],
            [],
        ),
        (
            "window over: failback removes the stand-ins",
            state([share("east", 2), share("west", 4)], records=[record(recovered_since=900)]),
            UP,
            1020.0,
            {"west": 2},
            ["failed_back"],
            [],
        ),
        (
            "lost again during the window: it starts over (no flapping)",
            state([share("east", 2, 0), share("west", 4)], records=[record(recovered_since=900)]),
            with_sites(east=Site("east", stale=True, silent_s=2)),
            1000.0,
            {},
            ["failed_over"],
            [],
        ),
        (
            "failback of a deployment that only held stand-ins removes it",
            state([share("east", 2), share("west", 2)], records=[record(recovered_since=0)]),
            UP,
            1000.0,
            {},
            ["failed_back"],
            ["dep_west"],
        ),
        (
            "drain, with or without failover: stand-ins first",
            state([share("east", 2), share("west", 2)], policy=None),
            with_sites(east=Site("east", closed=True, draining=True)),
            1000.0,
            {"north": 1, "west": 3},
            ["failed_over"],
            [],
        ),
        (
            "drain: an observed (adopted) deployment stays, nothing stands in for it",
            state([share("east", 2, movable=False), share("west", 2)], policy=None),
            with_sites(east=Site("east", closed=True, draining=True)),
            1000.0,
            {},
            [],
            [],
        ),
        (
            "drain: stand-ins not all ready: the deployment stays",
            state(
                [share("east", 2), share("west", 4, 3)],
                policy=None,
                records=[record(cause="draining")],
            ),
            with_sites(east=Site("east", closed=True, draining=True)),
            1000.0,
            {},
            [],
            [],
        ),
        (
            "drain: stand-ins ready: the drained deployment goes, the stand-ins stay",
            state(
                [share("east", 2), share("west", 4)],
                policy=None,
                records=[record(cause="draining")],
            ),
            with_sites(east=Site("east", closed=True, draining=True)),
            1000.0,
            {},
            ["drained"],
            ["dep_east"],
        ),
        (
            "drain stopped (uncordoned): the stand-ins go at once",
            state(
                [share("east", 2), share("west", 4)],
                policy=None,
                records=[record(cause="draining")],
            ),
            UP,
            1000.0,
            {"west": 2},
            ["failed_back"],
            [],
        ),
    ],
)
def test_decide(
    case: str,
    the_state: WorkloadState,
    sites: dict[str, Site],
    now: float,
    desired: dict[str, int],
    states: list[str],
    remove: list[str],
) -> None:
    plan = failover.decide(the_state, sites, rooms("east", "west", "north"), now)
    assert plan.desired == desired, case
    assert [r.state for r in plan.records] == states, case
    assert plan.remove == remove, case


def test_a_new_failover_says_where_and_why() -> None:
    plan = failover.decide(
        state([share("east", 2, 0), share("west", 2)]),
        with_sites(east=Site("east", stale=True, silent_s=600)),
        rooms("east", "west", "north"),
        1000.0,
    )
    (new,) = plan.records
    assert (new.cluster_id, new.cause, new.replicas, dict(new.stand_ins)) == (
        "east",
        "stale",
        2,
        {"north": 1, "west": 1},
    )
    assert new.message == (
        "cluster east was silent for longer than the failover toleration: its replicas stand"
        " in on north (1), west (1) (nothing was deleted on east)"
    )


@pytest.mark.parametrize(
    ("case", "steps", "stand_ins"),
    [
        ("no preferences: levelled over the open clusters", (), {"north": 1, "west": 1}),
        (
            "north preferred: it takes every stand-in that fits",
            (Step(("north",)), Step(("east", "west"))),
            {"north": 2},
        ),
        (
            "a lost preferred cluster: the next step",
            (Step(("east",)), Step(("west",)), Step(("north",))),
            {"west": 2},
        ),
        (
            "weighted: in proportion to the weights, on top of the shares",
            (Step(("north", "west"), {"north": 3, "west": 1}),),
            {"north": 2},
        ),
    ],
)
def test_stand_ins_follow_the_placement_preferences(
    case: str, steps: tuple[Step, ...], stand_ins: dict[str, int]
) -> None:
    the_state = WorkloadState(
        "wl_1", POLICY, 4, ("east", "west", "north"), [share("east", 2, 0), share("west", 2)]
    )
    the_state = dataclasses.replace(the_state, steps=steps)
    plan = failover.decide(
        the_state,
        with_sites(east=Site("east", stale=True, silent_s=600)),
        rooms("east", "west", "north"),
        1000.0,
    )
    (new,) = plan.records
    assert dict(new.stand_ins) == stand_ins, case


def test_stand_ins_overflow_to_the_next_step_when_the_preferred_is_full() -> None:
    the_state = WorkloadState(
        "wl_1",
        POLICY,
        4,
        ("east", "west", "north"),
        [share("east", 3, 0)],
        steps=(Step(("north",)), Step(("west",))),
    )
    full_north = {**rooms("east", "west"), "north": ClusterRoom("north", 4, 32)}
    plan = failover.decide(
        the_state, with_sites(east=Site("east", stale=True, silent_s=600)), full_north, 1000.0
    )
    (new,) = plan.records
    assert dict(new.stand_ins) == {"north": 1, "west": 2}


# -- property: no flapping, failback only after stabilization -----------------------------------

STEP_S = 10.0


def run_history(up: Sequence[bool], policy: FailoverPolicy) -> list[tuple[float, str]]:
    """Drive decide() over a history of east up/down samples (one per STEP_S), applying each
    plan as the service would; returns (time, event) for each failover and failback."""
    desired = {"east": 2, "west": 2}
    records: list[FailoverRecord] = []
    last_seen = 0.0
    events = []
    for step, is_up in enumerate(up):
        now = step * STEP_S
        if is_up:
            last_seen = now
        silent = now - last_seen
        east = Site("east", stale=silent > 5, silent_s=silent)
        shares = [
            Share("dep_east", "east", desired["east"], desired["east"] if is_up else 0),
            Share("dep_west", "west", desired["west"], desired["west"]),
        ]
        plan = failover.decide(
            WorkloadState("wl_1", policy, 4, ("east", "west"), shares, records),
            {"east": east, "west": Site("west")},
            rooms("east", "west"),
            now,
        )
        desired.update(plan.desired)
        by_cluster = {r.cluster_id: r for r in records}
        for r in plan.records:
            before = by_cluster.get(r.cluster_id)
            started = r.active and (before is None or not before.active)
            ended = not r.active and before is not None and before.active
            if started or ended:
                events.append((now, "failed_over" if started else "failed_back"))
            by_cluster[r.cluster_id] = r
        records = list(by_cluster.values())
    return events


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(
    up=st.lists(st.booleans(), min_size=1, max_size=80),
    toleration=st.integers(min_value=1, max_value=60),
    stabilization=st.integers(min_value=1, max_value=120),
)
def test_no_flapping_and_failback_only_after_stabilization(
    up: list[bool], toleration: int, stabilization: int
) -> None:
    policy = FailoverPolicy(toleration_s=toleration, stabilization_s=stabilization)
    events = run_history(up, policy)
    # Events alternate: never two failovers (or failbacks) in a row.
    kinds = [kind for _, kind in events]
    assert all(a != b for a, b in itertools.pairwise(kinds)), kinds
    if kinds:
        assert kinds[0] == "failed_over"
    for when, kind in events:
        step = int(when / STEP_S)
        if kind == "failed_over":
            # Silent (down) for at least the toleration before it.
            silent_steps = next((i for i in range(step, -1, -1) if up[i]), -1)
            silent = when - (silent_steps * STEP_S if silent_steps >= 0 else 0.0)
            assert silent >= toleration
        else:
            # Up (and ready) continuously for the stabilization window before it.
            needed = int(-(-stabilization // STEP_S))
            assert step >= needed
            assert all(up[step - needed : step + 1]), (step, needed, up)


# -- property: a failover's stand-ins never take a project past its quota -----------------------


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(
    per_replica=st.sampled_from([1, 2, 4, 8]),
    lost_admitted=st.integers(min_value=0, max_value=4),
    base=st.integers(min_value=0, max_value=4),
    host_admitted=st.integers(min_value=0, max_value=4),
    stand_ins=st.integers(min_value=1, max_value=4),
    other=st.integers(min_value=0, max_value=16),
    limit=st.integers(min_value=0, max_value=64),
    free=st.integers(min_value=0, max_value=64),
)
def test_stand_ins_never_exceed_the_quota(
    per_replica: int,
    lost_admitted: int,
    base: int,
    host_admitted: int,
    stand_ins: int,
    other: int,
    limit: int,
    free: int,
) -> None:
    host_admitted = min(host_admitted, base + stand_ins)
    lost = lost_admitted * per_replica
    host_charge = host_admitted * per_replica
    portion = max(0, min(host_charge - base * per_replica, stand_ins * per_replica))
    charged = other + lost + host_charge - min(lost, portion)
    if charged > limit:
        return  # already over (a lowered quota): nothing to say about new admissions
    host = Demand(
        deployment_id="dep_west",
        project="search",
        cluster_id="west",
        device_class=H100,
        devices_per_replica=per_replica,
        desired_replicas=base + stand_ins,
        admitted_replicas=host_admitted,
        enabled=True,
        pending_since=0.0,
        cover="wl_1",
        cover_role="stand_in",
        base_replicas=base,
        stand_in_replicas=stand_ins,
    )
    view = AdmissionView(
        quota_limits={("search", H100): limit},
        quota_charged={("search", H100): charged},
        cluster_free={("west", H100): free},
        covers={"wl_1": Cover(lost=lost, stand_in=portion)},
    )
    (decision,) = decide([host], view)
    admitted = decision.admitted_replicas * per_replica
    new_portion = max(0, min(admitted - base * per_replica, stand_ins * per_replica))
    # What the project is charged afterwards, a pair counted once, stays within the quota.
    assert other + lost + admitted - min(lost, new_portion) <= limit
    assert admitted - host_charge <= free
    # And the credit is used: a stand-in that fits on its lost replica's charge is admitted.
    if base == 0 and host_admitted == 0 and lost >= stand_ins * per_replica <= free:
        assert decision.admitted_replicas == stand_ins


def stand_in(admitted: int = 0, *, base: int = 1, stand_ins: int = 1) -> Demand:
    return Demand(
        deployment_id="dep_west",
        project="search",
        cluster_id="west",
        device_class=H100,
        devices_per_replica=4,
        desired_replicas=base + stand_ins,
        admitted_replicas=admitted,
        enabled=True,
        pending_since=0.0,
        cover="wl_1",
        cover_role="stand_in",
        base_replicas=base,
        stand_in_replicas=stand_ins,
    )


@pytest.mark.parametrize(
    ("case", "demand", "cover", "charged", "admitted"),
    [
        (
            "quota spent by the two replicas: the stand-in runs on the lost one's charge",
            stand_in(admitted=1),
            Cover(lost=4, stand_in=0),
            8,
            2,
        ),
        (
            "no cover: the same stand-in would wait on quota",
            stand_in(admitted=1),
            None,
            8,
            1,
        ),
        (
            "the lost replica charged nothing (its admission was taken back): no credit",
            stand_in(admitted=1),
            Cover(lost=0, stand_in=0),
            4,
            2,
        ),
        (
            "credit covers only what was lost: a second stand-in beyond it waits",
            stand_in(admitted=1, stand_ins=2),
            Cover(lost=4, stand_in=0),
            8,
            2,
        ),
    ],
)
def test_a_replica_and_its_stand_in_are_charged_once(
    case: str, demand: Demand, cover: Cover | None, charged: int, admitted: int
) -> None:
    view = AdmissionView(
        quota_limits={("search", H100): 8},
        quota_charged={("search", H100): charged},
        cluster_free={("west", H100): 32},
        covers={} if cover is None else {"wl_1": cover},
    )
    (decision,) = decide([demand], view)
    assert decision.admitted_replicas == admitted, case
