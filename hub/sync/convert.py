"""Validate and convert stream messages: agent -> hub into domain values, hub -> agent from them.

Every field of every incoming message is checked, before anything reaches the service: a bad
one raises hub.errors.InvalidArgument naming its path ("observations.deployments[2].
replicas[0].name") and what is accepted, and the whole message is refused, so a malformed
message changes nothing. This module reads the stream's own messages (hello, heartbeat,
reject, cluster info, the observation batch's envelope) and builds the agent's deployment
spec; the batch's records are `hub.sync.observed`'s, the field rules `hub.sync.fields`'.
"""

from __future__ import annotations

from hub import errors, wire
from hub.model import Deployment, ObservationBatch, Rejection
from hub.sync import observed
from hub.sync.fields import (
    AGENT_INSTANCE,
    DEPLOYMENT_ID,
    DGD_VERSION,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    MAX_PER_BATCH,
    Checker,
)
from wingsmith.v1 import sync_pb2

# What the stream session calls (hub/sync/session.py), Checker included: it builds one per
# message with the hub's clock.
__all__ = [
    "Checker",
    "cluster_info",
    "deployment_spec",
    "heartbeat",
    "hello",
    "observations",
    "reject",
]


def cluster_info(message: sync_pb2.ClusterInfo) -> str:
    """The reported DGD version (v1beta1, v1alpha1, ... or none), checked."""
    check = Checker(now_ns=0, max_skew_ns=0)
    return check.pattern(
        message.dgd_version,
        DGD_VERSION,
        "cluster_info.dgd_version",
        what="DGD API version (v1beta1, v1alpha1 or none)",
        limit=32,
    )


def hello(message: sync_pb2.Hello) -> sync_pb2.Hello:
    check = Checker(now_ns=0, max_skew_ns=0)
    check.pattern(message.cluster_id, DNS_LABEL, "hello.cluster_id", what="cluster id", limit=63)
    check.text(message.agent_version, "hello.agent_version", limit=64)
    check.text(message.store_epoch, "hello.store_epoch", limit=64)
    if message.agent_instance:
        check.pattern(
            message.agent_instance,
            AGENT_INSTANCE,
            "hello.agent_instance",
            what="agent instance (a pod name, or host:pid)",
        )
    if message.node_name:
        check.pattern(message.node_name, DNS_SUBDOMAIN, "hello.node_name", what="node name")
    if message.applied_revision < 0:
        raise errors.InvalidArgument("hello.applied_revision", "must be >= 0")
    if message.leader_term < 0:
        raise errors.InvalidArgument("hello.leader_term", "must be >= 0 (0: not leading)")
    return message


def heartbeat(message: sync_pb2.Heartbeat, check: Checker) -> None:
    """A heartbeat carries only the agent's clock: it must be set and not in the future."""
    if message.sent_unix_ms <= 0:
        raise errors.InvalidArgument("heartbeat.sent_unix_ms", "required: Unix milliseconds")
    if message.sent_unix_ms * 1_000_000 > check.now_ns + check.max_skew_ns:
        raise errors.InvalidArgument(
            "heartbeat.sent_unix_ms",
            "is in the future beyond the allowed clock skew: check the agent's clock",
        )


def reject(message: sync_pb2.Reject) -> tuple[str, Rejection]:
    check = Checker(now_ns=0, max_skew_ns=0)
    check.pattern(
        message.deployment_id, DEPLOYMENT_ID, "reject.deployment_id", what="deployment id"
    )
    if message.revision <= 0 or message.generation <= 0:
        raise errors.InvalidArgument("reject", "revision and generation must be > 0")
    error = check.text(message.error, "reject.error", limit=4096, required=True)
    return message.deployment_id, Rejection(message.revision, message.generation, error)


def observations(message: sync_pb2.ObservationBatch, check: Checker) -> ObservationBatch:
    path = "observations"
    if message.seq <= 0:
        raise errors.InvalidArgument(f"{path}.seq", "must be > 0 and increase with every batch")
    if len(message.deployments) + len(message.nodes) + len(message.discovered) > MAX_PER_BATCH:
        raise errors.InvalidArgument(path, f"at most {MAX_PER_BATCH} records per batch")
    check.unique(
        (d.deployment_id for d in message.deployments), f"{path}.deployments", what="deployment"
    )
    check.unique((n.node_id for n in message.nodes), f"{path}.nodes", what="node")
    check.unique(
        ((d.namespace, d.name) for d in message.discovered), f"{path}.discovered", what="DGD"
    )
    return ObservationBatch(
        seq=message.seq,
        deployments=tuple(
            observed.deployment(d, check, f"{path}.deployments[{i}]")
            for i, d in enumerate(message.deployments)
        ),
        nodes=tuple(
            observed.node(n, check, f"{path}.nodes[{i}]") for i, n in enumerate(message.nodes)
        ),
        discovered=tuple(
            observed.discovered(d, check, f"{path}.discovered[{i}]")
            for i, d in enumerate(message.discovered)
        ),
        discovered_complete_ns=(
            check.observed_at(
                message.discovered_complete_unix_nanos, f"{path}.discovered_complete_unix_nanos"
            )
            if message.discovered_complete_unix_nanos
            else 0
        ),
    )


# -- hub -> agent -------------------------------------------------------------------------------


def deployment_spec(d: Deployment) -> sync_pb2.DeploymentSpec:
    """The agent's view of a deployment: the fields of the same name copied (wire.message_from),
    the rest derived here."""
    spec: sync_pb2.DeploymentSpec = wire.message_from(
        sync_pb2.DeploymentSpec,
        d,
        name=d.name,
        replicas=d.admitted_replicas if d.enabled else 0,
        admitted=d.admitted_replicas > 0 or d.desired_replicas == 0,
        serving=wire.serving_to_proto(d.serving),
        adopted=d.adopted,
    )
    return spec
