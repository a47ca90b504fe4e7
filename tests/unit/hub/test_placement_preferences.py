"""Placement preferences (hub/placement.py, docs/placement.md "Preferences"): ordered steps
filled first to last, static weights within a step, scale down from the least preferred step.

Table-driven cases on the pure core, then properties over random fleets (hypothesis): a
replica never spills past a more preferred cluster with room, every replica that fits is
placed, a scale down never takes from a more preferred cluster while a less preferred one
has replicas, and without preferences the result is exactly today's levelling.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub import errors
from hub.model import PlacementPreference as Pref
from hub.placement import (
    MAX_WEIGHT,
    ClusterRoom,
    Share,
    Step,
    check_named_clusters,
    check_preferences,
    place,
    resolve_steps,
    shrink,
)

PROPERTY = settings(max_examples=300, deadline=None, database=None, derandomize=True)
FIELD = "workload.placement.preferences"

LABELS = {
    "onprem-a": {"site": "onprem"},
    "onprem-b": {"site": "onprem"},
    "cloud-east": {"site": "cloud", "region": "us-east"},
    "cloud-west": {"site": "cloud", "region": "us-west"},
}
ELIGIBLE = sorted(LABELS)


def rooms(**free_total: tuple[int, int]) -> list[ClusterRoom]:
    return [
        ClusterRoom(c.replace("_", "-"), free, total) for c, (free, total) in free_total.items()
    ]


# -- resolving preferences into steps ---------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "preferences", "expected"),
    [
        ("none: no steps (today's rule)", (), []),
        (
            "one cluster first, the rest after",
            (Pref(clusters=("cloud-west",)),),
            [Step(("cloud-west",)), Step(("cloud-east", "onprem-a", "onprem-b"))],
        ),
        (
            "selector then selector",
            (Pref(cluster_selector={"site": "onprem"}), Pref(cluster_selector={"site": "cloud"})),
            [Step(("onprem-a", "onprem-b")), Step(("cloud-east", "cloud-west"))],
        ),
        (
            "a cluster belongs to the first step naming it",
            (Pref(clusters=("cloud-east",)), Pref(cluster_selector={"site": "cloud"})),
            [
                Step(("cloud-east",)),
                Step(("cloud-west",)),
                Step(("onprem-a", "onprem-b")),
            ],
        ),
        (
            "weights form a weighted step",
            (Pref(weights={"onprem-a": 3, "onprem-b": 1}),),
            [
                Step(("onprem-a", "onprem-b"), {"onprem-a": 3, "onprem-b": 1}),
                Step(("cloud-east", "cloud-west")),
            ],
        ),
        (
            "a selector matching nothing has no effect",
            (Pref(cluster_selector={"site": "mars"}), Pref(clusters=("onprem-b",))),
            [Step(("onprem-b",)), Step(("cloud-east", "cloud-west", "onprem-a"))],
        ),
        (
            "everything named: no last step",
            (Pref(cluster_selector={"site": "cloud"}), Pref(cluster_selector={"site": "onprem"})),
            [Step(("cloud-east", "cloud-west")), Step(("onprem-a", "onprem-b"))],
        ),
    ],
)
def test_resolve_steps(case: str, preferences: tuple[Pref, ...], expected: list[Step]) -> None:
    assert resolve_steps(preferences, ELIGIBLE, LABELS) == expected, case


def test_steps_keep_only_eligible_clusters() -> None:
    # A cluster deleted since the preference was written is skipped, not an error.
    steps = resolve_steps((Pref(clusters=("gone", "onprem-a")),), ["onprem-a", "x"], LABELS)
    assert steps == [Step(("onprem-a",)), Step(("x",))]


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preferences", "field", "words"),
    [
        ((Pref(),), f"{FIELD}[0]", "exactly one of clusters, cluster_selector or weights"),
        (
            (Pref(clusters=("a",)), Pref(clusters=("b",), weights={"b": 1})),
            f"{FIELD}[1]",
            "got clusters, weights",
        ),
        ((Pref(weights={"a": -1}),), f'{FIELD}[0].weights["a"]', "0 to 1000"),
        ((Pref(weights={"a": MAX_WEIGHT + 1}),), f'{FIELD}[0].weights["a"]', "out of range"),
        (tuple(Pref(clusters=("a",)) for _ in range(33)), FIELD, "at most 32"),
    ],
)
def test_bad_preferences_name_the_field(
    preferences: tuple[Pref, ...], field: str, words: str
) -> None:
    with pytest.raises(errors.InvalidArgument) as caught:
        check_preferences(preferences, FIELD)
    assert caught.value.field == field
    assert words in str(caught.value)


def test_weights_at_the_bounds_are_accepted() -> None:
    check_preferences((Pref(weights={"a": 0, "b": MAX_WEIGHT}),), FIELD)


@pytest.mark.parametrize(
    ("preferences", "field"),
    [
        ((Pref(clusters=("onprem-a", "mars")),), f"{FIELD}[0].clusters[1]"),
        (
            (Pref(clusters=("onprem-a",)), Pref(weights={"venus": 1})),
            f'{FIELD}[1].weights["venus"]',
        ),
    ],
)
def test_a_named_cluster_must_be_eligible(preferences: tuple[Pref, ...], field: str) -> None:
    with pytest.raises(errors.InvalidArgument) as caught:
        check_named_clusters(preferences, ELIGIBLE, FIELD)
    assert caught.value.field == field
    assert "not eligible" in str(caught.value)


# -- placing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "replicas", "the_rooms", "steps", "existing", "expected"),
    [
        (
            "fill the first step",
            3,
            rooms(a=(16, 16), b=(16, 16)),
            [Step(("a",)), Step(("b",))],
            {},
            {"a": 3, "b": 0},
        ),
        (
            "spill to the next when the first is full",
            6,
            rooms(a=(16, 16), b=(16, 16)),
            [Step(("a",)), Step(("b",))],
            {},
            {"a": 4, "b": 2},
        ),
        (
            "spill skips a step with no room",
            2,
            rooms(a=(0, 16), b=(0, 0), c=(8, 8)),
            [Step(("a",)), Step(("b",)), Step(("c",))],
            {},
            {"a": 0, "b": 0, "c": 2},
        ),
        (
            "a step levels free capacity like today",
            4,
            rooms(a=(16, 16), b=(8, 16), c=(16, 16)),
            [Step(("a", "b")), Step(("c",))],
            {},
            {"a": 3, "b": 1, "c": 0},
        ),
        (
            "weights split a step in proportion",
            8,
            rooms(a=(32, 32), b=(32, 32)),
            [Step(("a", "b"), {"a": 3, "b": 1})],
            {},
            {"a": 6, "b": 2},
        ),
        (
            "weights count what runs already",
            2,
            rooms(a=(32, 32), b=(32, 32)),
            [Step(("a", "b"), {"a": 1, "b": 1})],
            {"a": 4, "b": 2},
            {"a": 4, "b": 4},
        ),
        (
            "a full weighted cluster gives its part to the others in the step",
            8,
            rooms(a=(8, 32), b=(32, 32)),
            [Step(("a", "b"), {"a": 3, "b": 1})],
            {},
            {"a": 2, "b": 6},
        ),
        (
            "weight 0 takes replicas only when the positive weights are full",
            4,
            rooms(a=(8, 8), b=(32, 32), c=(32, 32)),
            [Step(("a", "b"), {"a": 1, "b": 0}), Step(("c",))],
            {},
            {"a": 2, "b": 2, "c": 0},
        ),
        (
            "overflow waits on the first step with total slots left",
            5,
            rooms(a=(0, 16), b=(4, 8)),
            [Step(("a",)), Step(("b",))],
            {},
            {"a": 4, "b": 1},
        ),
        (
            "overflow past every total goes to the first step with devices",
            7,
            rooms(a=(0, 0), b=(4, 8), c=(4, 4)),
            [Step(("a",)), Step(("b",)), Step(("c",))],
            {},
            {"a": 0, "b": 6, "c": 1},
        ),
        (
            "no devices anywhere: the first step",
            2,
            rooms(a=(0, 0), b=(0, 0)),
            [Step(("b",)), Step(("a",))],
            {},
            {"a": 0, "b": 2},
        ),
    ],
)
def test_place_in_steps(
    case: str,
    replicas: int,
    the_rooms: list[ClusterRoom],
    steps: list[Step],
    existing: dict[str, int],
    expected: dict[str, int],
) -> None:
    got = place(
        replicas=replicas, devices_per_replica=4, rooms=the_rooms, existing=existing, steps=steps
    )
    assert got == expected, case


@pytest.mark.parametrize(
    ("case", "shares", "remove", "steps", "expected"),
    [
        (
            "least preferred step first",
            [Share("a", 4, 4), Share("b", 2, 2)],
            3,
            [Step(("a",)), Step(("b",))],
            {"a": 3, "b": 0},
        ),
        (
            "waiting replicas of a preferred step stay while a later step runs some",
            [Share("a", 4, 2), Share("b", 2, 2)],
            1,
            [Step(("a",)), Step(("b",))],
            {"a": 4, "b": 1},
        ),
        (
            "within a step: unadmitted first, then the largest share",
            [Share("a", 3, 3), Share("b", 2, 1), Share("c", 1, 1)],
            2,
            [Step(("c",)), Step(("a", "b"))],
            {"a": 2, "b": 1, "c": 1},
        ),
        (
            "a weighted step keeps its proportion",
            [Share("a", 6, 6), Share("b", 2, 2)],
            4,
            [Step(("a", "b"), {"a": 3, "b": 1})],
            {"a": 3, "b": 1},
        ),
        (
            "a cluster no step names goes first",
            [Share("gone", 1, 1), Share("a", 1, 1)],
            1,
            [Step(("a",))],
            {"gone": 0, "a": 1},
        ),
    ],
)
def test_shrink_in_steps(
    case: str, shares: list[Share], remove: int, steps: list[Step], expected: dict[str, int]
) -> None:
    assert shrink(shares=shares, remove=remove, steps=steps) == expected, case


# -- properties over random fleets ------------------------------------------------------------

NAMES = "abcdefgh"


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[ClusterRoom], list[Step], dict[str, int]]:
    """Rooms, steps over them (some weighted) and existing shares."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    the_rooms = []
    for name in sorted(names):
        total = draw(st.sampled_from([0, 4, 8, 16, 32]))
        free = draw(st.integers(min_value=0, max_value=total))
        the_rooms.append(ClusterRoom(name, free, total))
    order = draw(st.permutations(sorted(names)))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=3)))
    groups = [order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    steps = []
    for group in groups:
        if not group:
            continue
        if draw(st.booleans()):
            weights = {c: draw(st.integers(0, 5)) for c in group}
            steps.append(Step(tuple(group), weights))
        else:
            steps.append(Step(tuple(group)))
    existing = {r.cluster_id: draw(st.integers(0, 3)) for r in the_rooms}
    return the_rooms, steps, existing


def _rank(steps: list[Step]) -> dict[str, int]:
    return {c: i for i, step in enumerate(steps) for c in step.clusters}


@PROPERTY
@given(fleet=fleets(), replicas=st.integers(0, 40), per_replica=st.sampled_from([1, 2, 4, 8]))
def test_preferences_place_every_replica_and_never_skip_a_preferred_room(
    fleet: tuple[list[ClusterRoom], list[Step], dict[str, int]], replicas: int, per_replica: int
) -> None:
    the_rooms, steps, existing = fleet
    got = place(
        replicas=replicas,
        devices_per_replica=per_replica,
        rooms=the_rooms,
        existing=existing,
        steps=steps,
    )
    added = {c: got[c] - existing[c] for c in got}
    free = {r.cluster_id: r.free_devices // per_replica for r in the_rooms}
    assert all(n >= 0 for n in added.values())
    # Totals: every replica is placed, and as many of them fit as the fleet has free slots.
    assert sum(added.values()) == replicas
    fitting = sum(min(added[c], free[c]) for c in got)
    assert fitting == min(replicas, sum(free.values()))
    # Ordering: a cluster of a later step gets a replica that fits only when every cluster
    # of every earlier step is full.
    rank = _rank(steps)
    for c in got:
        if min(added[c], free[c]) > 0:
            for earlier in got:
                if rank[earlier] < rank[c]:
                    assert added[earlier] >= free[earlier], (c, earlier)
    # Weights: within a weighted step, no replica went to a cluster that had more per unit of
    # weight than a cluster left with room (D'Hondt), for replicas that fit.
    for step in steps:
        if step.weights is None:
            continue
        for a in step.clusters:
            for b in step.clusters:
                wa, wb = step.weights[a], step.weights[b]
                if a == b or min(added[a], free[a]) <= 0 or added[b] >= free[b]:
                    continue
                if wb == 0:
                    continue
                assert wa > 0, (a, b, "weight 0 filled before a positive weight had room")
                assert Fraction(got[a], wa) <= Fraction(got[b] + 1, wb), (a, b)


@PROPERTY
@given(fleet=fleets(), remove=st.integers(0, 30), data=st.data())
def test_scale_down_takes_from_the_least_preferred_first(
    fleet: tuple[list[ClusterRoom], list[Step], dict[str, int]], remove: int, data: st.DataObject
) -> None:
    _, steps, existing = fleet
    shares = [
        Share(c, desired, data.draw(st.integers(0, desired), label=f"admitted {c}"))
        for c, desired in existing.items()
    ]
    got = shrink(shares=shares, remove=remove, steps=steps)
    before = sum(existing.values())
    assert sum(got.values()) == max(0, before - remove)
    rank = _rank(steps)
    for c, left in got.items():
        assert 0 <= left <= existing[c]
        if left < existing[c]:
            for later in got:
                if rank[later] > rank[c]:
                    assert got[later] == 0, (c, later)


@PROPERTY
@given(
    fleet=fleets(),
    replicas=st.integers(0, 40),
    per_replica=st.sampled_from([1, 2, 4, 8]),
    remove=st.integers(0, 30),
    data=st.data(),
)
def test_one_levelled_step_over_every_cluster_is_todays_rule(
    fleet: tuple[list[ClusterRoom], list[Step], dict[str, int]],
    replicas: int,
    per_replica: int,
    remove: int,
    data: st.DataObject,
) -> None:
    """The step-by-step code run with a single unweighted step equals the unchanged code path
    (the one a workload without preferences takes)."""
    the_rooms, _, existing = fleet
    everything = [Step(tuple(r.cluster_id for r in the_rooms))]
    today = place(
        replicas=replicas, devices_per_replica=per_replica, rooms=the_rooms, existing=existing
    )
    stepped = place(
        replicas=replicas,
        devices_per_replica=per_replica,
        rooms=the_rooms,
        existing=existing,
        steps=everything,
    )
    assert stepped == today
    shares = [
        Share(c, desired, data.draw(st.integers(0, desired), label=f"admitted {c}"))
        for c, desired in existing.items()
    ]
    assert shrink(shares=shares, remove=remove, steps=everything) == shrink(
        shares=shares, remove=remove
    )


@PROPERTY
@given(fleet=fleets())
def test_no_preferences_resolve_to_no_steps(
    fleet: tuple[list[ClusterRoom], list[Step], dict[str, int]],
) -> None:
    the_rooms, _, _ = fleet
    assert resolve_steps((), [r.cluster_id for r in the_rooms], {}) == []
