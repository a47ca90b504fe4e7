"""The wave decision (hub/rollout.py): table-driven cases, and properties over random fleets
and event orders (hypothesis): never more clusters in flight than the policy allows, nothing
handed out while paused, and a rollout whose clusters all become ready converges."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub import rollout
from hub.model import (
    DEFAULT_WAVE_DEADLINE_S,
    ROLLOUT_ABORTED,
    ROLLOUT_CONVERGED,
    ROLLOUT_PAUSED,
    ROLLOUT_ROLLING,
    RolloutPolicy,
)
from hub.rollout import ClusterWave, WaveDecision, WaveView


def old(cluster_id: str) -> ClusterWave:
    return ClusterWave(cluster_id, on_target=False, settled=True)


def flying(cluster_id: str, at: float = 100.0) -> ClusterWave:
    return ClusterWave(cluster_id, on_target=True, settled=False, changed_at=at, admitted=2)


def done(cluster_id: str, at: float = 100.0) -> ClusterWave:
    return ClusterWave(cluster_id, on_target=True, settled=True, changed_at=at)


def view(
    *clusters: ClusterWave,
    limit: int = 1,
    deadline: int = 60,
    state: str = ROLLOUT_ROLLING,
    now: float = 120.0,
) -> WaveView:
    return WaveView(
        policy=RolloutPolicy(max_clusters_in_flight=limit, wave_deadline_seconds=deadline),
        state=state,
        target_digest="svg_new",
        clusters=clusters,
        now=now,
    )


CASES = [
    pytest.param(
        view(old("c"), old("a"), old("b")), WaveDecision(advance=("a",)), id="first-wave-by-id"
    ),
    pytest.param(
        view(old("a"), old("b"), old("c"), limit=2),
        WaveDecision(advance=("a", "b")),
        id="two-in-flight",
    ),
    pytest.param(view(flying("a"), old("b"), old("c")), WaveDecision(), id="wave-in-flight-waits"),
    pytest.param(view(done("a"), old("b"), old("c")), WaveDecision(advance=("b",)), id="next-wave"),
    pytest.param(
        view(done("a"), flying("b"), old("c"), limit=2),
        WaveDecision(advance=("c",)),
        id="room-for-one-more",
    ),
    pytest.param(view(done("a"), done("b")), WaveDecision(converged=True), id="converged"),
    pytest.param(
        view(old("a"), old("b"), limit=0),
        WaveDecision(advance=("a", "b")),
        id="no-limit-all-at-once",
    ),
    pytest.param(
        view(flying("a", at=50.0), old("b"), now=110.0, deadline=60),
        WaveDecision(
            pause_reason=rollout.REASON_WAVE_DEADLINE,
            pause_message=(
                "not ready on svg_new within the wave deadline of 60s: a (0/2 ready); no"
                " further cluster gets the change. Fix the cause and resume (wingsmith rollout"
                " resume), or abort to roll back (wingsmith rollout abort)"
            ),
        ),
        id="deadline-pauses",
    ),
    pytest.param(
        view(flying("a", at=50.0), old("b"), now=109.0, deadline=60),
        WaveDecision(),
        id="just-before-deadline",
    ),
    pytest.param(
        view(flying("a", at=0.0), old("b"), now=DEFAULT_WAVE_DEADLINE_S - 1.0, deadline=0),
        WaveDecision(),
        id="default-deadline",
    ),
    pytest.param(
        # Still rolling to an older digest: in flight (it counts against the limit) but
        # the deadline is this rollout's, not the earlier one's.
        view(ClusterWave("a", on_target=False, settled=False), old("b"), now=10_000.0),
        WaveDecision(),
        id="rolling-to-an-older-digest-counts",
    ),
    pytest.param(view(old("a"), state=ROLLOUT_PAUSED), WaveDecision(), id="paused-hands-none"),
    pytest.param(view(old("a"), state=ROLLOUT_ABORTED), WaveDecision(), id="aborted"),
    pytest.param(view(old("a"), state=ROLLOUT_CONVERGED), WaveDecision(), id="converged-state"),
    pytest.param(view(old("a"), state=""), WaveDecision(), id="no-rollout"),
]


@pytest.mark.parametrize(("the_view", "expected"), CASES)
def test_decide(the_view: WaveView, expected: WaveDecision) -> None:
    assert rollout.decide(the_view) == expected


def test_cluster_states() -> None:
    assert old("a").state == rollout.WAITING
    assert flying("a").state == rollout.IN_FLIGHT
    assert done("a").state == rollout.DONE


# -- properties -------------------------------------------------------------------------------

clusters_st = st.lists(
    st.builds(
        ClusterWave,
        cluster_id=st.sampled_from([f"c{i}" for i in range(12)]),
        on_target=st.booleans(),
        settled=st.booleans(),
        changed_at=st.one_of(st.none(), st.floats(0, 200)),
    ),
    max_size=12,
    unique_by=lambda c: c.cluster_id,
)


@settings(max_examples=400, deadline=None, database=None, derandomize=True)
@given(
    clusters=clusters_st,
    limit=st.integers(0, 5),
    deadline=st.integers(1, 100),
    now=st.floats(0, 400),
    state=st.sampled_from(["", ROLLOUT_ROLLING, ROLLOUT_PAUSED, ROLLOUT_ABORTED]),
)
def test_one_decision_never_overfills_a_wave(
    clusters: list[ClusterWave], limit: int, deadline: int, now: float, state: str
) -> None:
    v = view(*clusters, limit=limit, deadline=deadline, state=state, now=now)
    decision = rollout.decide(v)
    if state != ROLLOUT_ROLLING:
        assert decision == WaveDecision()
        return
    waiting = {c.cluster_id for c in clusters if c.state == rollout.WAITING}
    assert set(decision.advance) <= waiting, "only clusters still on the old config, settled"
    if decision.pause_reason:
        assert not decision.advance
    if decision.advance and limit:
        assert len(rollout.in_flight(clusters)) + len(decision.advance) <= limit
    if decision.converged:
        assert all(c.state == rollout.DONE for c in clusters)


# One simulated rollout: each step either takes the decision, lets time pass, makes an
# in-flight cluster ready (unless it is a bad one), or resumes a pause.
events_st = st.lists(
    st.tuples(st.sampled_from(["decide", "tick", "ready", "resume"]), st.integers(0, 11)),
    max_size=80,
)


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(
    n=st.integers(1, 8),
    limit=st.integers(1, 4),
    bad=st.sets(st.integers(0, 7), max_size=2),
    events=events_st,
)
def test_a_rollout_keeps_the_limit_and_holds_while_paused(
    n: int, limit: int, bad: set[int], events: list[tuple[str, int]]
) -> None:
    deadline = 30
    clusters = {f"c{i}": old(f"c{i}") for i in range(n)}
    state, now = ROLLOUT_ROLLING, 0.0

    def step() -> None:
        nonlocal state
        decision = rollout.decide(
            view(*clusters.values(), limit=limit, deadline=deadline, state=state, now=now)
        )
        if state != ROLLOUT_ROLLING:
            assert decision == WaveDecision(), "nothing reaches a cluster while paused"
        if decision.pause_reason:
            state = ROLLOUT_PAUSED
        if decision.converged:
            state = ROLLOUT_CONVERGED
        for cluster_id in decision.advance:
            clusters[cluster_id] = flying(cluster_id, at=now)
        off = [c for c in clusters.values() if c.state != rollout.WAITING]
        off = [c for c in off if c.state != rollout.DONE]
        assert len(off) <= limit, "more clusters off both old-and-stable and new-and-ready"

    for kind, index in events:
        cluster_id = f"c{index % n}"
        if kind == "decide":
            step()
        elif kind == "tick":
            now += 10.0
        elif kind == "ready":
            c = clusters[cluster_id]
            if c.state == rollout.IN_FLIGHT and index % n not in bad:
                clusters[cluster_id] = replace(c, settled=True)
        elif kind == "resume" and state == ROLLOUT_PAUSED:
            state = ROLLOUT_ROLLING
            for key, c in clusters.items():
                if c.state == rollout.IN_FLIGHT:
                    clusters[key] = replace(c, changed_at=now)
    # Then the fleet settles (the bad clusters too, once fixed), resuming when paused:
    # the rollout converges, one wave at a time.
    for _ in range(3 * n + 3):
        if state == ROLLOUT_PAUSED:
            state = ROLLOUT_ROLLING
        step()
        for key, c in clusters.items():
            if c.state == rollout.IN_FLIGHT:
                clusters[key] = replace(c, settled=True)
    assert state == ROLLOUT_CONVERGED
    assert all(c.state == rollout.DONE for c in clusters.values())
