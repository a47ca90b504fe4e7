"""Priority and preemption in admission (hub/admission/): table-driven cases, then property
tests over random clusters, projects, priorities and authorities (hypothesis)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.admission import AdmissionView, Decision, Demand, decide
from hub.model import (
    PRIORITIES,
    REASON_INSUFFICIENT_CAPACITY,
    REASON_INSUFFICIENT_QUOTA,
    REASON_NONE,
    REASON_PREEMPTED,
    priority_rank,
)

H100 = "H100-80GB"
A100 = "A100-80GB"


def dep(
    deployment_id: str,
    *,
    priority: str = "normal",
    project: str = "search",
    cluster: str = "east",
    device_class: str = H100,
    per_replica: int = 4,
    desired: int = 1,
    admitted: int = 0,
    held: int = 0,
    since: float = 0.0,
    managed: bool = True,
    workload: str = "",
    reason: str = "",
    message: str = "",
    rolling: bool = False,
    surge: int = 0,
) -> Demand:
    return Demand(
        deployment_id=deployment_id,
        project=project,
        cluster_id=cluster,
        device_class=device_class,
        devices_per_replica=per_replica,
        desired_replicas=desired,
        admitted_replicas=admitted,
        enabled=True,
        pending_since=since,
        held=held,
        rolling=rolling,
        surge_replicas=surge,
        reason=reason,
        message=message,
        priority=priority,
        workload_id=workload or f"wl_{deployment_id}",
        workload_name=workload or deployment_id,
        managed=managed,
    )


def running(
    deployment_id: str, replicas: int = 2, *, held: int | None = None, **kw: object
) -> Demand:
    """An admitted deployment waiting for nothing whose pods hold their devices."""
    per_replica = int(kw.get("per_replica", 4))  # type: ignore[call-overload]
    return dep(
        deployment_id,
        desired=replicas,
        admitted=replicas,
        held=replicas * per_replica if held is None else held,
        **kw,  # type: ignore[arg-type]
    )


def view(
    *,
    free: int = 0,
    limit: int = 64,
    admitted: Sequence[Demand] = (),
    preemption: bool = True,
    preemptible: frozenset[str] = frozenset(),
    stale: frozenset[str] = frozenset(),
) -> AdmissionView:
    return AdmissionView(
        quota_limits={("search", H100): limit, ("ads", H100): limit, ("search", A100): limit},
        quota_charged={},
        cluster_free={("east", H100): free, ("west", H100): 16, ("east", A100): 0},
        stale_clusters=stale,
        preemption=preemption,
        admitted=tuple(admitted),
        preemptible_projects=preemptible,
    )


def by_id(decisions: Sequence[Decision]) -> dict[str, Decision]:
    return {d.deployment_id: d for d in decisions}


HIGH = dep("big", priority="high", desired=1)


@pytest.mark.parametrize(
    ("case", "demands", "the_view", "expect"),
    [
        (
            "off: the high-priority demand waits; nothing is taken back",
            [HIGH],
            view(admitted=[running("small", priority="low")], preemption=False),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "on: one replica of the low one goes; the high one waits for its devices",
            [HIGH],
            view(admitted=[running("small", priority="low")]),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY), "small": (1, REASON_PREEMPTED)},
        ),
        (
            "a victim's reservation (no pods yet) comes free at once: admitted in the same pass",
            [HIGH],
            view(admitted=[running("small", priority="low", held=0)]),
            {"big": (1, REASON_NONE), "small": (1, REASON_PREEMPTED)},
        ),
        (
            "equal priority is never a victim",
            [HIGH],
            view(admitted=[running("peer", priority="high")]),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "higher priority is never a victim",
            [dep("mid", priority="normal")],
            view(admitted=[running("top", priority="critical")]),
            {"mid": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "an observed deployment is never a victim",
            [HIGH],
            view(admitted=[running("adopted", priority="low", managed=False)]),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "another project's deployment: not without its policy",
            [HIGH],
            view(admitted=[running("theirs", priority="low", project="ads")]),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "another project's deployment: yes when its policy allows it",
            [HIGH],
            view(
                admitted=[running("theirs", priority="low", project="ads", held=0)],
                preemptible=frozenset({"ads"}),
            ),
            {"big": (1, REASON_NONE), "theirs": (1, REASON_PREEMPTED)},
        ),
        (
            "the same workload is never a victim",
            [dep("big", priority="high", workload="llama")],
            view(admitted=[running("big-old", priority="low", workload="llama")]),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "another cluster or device class is no help",
            [HIGH],
            view(
                admitted=[
                    running("west", priority="low", cluster="west"),
                    running("a100", priority="low", device_class=A100),
                ]
            ),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "not even every victim makes room: nothing is preempted",
            [dep("huge", priority="high", per_replica=16)],
            view(admitted=[running("small", priority="low")]),
            {"huge": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "quota, not capacity, blocks it: preemption does not help",
            [HIGH],
            view(limit=0, admitted=[running("small", priority="low", held=0)]),
            {"big": (0, REASON_INSUFFICIENT_QUOTA)},
        ),
        (
            "a stale cluster preempts nothing",
            [HIGH],
            view(stale=frozenset({"east"}), admitted=[running("small", priority="low", held=0)]),
            {"big": (0, REASON_INSUFFICIENT_CAPACITY)},
        ),
        (
            "lowest priority first, then the most recently admitted",
            [dep("top", priority="critical")],
            view(
                admitted=[
                    running("normal-1", priority="normal", held=0, since=5.0),
                    running("low-old", priority="low", held=0, since=1.0),
                    running("low-new", priority="low", held=0, since=2.0),
                ]
            ),
            {"top": (1, REASON_NONE), "low-new": (1, REASON_PREEMPTED)},
        ),
        (
            "devices already releasing for it: it waits, preempting no more",
            [
                HIGH,
                dep(
                    "small",
                    priority="low",
                    desired=2,
                    admitted=1,
                    held=8,
                    reason=REASON_PREEMPTED,
                    message="1 of its 2 admitted replicas preempted by big",
                ),
            ],
            view(admitted=[running("other", priority="low")]),
            {
                "big": (0, REASON_INSUFFICIENT_CAPACITY),
                "small": (1, REASON_PREEMPTED),
            },
        ),
        (
            "a rollout's surge never preempts",
            [dep("big", priority="high", desired=1, admitted=1, held=4, rolling=True)],
            view(admitted=[running("small", priority="low", held=0)]),
            {"big": (1, REASON_NONE)},
        ),
        (
            "a victim that now waits on its quota too still says it was preempted",
            [HIGH, dep("small", priority="low", desired=2, admitted=1, since=1.0)],
            view(limit=4),
            {"big": (1, REASON_NONE), "small": (0, REASON_PREEMPTED)},
        ),
        (
            "takes only as many replicas as it needs, from as few victims as it can",
            [dep("big", priority="high", desired=2)],
            view(admitted=[running("small", 4, priority="low", held=0)]),
            {"big": (2, REASON_NONE), "small": (2, REASON_PREEMPTED)},
        ),
    ],
)
def test_preemption(
    case: str,
    demands: list[Demand],
    the_view: AdmissionView,
    expect: dict[str, tuple[int, str]],
) -> None:
    decided = by_id(decide(demands, the_view))
    got = {
        d.deployment_id: (d.admitted_replicas, d.reason)
        for d in decided.values()
        if d.deployment_id in expect or d.reason == REASON_PREEMPTED
    }
    assert got == expect, case


def test_the_victim_is_told_who_preempted_it_and_keeps_it_while_it_waits() -> None:
    decided = by_id(decide([HIGH], view(admitted=[running("small", priority="low")])))
    message = decided["small"].message
    assert message == (
        "1 of its 2 admitted replicas preempted by big (priority high, project search)"
        " on cluster east; it waits until room returns"
    )
    assert "being released" in decided["big"].message
    # The next pass (the cluster still full) keeps the reason and the message.
    victim = dep(
        "small",
        priority="low",
        desired=2,
        admitted=1,
        held=4,
        reason=REASON_PREEMPTED,
        message=message,
    )
    again = by_id(decide([victim], view(preemption=True)))["small"]
    assert (again.reason, again.message, again.changed) == (REASON_PREEMPTED, message, False)
    # Room returns: it is admitted again.
    back = by_id(decide([victim], view(free=4)))["small"]
    assert (back.admitted_replicas, back.reason) == (2, REASON_NONE)


def test_the_released_room_goes_to_the_preemptor_before_an_older_lower_demand() -> None:
    """Priority orders the queue: the devices a victim releases are not taken by an older,
    lower-priority demand waiting on the same cluster."""
    older = dep("older", priority="normal", since=0.0)
    preemptor = dep("big", priority="high", since=9.0)
    decided = by_id(decide([older, preemptor], view(free=4, preemption=False)))
    assert decided["big"].admitted_replicas == 1
    assert decided["older"].admitted_replicas == 0


def test_claimed_room_is_not_taken_by_a_lower_demand_in_the_same_pass() -> None:
    """Victims free 4 devices now (reservations) for a preemptor that needs 8: the 4 stay
    claimed for it, not handed to a lower-priority demand later in the pass."""
    preemptor = dep("big", priority="high", per_replica=8)
    low_demand = dep("small-new", priority="low", since=5.0)
    the_view = view(
        admitted=[running("r1", 1, priority="low", held=0), running("r2", 1, priority="low")]
    )
    decided = by_id(decide([preemptor, low_demand], the_view))
    assert decided["small-new"].admitted_replicas == 0
    assert {decided["r1"].reason, decided["r2"].reason} == {REASON_PREEMPTED}


def test_a_scale_down_in_the_same_pass_spares_a_victim_a_replica() -> None:
    # Found by a random search of the property below: `shrinking` gives one device back in
    # the pass, so `chat` needs to take only one of `low`'s two replicas. Decided before the
    # scale-down, it took both, and `low` then got one back labelled insufficient_capacity.
    chat = dep("chat", priority="high", per_replica=1, desired=2)
    low = dep("low", priority="low", per_replica=1, desired=2, admitted=2)
    shrinking = dep("shrinking", priority="low", per_replica=1, desired=0, admitted=1)
    decided = by_id(decide([chat, low, shrinking], view(free=0)))
    assert decided["chat"].admitted_replicas == 2
    assert decided["shrinking"].admitted_replicas == 0
    assert (decided["low"].admitted_replicas, decided["low"].reason) == (1, REASON_PREEMPTED)
    assert decided["low"].message.startswith("1 of its 2 admitted replicas preempted by chat")


# -- properties -------------------------------------------------------------------------------

CLUSTERS = ("east", "west")
PREEMPTOR = re.compile(
    r"preempted by (?P<workload>\S+) \(priority (?P<priority>\w+), project (?P<project>[\w-]+)\)"
)
PROJECTS = ("search", "ads")


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[Demand], AdmissionView]:
    def one(i: int, *, waiting: bool) -> Demand:
        per_replica = draw(st.sampled_from([1, 2, 4]))
        desired = draw(st.integers(min_value=0, max_value=4))
        # Waiting: mostly a demand for more (a scale-down now and then).
        admitted = draw(st.integers(min_value=0, max_value=desired + 1)) if waiting else desired
        if not waiting and admitted == 0:
            admitted = desired = 1
        held = draw(st.integers(min_value=0, max_value=admitted * per_replica + 2))
        return dep(
            f"{'w' if waiting else 'a'}{i}",
            priority=draw(st.sampled_from(PRIORITIES)),
            project=draw(st.sampled_from(PROJECTS)),
            cluster=draw(st.sampled_from(CLUSTERS)),
            per_replica=per_replica,
            desired=desired,
            admitted=admitted,
            held=held,
            since=float(draw(st.integers(min_value=0, max_value=5))),
            managed=draw(st.booleans()),
            workload=draw(st.sampled_from(["wl_x", "wl_y", f"wl_{i}"])),
            reason=draw(st.sampled_from(["", REASON_PREEMPTED])) if waiting else "",
        )

    demands = [one(i, waiting=True) for i in range(draw(st.integers(0, 6)))]
    admitted = [one(i, waiting=False) for i in range(draw(st.integers(0, 6)))]
    the_view = AdmissionView(
        quota_limits={(p, H100): draw(st.integers(0, 40)) for p in PROJECTS},
        quota_charged={(p, H100): draw(st.integers(0, 8)) for p in PROJECTS},
        # Full clusters most of the time: that is where preemption has work to do.
        cluster_free={(c, H100): draw(st.sampled_from([0, 0, 1, 2, 4, 8])) for c in CLUSTERS},
        stale_clusters=draw(st.sampled_from([frozenset(), frozenset(), frozenset({"east"})])),
        preemption=draw(st.sampled_from([True, True, False])),
        admitted=admitted,
        preemptible_projects=frozenset(draw(st.sets(st.sampled_from(PROJECTS)))),
    )
    return demands, the_view


def _charge(d: Demand, decision: Decision) -> int:
    return d.charge(admitted=decision.admitted_replicas, surge=decision.surge_replicas)


@settings(max_examples=400, deadline=None, database=None, derandomize=True)
@given(fleets())
def test_preemption_properties(fleet: tuple[list[Demand], AdmissionView]) -> None:
    demands, the_view = fleet
    decisions = decide(demands, the_view)
    everyone = {d.deployment_id: d for d in [*the_view.admitted, *demands]}
    decided = by_id(decisions)
    assert len(decided) == len(decisions), "one decision per deployment"
    assert set(decided) >= {d.deployment_id for d in demands}

    victims = [
        everyone[x.deployment_id]
        for x in decisions
        if x.reason == REASON_PREEMPTED
        and x.admitted_replicas < everyone[x.deployment_id].admitted_replicas
    ]
    # Preemption only when on; an admitted deployment gets a decision only as a victim.
    if not the_view.preemption:
        assert victims == []
    assert set(decided) - {d.deployment_id for d in demands} <= {v.deployment_id for v in victims}

    for victim in victims:
        # Never an observed one; always for a strictly higher-priority demand of another
        # workload on its cluster and class, of its project or one whose policy allows it.
        assert victim.managed
        preemptors = [
            d
            for d in demands
            if d.cluster_id == victim.cluster_id
            and d.device_class == victim.device_class
            and priority_rank(d.priority) > priority_rank(victim.priority)
            and d.workload_id != victim.workload_id
            and (d.project == victim.project or victim.project in the_view.preemptible_projects)
        ]
        assert preemptors, victim
        assert victim.cluster_id not in the_view.stale_clusters
        # The one its message names satisfies the same rules.
        named = PREEMPTOR.search(decided[victim.deployment_id].message)
        assert named, decided[victim.deployment_id].message
        assert priority_rank(named["priority"]) > priority_rank(victim.priority)
        assert named["project"] == victim.project or (
            victim.project in the_view.preemptible_projects
        )
        assert named["workload"] != victim.workload_name, "a workload never preempts itself"

    # Nothing else loses admitted replicas: only a scale-down or a disable takes them back, so
    # no preemption costs the preemptors' workloads (nor anyone else) a replica.
    for x in decisions:
        d = everyone[x.deployment_id]
        if x.admitted_replicas < d.admitted_replicas and x.reason != REASON_PREEMPTED:
            assert not d.enabled or x.admitted_replicas == d.desired_replicas, (d, x)

    # No quota exceeded and no capacity exceeded by what the pass added.
    for project in PROJECTS:
        added = sum(
            _charge(d, decided[d.deployment_id])
            - d.charge(admitted=d.admitted_replicas, surge=d.surge_replicas)
            for d in everyone.values()
            if d.project == project and d.deployment_id in decided
        )
        grew = any(
            decided[d.deployment_id].admitted_replicas > d.admitted_replicas
            for d in everyone.values()
            if d.project == project and d.deployment_id in decided
        )
        if grew:
            charged = the_view.quota_charged[(project, H100)]
            assert charged + added <= max(charged, the_view.quota_limits[(project, H100)])
    for cluster in CLUSTERS:
        on_cluster = [
            d for d in everyone.values() if d.cluster_id == cluster and d.deployment_id in decided
        ]
        added = sum(
            _charge(d, decided[d.deployment_id])
            - d.charge(admitted=d.admitted_replicas, surge=d.surge_replicas)
            for d in on_cluster
        )
        grew = any(
            decided[d.deployment_id].admitted_replicas > d.admitted_replicas for d in on_cluster
        )
        if grew:
            # A stale cluster offers nothing: only devices a deployment's pods already hold.
            free = (
                0 if cluster in the_view.stale_clusters else the_view.cluster_free[(cluster, H100)]
            )
            assert added <= free


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(fleets())
def test_off_means_the_admitted_are_never_looked_at(
    fleet: tuple[list[Demand], AdmissionView],
) -> None:
    demands, the_view = fleet
    off = dataclasses.replace(the_view, preemption=False)
    bare = dataclasses.replace(off, admitted=(), preemptible_projects=frozenset())
    assert decide(demands, off) == decide(demands, bare)
