"""Placement: which clusters a workload may use, and how its replicas spread over them. Pure.

Called by hub/service/workloads.py with a read-only view of the clusters (their labels and the
free and total devices of the workload's class); it returns replica counts and never touches
the store. The rule (docs/placement.md):

1. Eligible clusters: the explicit list (every id must exist), or those whose labels contain
   the whole selector; neither given means every cluster.
2. Slots: a cluster's free slots are its free devices of the class // devices per replica; its
   total slots likewise from its verified, healthy devices.
3. Fit: replicas go one at a time to the eligible cluster with the most free slots left
   (ties: more total slots, then cluster id). This levels free capacity across clusters.
4. Overflow: replicas that fit nowhere go one at a time to the cluster with the most total
   slots left, preferring clusters that got nothing in step 3, then clusters that have any
   devices of the class. Overflow that joins a share of replicas that fit makes none of them
   wait: admission runs the replicas that fit and only the overflow waits, as that
   deployment's pending share on insufficient_capacity (hub/admission/).
5. Cordoned clusters (whole, or for the workload's device class; docs/placement.md "Cordon and
   drain") get no new replica while an open eligible cluster exists; they keep their shares.
6. Existing shares are kept: scaling up places only the added replicas; scaling down removes
   unadmitted replicas first, then from the largest share (docs/placement.md).
7. Preferences (optional) turn the eligible clusters into ordered steps (`resolve_steps`):
   steps 3 and 4 run step by step, the first step before the next, and a step with static
   weights splits its replicas in proportion to them instead of levelling free capacity.
   Scaling down removes from the least preferred step first. Without preferences `place` and
   `shrink` run exactly the rule above (one code path, unchanged).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hub import errors
from hub.model import Placement, PlacementPreference

MAX_PREFERENCES = 32
MAX_WEIGHT = 1000


@dataclass(frozen=True)
class ClusterRoom:
    """What placement knows of one eligible cluster, for one device class."""

    cluster_id: str
    free_devices: int
    total_devices: int
    # Cordoned (or draining) for the workload's class: no new replica here while an open
    # room exists; its existing share stays.
    closed: bool = False


@dataclass(frozen=True)
class Step:
    """One step of a workload's preferences, resolved to eligible cluster ids.

    `weights` None: the step's clusters level free capacity (the rule without preferences);
    otherwise each cluster's static weight, and the step's replicas split in proportion."""

    clusters: tuple[str, ...]
    weights: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Share:
    """A deployment's current share: desired, and how many of those are admitted."""

    cluster_id: str
    desired: int
    admitted: int


def eligible_clusters(
    placement: Placement, labels_by_cluster: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The eligible cluster ids, sorted; InvalidArgument for an explicit id that does not exist."""
    if placement.clusters:
        unknown = sorted(set(placement.clusters) - set(labels_by_cluster))
        if unknown:
            raise errors.InvalidArgument(
                "placement.clusters",
                f"no such cluster: {', '.join(unknown)} (see GET /v1/clusters)",
            )
        return sorted(set(placement.clusters))
    selector = placement.cluster_selector
    return sorted(
        cluster_id
        for cluster_id, labels in labels_by_cluster.items()
        if all(labels.get(key) == value for key, value in selector.items())
    )


def place(
    *,
    replicas: int,
    devices_per_replica: int,
    rooms: Sequence[ClusterRoom],
    existing: Mapping[str, int] | None = None,
    steps: Sequence[Step] = (),
) -> dict[str, int]:
    """Add `replicas` on top of `existing` shares; returns the new share of every room.

    `steps` (from `resolve_steps`) orders the rooms by preference; none: level over all."""
    assigned = {room.cluster_id: 0 for room in rooms}
    for cluster_id, count in (existing or {}).items():
        if cluster_id in assigned:
            assigned[cluster_id] = count
    if not rooms or replicas <= 0:
        return assigned
    # New replicas go to open rooms; only when every eligible cluster is cordoned do they
    # land on cordoned ones, where admission makes them wait (reason cordoned).
    rooms = [room for room in rooms if not room.closed] or list(rooms)
    kept = dict(assigned)
    assigned = {room.cluster_id: assigned[room.cluster_id] for room in rooms}
    if steps:
        open_steps = [
            Step(tuple(c for c in step.clusters if c in assigned), step.weights)
            for step in steps
            if any(c in assigned for c in step.clusters)
        ]
        if open_steps:
            placed = _place_in_steps(replicas, devices_per_replica, rooms, assigned, open_steps)
            return {**kept, **placed}
    per_replica = max(1, devices_per_replica)
    free = {room.cluster_id: room.free_devices // per_replica for room in rooms}
    total = {room.cluster_id: room.total_devices // per_replica for room in rooms}
    before = dict(assigned)
    added = {cluster_id: 0 for cluster_id in assigned}
    remaining = replicas
    remaining = _fill_fitting(assigned, free, total, added, remaining)
    if remaining:
        pool = _overflow_pool(assigned, before, added, total)
        spill = [(-(total[c] - before[c] - added[c]), c) for c in pool]
        heapq.heapify(spill)
        for _ in range(remaining):
            room, best = heapq.heappop(spill)
            added[best] += 1
            heapq.heappush(spill, (room + 1, best))
    return {**kept, **{c: before[c] + added[c] for c in assigned}}


def _overflow_pool(
    assigned: Mapping[str, int],
    before: Mapping[str, int],
    added: Mapping[str, int],
    total: Mapping[str, int],
) -> list[str]:
    untouched = [c for c in assigned if before[c] == 0 and added[c] == 0]
    for pool in (
        [c for c in untouched if total[c] > 0],
        [c for c in assigned if total[c] > 0],
        untouched,
        list(assigned),
    ):
        if pool:
            return pool
    return list(assigned)


def shrink(*, shares: Iterable[Share], remove: int, steps: Sequence[Step] = ()) -> dict[str, int]:
    """Take `remove` replicas away: unadmitted ones first, then from the largest share.

    With `steps`, from the least preferred step that has replicas first (docs/placement.md)."""
    if steps:
        return _shrink_in_steps(list(shares), remove, steps)
    current = {s.cluster_id: s for s in shares}
    desired = {c: s.desired for c, s in current.items()}
    for _ in range(max(0, remove)):
        live = [c for c in desired if desired[c] > 0]
        if not live:
            break
        unadmitted = [c for c in live if desired[c] > current[c].admitted]
        pool = unadmitted or live
        if unadmitted:
            victim = max(pool, key=lambda c: (desired[c] - current[c].admitted, c))
        else:
            victim = max(pool, key=lambda c: (desired[c], c))
        desired[victim] -= 1
    return desired


# -- preferences ------------------------------------------------------------------------------


def check_preferences(preferences: Sequence[PlacementPreference], field: str) -> None:
    """The preferences' own rules, before any cluster is read: InvalidArgument naming the field.

    Exactly one of clusters, cluster_selector, weights per step; weights 0..MAX_WEIGHT."""
    if len(preferences) > MAX_PREFERENCES:
        raise errors.InvalidArgument(field, f"at most {MAX_PREFERENCES} preferences")
    for index, pref in enumerate(preferences):
        where = f"{field}[{index}]"
        given = [
            name
            for name, value in (
                ("clusters", pref.clusters),
                ("cluster_selector", pref.cluster_selector),
                ("weights", pref.weights),
            )
            if value
        ]
        if len(given) != 1:
            raise errors.InvalidArgument(
                where,
                "give exactly one of clusters, cluster_selector or weights"
                + (f" (got {', '.join(given)})" if given else ""),
            )
        for cluster_id, weight in pref.weights.items():
            if not 0 <= weight <= MAX_WEIGHT:
                raise errors.InvalidArgument(
                    f'{where}.weights["{cluster_id}"]',
                    f"weight {weight} out of range: 0 to {MAX_WEIGHT}",
                )


def check_named_clusters(
    preferences: Sequence[PlacementPreference], eligible: Iterable[str], field: str
) -> None:
    """A cluster id a preference names must be eligible: a typo or a cluster outside the
    workload's placement would otherwise be silently ignored. (A selector matching nothing is
    fine: it may match clusters registered later.)"""
    allowed = set(eligible)
    for index, pref in enumerate(preferences):
        for position, cluster_id in enumerate(pref.clusters):
            if cluster_id not in allowed:
                raise errors.InvalidArgument(
                    f"{field}[{index}].clusters[{position}]", _not_eligible(cluster_id)
                )
        for cluster_id in pref.weights:
            if cluster_id not in allowed:
                raise errors.InvalidArgument(
                    f'{field}[{index}].weights["{cluster_id}"]', _not_eligible(cluster_id)
                )


def _not_eligible(cluster_id: str) -> str:
    return (
        f"cluster {cluster_id!r} is not eligible for this workload (no such cluster, or outside"
        " placement.clusters / placement.cluster_selector; see GET /v1/clusters)"
    )


def resolve_steps(
    preferences: Sequence[PlacementPreference],
    eligible: Sequence[str],
    labels_by_cluster: Mapping[str, Mapping[str, str]],
) -> list[Step]:
    """The preferences as ordered steps of eligible clusters. A cluster belongs to the first
    step naming it; eligible clusters no step names form a last step. No preferences: []."""
    if not preferences:
        return []
    allowed = set(eligible)
    claimed: set[str] = set()
    steps = []
    for pref in preferences:
        if pref.weights:
            members = [c for c in sorted(pref.weights) if c in allowed and c not in claimed]
        elif pref.clusters:
            members = [c for c in dict.fromkeys(pref.clusters) if c in allowed and c not in claimed]
        else:
            members = [
                c
                for c in eligible
                if c not in claimed
                and all(
                    labels_by_cluster.get(c, {}).get(key) == value
                    for key, value in pref.cluster_selector.items()
                )
            ]
        if not members:
            continue
        claimed.update(members)
        weights = {c: pref.weights[c] for c in members} if pref.weights else None
        steps.append(Step(tuple(members), weights))
    rest = tuple(c for c in eligible if c not in claimed)
    if rest:
        steps.append(Step(rest))
    return steps


def _place_in_steps(
    replicas: int,
    devices_per_replica: int,
    rooms: Sequence[ClusterRoom],
    assigned: Mapping[str, int],
    steps: Sequence[Step],
) -> dict[str, int]:
    """`place`'s rule step by step: replicas that fit fill the first step before the next;
    overflow waits on the most preferred step that could still hold it."""
    per_replica = max(1, devices_per_replica)
    free = {room.cluster_id: room.free_devices // per_replica for room in rooms}
    total = {room.cluster_id: room.total_devices // per_replica for room in rooms}
    before = dict(assigned)
    added = {cluster_id: 0 for cluster_id in assigned}
    members = [[c for c in step.clusters if c in assigned] for step in steps]
    remaining = replicas
    for step, clusters in zip(steps, members, strict=True):
        if not remaining:
            break
        if step.weights is None:
            remaining = _fill_fitting(clusters, free, total, added, remaining)
        else:
            weights = step.weights
            share = {c: before[c] for c in clusters}
            weighted = [
                (*_weighted_key(share[c], weights[c]), -free[c], -total[c], c)
                for c in clusters
                if free[c] > 0
            ]
            heapq.heapify(weighted)
            while remaining and weighted:
                *_, left, neg_total, best = heapq.heappop(weighted)
                added[best] += 1
                share[best] += 1
                remaining -= 1
                if left + 1 < 0:
                    key = _weighted_key(share[best], weights[best])
                    heapq.heappush(weighted, (*key, left + 1, neg_total, best))
    if remaining:
        _overflow_in_steps(remaining, steps, members, before, added, total)
    return {c: before[c] + added[c] for c in assigned}


def _overflow_in_steps(
    remaining: int,
    steps: Sequence[Step],
    members: Sequence[Sequence[str]],
    before: Mapping[str, int],
    added: dict[str, int],
    total: Mapping[str, int],
) -> None:
    """Each replica that fits nowhere waits on the first step with total slots left (room
    that may free up), else the first with devices of the class, else the first; within the
    step, `place`'s overflow rule (or, for a weighted step, the weights)."""
    room_left = [sum(max(0, total[c] - before[c] - added[c]) for c in m) for m in members]
    has_devices = [any(total[c] > 0 for c in m) for m in members]
    heaps: dict[int, list[tuple[object, ...]]] = {}
    for _ in range(remaining):
        index = next(
            (i for i, left in enumerate(room_left) if left > 0),
            next((i for i, has in enumerate(has_devices) if has), 0),
        )
        clusters = members[index]
        weights = steps[index].weights
        if index not in heaps:
            # The pool is chosen once per step, as `place` chooses it once.
            if weights is None:
                pool = _overflow_pool({c: before[c] for c in clusters}, before, added, total)
                heap: list[tuple[object, ...]] = [
                    (-(total[c] - before[c] - added[c]), c) for c in pool
                ]
            else:
                pool = [c for c in clusters if total[c] > 0] or list(clusters)
                heap = [_spill_key(c, weights[c], before[c] + added[c], total[c]) for c in pool]
            heapq.heapify(heap)
            heaps[index] = heap
        heap = heaps[index]
        entry = heapq.heappop(heap)
        best = str(entry[-1])
        if total[best] - before[best] - added[best] > 0:
            room_left[index] -= 1
        added[best] += 1
        if weights is None:
            heapq.heappush(heap, (-(total[best] - before[best] - added[best]), best))
        else:
            share = before[best] + added[best]
            heapq.heappush(heap, _spill_key(best, weights[best], share, total[best]))


def _weighted_key(share: int, weight: int) -> tuple[bool, float, int]:
    """Who gets a weighted step's next replica: the lowest share after it per unit of weight
    (D'Hondt), ties to the heavier weight; weight 0 only after every positive weight.

    A float quotient orders exactly here: IEEE division rounds correctly, so equal ratios give
    equal floats, and two different ratios of integers up to MAX_REPLICAS / MAX_WEIGHT differ
    by far more than a double's rounding."""
    if weight <= 0:
        return (True, 0.0, 0)
    return (False, (share + 1) / weight, -weight)


def _spill_key(cluster_id: str, weight: int, share: int, total: int) -> tuple[object, ...]:
    return (*_weighted_key(share, weight), -(total - share), cluster_id)


def _shrink_in_steps(shares: Sequence[Share], remove: int, steps: Sequence[Step]) -> dict[str, int]:
    """`shrink` from the least preferred step first; a cluster in no step (no longer
    eligible) is less preferred than any. Within a step: unadmitted replicas first, then the
    largest share (levelled step) or the share furthest above its weight (weighted step)."""
    rank: dict[str, int] = {}
    weight: dict[str, int] = {}
    for position, step in enumerate(steps):
        for cluster_id in step.clusters:
            rank[cluster_id] = position
            if step.weights is not None:
                weight[cluster_id] = step.weights[cluster_id]
    current = {s.cluster_id: s for s in shares}
    desired = {c: s.desired for c, s in current.items()}
    for _ in range(max(0, remove)):
        live = [c for c in desired if desired[c] > 0]
        if not live:
            break
        worst = max(rank.get(c, len(steps)) for c in live)
        pool = [c for c in live if rank.get(c, len(steps)) == worst]
        unadmitted = [c for c in pool if desired[c] > current[c].admitted]
        if unadmitted:
            victim = max(unadmitted, key=lambda c: (desired[c] - current[c].admitted, c))
        elif pool[0] in weight:
            victim = max(pool, key=lambda c: (*_above_weight(desired[c], weight[c]), c))
        else:
            victim = max(pool, key=lambda c: (desired[c], c))
        desired[victim] -= 1
    return desired


def _above_weight(share: int, weight: int) -> tuple[bool, float, int]:
    """How far a share is above its weight: weight 0 first, then share per unit of weight,
    ties to the lighter weight (the mirror of `_weighted_key`; floats order exactly, as there)."""
    if weight <= 0:
        return (True, float(share), 0)
    return (False, share / weight, -weight)


def _fill_fitting(
    clusters: Iterable[str],
    free: Mapping[str, int],
    total: Mapping[str, int],
    added: dict[str, int],
    remaining: int,
) -> int:
    """Add replicas one at a time to the cluster with the most free room (then the most devices,
    then the id) among `clusters`, while any has room; returns the replicas still unplaced.
    A heap keyed as the rule orders clusters: O(replicas x log clusters), not a scan of every
    cluster per replica (a fleet-wide workload over 10,000 clusters took seconds)."""
    fits = [(-free[c], -total[c], c) for c in clusters if free[c] > 0]
    heapq.heapify(fits)
    while remaining and fits:
        left, neg_total, best = heapq.heappop(fits)
        added[best] += 1
        remaining -= 1
        if left + 1 < 0:
            heapq.heappush(fits, (left + 1, neg_total, best))
    return remaining
