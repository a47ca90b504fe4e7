"""What a workload's placement, failover and rollout policies may hold: each checked, with the
field named when refused (errors.InvalidArgument), and returned in its normal form (clusters
without repeats, a failover's 0 as the default). Pure; `hub.service.workloads` checks every
create and update with them.
"""

from __future__ import annotations

from hub import errors, placement
from hub.model import (
    DEFAULT_WAVE_DEADLINE_S,
    TOPOLOGIES,
    FailoverPolicy,
    Placement,
    PlacementPreference,
    RolloutPolicy,
)
from hub.service import validate

PREFERENCES_FIELD = "workload.placement.preferences"


def valid_placement(wanted: Placement) -> Placement:
    if wanted.clusters and wanted.cluster_selector:
        raise errors.InvalidArgument(
            "workload.placement", "give either clusters or cluster_selector, not both"
        )
    for index, cluster_id in enumerate(wanted.clusters):
        validate.dns_label(cluster_id, f"workload.placement.clusters[{index}]")
    validate.labels(wanted.cluster_selector, "workload.placement.cluster_selector")
    if wanted.topology not in TOPOLOGIES:
        raise errors.InvalidArgument(
            "workload.placement.topology", "expected one of: node, nvlink_domain (or none)"
        )
    placement.check_preferences(wanted.preferences, PREFERENCES_FIELD)
    for index, pref in enumerate(wanted.preferences):
        where = f"{PREFERENCES_FIELD}[{index}]"
        for position, cluster_id in enumerate(pref.clusters):
            validate.dns_label(cluster_id, f"{where}.clusters[{position}]")
        for cluster_id in pref.weights:
            validate.dns_label(cluster_id, f'{where}.weights["{cluster_id}"]')
        validate.labels(pref.cluster_selector, f"{where}.cluster_selector")
    return Placement(
        clusters=tuple(dict.fromkeys(wanted.clusters)),
        cluster_selector=dict(wanted.cluster_selector),
        topology=wanted.topology,
        preferences=tuple(
            PlacementPreference(
                clusters=tuple(dict.fromkeys(pref.clusters)),
                cluster_selector=dict(pref.cluster_selector),
                weights=dict(pref.weights),
            )
            for pref in wanted.preferences
        ),
        failover=valid_failover(wanted.failover),
    )


MAX_FAILOVER_S = 86_400
DEFAULT_FAILOVER_S = 300


def valid_failover(wanted: FailoverPolicy | None) -> FailoverPolicy | None:
    """0 means the default (300 s); each between 1 s and a day."""
    if wanted is None:
        return None
    values = {}
    for name, value in (
        ("toleration_seconds", wanted.toleration_s),
        ("stabilization_seconds", wanted.stabilization_s),
    ):
        if not 0 <= value <= MAX_FAILOVER_S:
            raise errors.InvalidArgument(
                f"workload.placement.failover.{name}",
                f"{value} out of range: 1 to {MAX_FAILOVER_S} seconds (0: {DEFAULT_FAILOVER_S})",
            )
        values[name] = value or DEFAULT_FAILOVER_S
    return FailoverPolicy(
        toleration_s=values["toleration_seconds"],
        stabilization_s=values["stabilization_seconds"],
    )


# A wave deadline longer than a week is a rollout nobody watches.
MAX_WAVE_DEADLINE_S = 7 * 24 * 3600
MAX_CLUSTERS_IN_FLIGHT = 10_000


def valid_rollout_policy(policy: RolloutPolicy) -> RolloutPolicy:
    if not 0 <= policy.max_clusters_in_flight <= MAX_CLUSTERS_IN_FLIGHT:
        raise errors.InvalidArgument(
            "workload.rollout.max_clusters_in_flight",
            f"must be between 0 and {MAX_CLUSTERS_IN_FLIGHT} (0: every cluster at once)",
        )
    if not 0 <= policy.wave_deadline_seconds <= MAX_WAVE_DEADLINE_S:
        raise errors.InvalidArgument(
            "workload.rollout.wave_deadline_seconds",
            f"must be between 0 and {MAX_WAVE_DEADLINE_S} (0: the default,"
            f" {DEFAULT_WAVE_DEADLINE_S} s)",
        )
    return policy
