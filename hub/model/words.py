"""The design's words: engines, authorities, phases, admission reasons, priority classes and
topologies, the lower-case strings hub.model's records hold and the REST surface shows."""

from __future__ import annotations

ENGINES = ("vllm", "sglang", "trtllm")
SERVING_MODES = ("aggregated", "disaggregated")
ROUTER_MODES = ("", "round_robin", "kv")
AUTHORITIES = ("managed", "observed")

# Admission phases, in the order a deployment advances through them ("failed" is apart).
PHASE_PENDING = "pending"
PHASE_ADMITTED = "admitted"
PHASE_PLACED = "placed"
PHASE_RUNNING = "running"
PHASE_FAILED = "failed"
PHASE_ORDER = (PHASE_PENDING, PHASE_ADMITTED, PHASE_PLACED, PHASE_RUNNING)

REASON_NONE = ""
REASON_INSUFFICIENT_QUOTA = "insufficient_quota"
REASON_INSUFFICIENT_CAPACITY = "insufficient_capacity"
REASON_DISABLED = "disabled"
# Its cluster's agent runs read-only and creates nothing: admission admits no replica beyond
# what its pods already are, so it reserves nothing (docs/admission.md "Replicas no agent
# creates"); a read view also says it for an admitted deployment the agent never applied.
REASON_CLUSTER_READ_ONLY = "cluster_read_only"
# An observed (adopted, not handed over) deployment wants more replicas than its pods are: the
# agent never writes it, so admission reserves nothing for them (docs/admission.md).
REASON_OBSERVED = "observed"
# The agent rejected the current generation: derived on read from the rejection (views), the
# way the phase is, never stored as an admission decision.
REASON_REJECTED = "rejected"
# The cluster is cordoned (whole or for the deployment's device class): no new demand there.
REASON_CORDONED = "cordoned"
# Admitted replicas taken back for a higher-priority deployment on the same cluster (decided by
# admission when the hub runs with --preemption; docs/admission.md "Priority and preemption").
REASON_PREEMPTED = "preempted"

# Workload priority classes, lowest first (docs/admission.md): higher ones are admitted first
# and, with preemption on, may take lower ones' devices.
PRIORITIES = ("low", "normal", "high", "critical")
PRIORITY_DEFAULT = "normal"


_RANKS = {priority: rank for rank, priority in enumerate(PRIORITIES)}


def priority_rank(priority: str) -> int:
    """The class's place in PRIORITIES ("" reads as the default)."""
    return _RANKS[priority or PRIORITY_DEFAULT]


TOPOLOGIES = ("", "node", "nvlink_domain")
