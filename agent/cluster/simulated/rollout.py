"""The rollout arithmetic of the simulated Dynamo operator. Pure.

Called by agent/cluster/simulated/dynamo.py, which owns the pods and applies what these
functions decide. Nothing here touches cluster state.

Rules, per service with D desired replicas (docs/simulated-cluster.md):
- maxUnavailable = max(1, floor(25% of D)); the ready count is kept >= D - maxUnavailable
  while old pods are retired to make room for new ones.
- Scale-down and retirement order (Kubernetes ReplicaSet ranking): unscheduled before
  scheduled, not ready before ready, newest first.
- Making room: a new pod that fits nowhere may take the devices of old pods of the same
  service on ONE node; the plan picks the node costing the fewest ready old pods.
- Going over budget is allowed only when nothing is starting (waiting cannot help) and the
  whole new generation fits once the old is gone (`fits_all`): a rollout that can finish
  never deadlocks, and one that cannot never trades replicas it has for ones it cannot run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_UNAVAILABLE_FRACTION = 0.25
# DGD annotation: JSON object service name -> how many pods beyond `replicas` that service may
# hold devices for during a rollout. Absent (or a service missing from it): no limit, so the
# new generation comes up on every free device while the old stays. Wingsmith's agent sets it
# from the surge the hub admitted (quota and capacity reserved for it), docs/rollouts.md.
MAX_SURGE_ANNOTATION = "wingsmith.dev/max-surge"


def max_unavailable(desired: int) -> int:
    # Kubernetes rounds a percentage maxUnavailable down; at least 1 so a full cluster can move.
    return max(1, int(desired * MAX_UNAVAILABLE_FRACTION))


def max_surge(annotations: Mapping[str, str], service: str) -> int | None:
    """The service's surge limit from the graph's annotation; None means unlimited. A value
    that cannot be read counts as 0: the safe reading of a limit someone meant to set."""
    raw = annotations.get(MAX_SURGE_ANNOTATION)
    if raw is None:
        return None
    try:
        limits = json.loads(raw)
        value = limits.get(service) if isinstance(limits, dict) else None
    except ValueError:
        return 0
    if value is None:
        return None
    return max(0, int(value)) if isinstance(value, int) else 0


def removal_rank(*, scheduled: bool, ready: bool, seq: int) -> tuple[bool, bool, int]:
    """Sort key: smallest first is removed first."""
    return (scheduled, ready, -seq)


@dataclass(frozen=True)
class Holder:
    """An old-generation pod that could be retired to free devices."""

    key: str
    node: str
    # Devices that become allocatable when it goes (its healthy ones).
    frees: int
    ready: bool
    seq: int


@dataclass(frozen=True)
class RoomPlan:
    node: str
    victims: tuple[str, ...]
    # Ready pods lost: what the plan spends of the maxUnavailable budget.
    cost: int


def plan_room(
    need: int, *, free_by_node: Mapping[str, int], holders: Sequence[Holder]
) -> RoomPlan | None:
    """The cheapest way to free `need` devices on one node, or None if no node can."""
    best: RoomPlan | None = None
    for node, free in free_by_node.items():
        plan = _plan_on_node(node, need, free, [h for h in holders if h.node == node])
        if plan and (best is None or _cheaper(plan, best)):
            best = plan
    return best


def _cheaper(plan: RoomPlan, than: RoomPlan) -> bool:
    return (plan.cost, len(plan.victims)) < (than.cost, len(than.victims))


def _plan_on_node(node: str, need: int, free: int, holders: list[Holder]) -> RoomPlan | None:
    # Not-ready pods cost nothing; among equals, bigger pods first so fewer go.
    holders.sort(key=lambda h: (h.ready, -h.frees, -h.seq))
    victims: list[Holder] = []
    for holder in holders:
        if free >= need:
            break
        if holder.frees == 0:
            continue  # retiring it would lose a replica and gain nothing
        victims.append(holder)
        free += holder.frees
    if free < need:
        return None
    return RoomPlan(
        node=node,
        victims=tuple(v.key for v in victims),
        cost=sum(1 for v in victims if v.ready),
    )


def fits_all(need: int, count: int, *, room_by_node: Mapping[str, int]) -> bool:
    """Would `count` pods of `need` devices each fit, first fit, into this room per node?"""
    placed = 0
    for room in room_by_node.values():
        placed += room // need if need else count
        if placed >= count:
            return True
    return placed >= count
