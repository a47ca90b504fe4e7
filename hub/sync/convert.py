"""Validate and convert stream messages: agent -> hub into domain values, hub -> agent from them.

Every field of every incoming message is checked here, before anything reaches the service:
a bad one raises hub.errors.InvalidArgument naming its path ("observations.deployments[2].
replicas[0].name") and what is accepted, and the whole message is refused, so a malformed
message changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable

from hub import errors, wire
from hub.model import (
    AllocationObservation,
    AppliedObject,
    Deployment,
    DeploymentObservation,
    Device,
    DiscoveredObservation,
    DiscoveredService,
    NodeObservation,
    ObservationBatch,
    Rejection,
    ReplicaObservation,
    StatusReport,
)
from wingsmith.v1 import resources_pb2, sync_pb2

DEPLOYMENT_ID = re.compile(r"^dep_[0-9a-f]{16}\Z")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DIGEST = re.compile(r"^svg_[0-9a-f]{16}\Z")
DEVICE_CLASS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
PRINTABLE = re.compile(r"^[\x20-\x7e]*\Z")
# A device UUID as NVML reports it: "GPU-" or "MIG-" and a UUID in 8-4-4-4-12 hex digits.
# Nothing around it (no spaces), no '/', no '..': it names a row, a metric label and a DGD
# field, and is compared byte for byte with the kubelet's ids.
_NVML_UUID = (
    r"(?:GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
DEVICE_UUID = re.compile(rf"^{_NVML_UUID}\Z")
# A device id as the kubelet lists it for a pod (docs/kubelet.md): a device UUID, a
# time-sliced replica of one (`<uuid>::<n>`), or a MIG device in the pre-R470 form
# `MIG-GPU-<uuid>/<gi>/<ci>`.
DEVICE_ID = re.compile(
    rf"^(?:{_NVML_UUID}(?:::[0-9]{{1,4}})?|MIG-GPU-[0-9a-fA-F-]{{36}}/[0-9]{{1,3}}/[0-9]{{1,3}})\Z"
)
DEVICE_UUID_RULE = "an NVML device UUID: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx or MIG-..."
# A pod name, or host:pid for an agent outside Kubernetes.
# "", "adapter", or "autoscaler:" and a field manager's name (printable, no spaces).
REPLICAS_OWNER = re.compile(r"^(|adapter|autoscaler:[\x21-\x7e]{1,128})\Z")
# A Kubernetes API version ("v1beta1", "v1alpha1", "v1"), or "none".
DGD_VERSION = re.compile(r"^(none|v[0-9]+((alpha|beta)[0-9]+)?)\Z")
AGENT_INSTANCE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?\Z")
ROLES = ("", "worker", "prefill", "decode")
MAX_PER_BATCH = 10_000
MAX_REPLICAS = 10_000
MAX_DEVICES_PER_NODE = 1024
MAX_ARGS = 256
# An applied object's body (a DGD is a few KiB; the agent truncates above this).
MAX_APPLIED_BYTES = 256 * 1024
APPLIED_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
# Device memory above 1 PiB is no GPU's: such a value (2^64-1, say) is refused here, with its
# field named, rather than failing the database write that would carry it (SQLite integers
# are signed 64-bit).
MAX_MEMORY_BYTES = 2**50


class Checker:
    """Field checks that know their path; `now_ns` bounds observation times."""

    def __init__(self, *, now_ns: int, max_skew_ns: int) -> None:
        self.now_ns = now_ns
        self.max_skew_ns = max_skew_ns

    def text(self, value: str, path: str, *, limit: int, required: bool = False) -> str:
        if required and not value:
            raise errors.InvalidArgument(path, "required")
        if not _printable(value, limit):
            raise errors.InvalidArgument(path, f"at most {limit} printable ASCII characters")
        return value

    def pattern(
        self, value: str, pattern: re.Pattern[str], path: str, *, what: str, limit: int = 253
    ) -> str:
        if len(value) > limit or not pattern.match(value):
            raise errors.InvalidArgument(path, f"invalid {what}: {value[:80]!r}")
        return value

    def count(self, value: int, path: str, *, limit: int) -> int:
        if not 0 <= value <= limit:
            raise errors.InvalidArgument(path, f"must be between 0 and {limit}")
        return value

    def observed_at(self, value: int, path: str) -> int:
        if value <= 0:
            raise errors.InvalidArgument(path, "required: the observation time in Unix nanoseconds")
        if value > self.now_ns + self.max_skew_ns:
            raise errors.InvalidArgument(
                path, "is in the future beyond the allowed clock skew: check the agent's clock"
            )
        return value

    def unique(self, keys: Iterable[object], path: str, *, what: str) -> None:
        seen: set[object] = set()
        for key in keys:
            if key in seen:
                raise errors.InvalidArgument(path, f"duplicate {what} {key!r}")
            seen.add(key)


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
            _deployment(d, check, f"{path}.deployments[{i}]")
            for i, d in enumerate(message.deployments)
        ),
        nodes=tuple(_node(n, check, f"{path}.nodes[{i}]") for i, n in enumerate(message.nodes)),
        discovered=tuple(
            _discovered(d, check, f"{path}.discovered[{i}]")
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


def _deployment(
    message: sync_pb2.DeploymentObservation, check: Checker, path: str
) -> DeploymentObservation:
    check.pattern(
        message.deployment_id, DEPLOYMENT_ID, f"{path}.deployment_id", what="deployment id"
    )
    observe_ns = check.observed_at(message.observe_unix_nanos, f"{path}.observe_unix_nanos")
    if len(message.replicas) > MAX_REPLICAS:
        raise errors.InvalidArgument(f"{path}.replicas", f"at most {MAX_REPLICAS}")
    check.unique(((r.namespace, r.name) for r in message.replicas), f"{path}.replicas", what="pod")
    if message.absent and message.replicas:
        raise errors.InvalidArgument(f"{path}.replicas", "must be empty when absent is true")
    status = None
    if message.HasField("status"):
        s = message.status
        sp = f"{path}.status"
        status = StatusReport(
            phase=check.text(s.phase, f"{sp}.phase", limit=64),
            reason=check.text(s.reason, f"{sp}.reason", limit=128),
            message=check.text(s.message, f"{sp}.message", limit=2048),
            ready_replicas=check.count(
                s.ready_replicas, f"{sp}.ready_replicas", limit=MAX_REPLICAS
            ),
            applied_replicas=check.count(
                s.desired_replicas, f"{sp}.desired_replicas", limit=MAX_REPLICAS
            ),
            applied_generation=check.count(
                s.applied_generation, f"{sp}.applied_generation", limit=2**62
            ),
            replicas_owner=check.pattern(
                s.replicas_owner,
                REPLICAS_OWNER,
                f"{sp}.replicas_owner",
                what='replicas owner ("", "adapter" or "autoscaler:<field manager>")',
                limit=160,
            ),
            observe_ns=observe_ns,
            absent=message.absent,
        )
    return DeploymentObservation(
        deployment_id=message.deployment_id,
        observe_ns=observe_ns,
        status=status,
        replicas=tuple(
            _replica(r, check, f"{path}.replicas", i) for i, r in enumerate(message.replicas)
        ),
        absent=message.absent,
        live_args=_args(message.live_args, check, f"{path}.live_args"),
        applied=(
            _applied(message, check, f"{path}.applied", observe_ns)
            if message.HasField("applied")
            else None
        ),
    )


def _applied(
    message: sync_pb2.DeploymentObservation, check: Checker, path: str, observe_ns: int
) -> AppliedObject:
    """An agent's report of the object it applied: bounded, well-formed, and its digest the
    hash of its body, since the hub shows it as what runs (hostile input is refused whole)."""
    a = message.applied
    if message.absent:
        raise errors.InvalidArgument(path, "must be unset when absent is true")
    check.text(a.api_version, f"{path}.api_version", limit=253, required=True)
    check.text(a.kind, f"{path}.kind", limit=63, required=True)
    check.pattern(a.namespace, DNS_LABEL, f"{path}.namespace", what="namespace", limit=63)
    check.pattern(a.name, DNS_SUBDOMAIN, f"{path}.name", what="name")
    check.pattern(a.digest, APPLIED_DIGEST, f"{path}.digest", what="digest", limit=71)
    encoded = a.body.encode()
    if len(encoded) > MAX_APPLIED_BYTES:
        raise errors.InvalidArgument(
            f"{path}.body", f"at most {MAX_APPLIED_BYTES} bytes (send truncated instead)"
        )
    if a.truncated:
        if a.body:
            raise errors.InvalidArgument(f"{path}.body", "must be empty when truncated is true")
    else:
        try:
            parsed = json.loads(a.body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise errors.InvalidArgument(f"{path}.body", "must be a JSON object")
        if "sha256:" + hashlib.sha256(encoded).hexdigest() != a.digest:
            raise errors.InvalidArgument(f"{path}.digest", "is not the sha256 of the body")
    return AppliedObject(
        deployment_id=message.deployment_id,
        api_version=a.api_version,
        kind=a.kind,
        namespace=a.namespace,
        name=a.name,
        digest=a.digest,
        body=a.body,
        truncated=a.truncated,
        observe_ns=observe_ns,
    )


def _args(values: Iterable[str], check: Checker, path: str) -> tuple[str, ...]:
    args = tuple(values)
    if len(args) > MAX_ARGS:
        raise errors.InvalidArgument(path, f"at most {MAX_ARGS} arguments")
    for i, arg in enumerate(args):
        if len(arg) > 4096 or "\x00" in arg:
            raise errors.InvalidArgument(f"{path}[{i}]", "at most 4096 characters, no NUL")
    return args


def _discovered(
    message: sync_pb2.DiscoveredObservation, check: Checker, path: str
) -> DiscoveredObservation:
    check.pattern(message.namespace, DNS_LABEL, f"{path}.namespace", what="namespace", limit=63)
    check.pattern(message.name, DNS_SUBDOMAIN, f"{path}.name", what="DGD name")
    observe_ns = check.observed_at(message.observe_unix_nanos, f"{path}.observe_unix_nanos")
    if message.absent:
        return DiscoveredObservation(
            namespace=message.namespace, name=message.name, observe_ns=observe_ns, absent=True
        )
    if len(message.services) > 25:
        raise errors.InvalidArgument(f"{path}.services", "at most 25 (Dynamo's own limit)")
    if message.device_class:
        check.pattern(
            message.device_class,
            DEVICE_CLASS,
            f"{path}.device_class",
            what="device class",
            limit=63,
        )
    if len(message.pods) > MAX_REPLICAS:
        raise errors.InvalidArgument(f"{path}.pods", f"at most {MAX_REPLICAS}")
    return DiscoveredObservation(
        namespace=message.namespace,
        name=message.name,
        observe_ns=observe_ns,
        backend_framework=check.text(
            message.backend_framework, f"{path}.backend_framework", limit=32
        ),
        services=tuple(
            _discovered_service(s, check, f"{path}.services[{i}]")
            for i, s in enumerate(message.services)
        ),
        replicas=check.count(message.replicas, f"{path}.replicas", limit=MAX_REPLICAS),
        ready_replicas=check.count(
            message.ready_replicas, f"{path}.ready_replicas", limit=MAX_REPLICAS
        ),
        imported_args=_args(message.imported_args, check, f"{path}.imported_args"),
        engine_version=check.text(message.engine_version, f"{path}.engine_version", limit=64),
        device_class=message.device_class,
        devices_per_replica=check.count(
            message.devices_per_replica, f"{path}.devices_per_replica", limit=4096
        ),
        pods=tuple(_replica(p, check, f"{path}.pods", i) for i, p in enumerate(message.pods)),
    )


def _discovered_service(
    message: resources_pb2.DiscoveredService, check: Checker, path: str
) -> DiscoveredService:
    return DiscoveredService(
        name=check.text(message.name, f"{path}.name", limit=63, required=True),
        component_type=check.text(message.component_type, f"{path}.component_type", limit=32),
        sub_component_type=check.text(
            message.sub_component_type, f"{path}.sub_component_type", limit=32
        ),
        replicas=check.count(message.replicas, f"{path}.replicas", limit=MAX_REPLICAS),
        ready_replicas=check.count(
            message.ready_replicas, f"{path}.ready_replicas", limit=MAX_REPLICAS
        ),
        gpus_per_pod=check.count(message.gpus_per_pod, f"{path}.gpus_per_pod", limit=1024),
        image=check.text(message.image, f"{path}.image", limit=512),
        args=_args(message.args, check, f"{path}.args"),
    )


def _replica(
    message: sync_pb2.ReplicaReport, check: Checker, list_path: str, index: int
) -> ReplicaObservation:
    """Hot path (every pod of every report): one expression; error paths only on failure."""
    name, namespace, node, digest = (
        message.name,
        message.namespace,
        message.node_id,
        message.serving_digest,
    )
    version, role = message.engine_version, message.role
    if (
        len(name) <= 253
        and DNS_SUBDOMAIN.match(name)
        and len(namespace) <= 63
        and DNS_LABEL.match(namespace)
        and (not node or (len(node) <= 253 and DNS_SUBDOMAIN.match(node)))
        and (not digest or DIGEST.match(digest))
        and role in ROLES
        and (node or not message.ready)
        and _printable(version, 64)
    ):
        return ReplicaObservation(name, namespace, node, message.ready, digest, version, role)
    return _replica_checked(message, check, f"{list_path}[{index}]")


def _replica_checked(
    message: sync_pb2.ReplicaReport, check: Checker, path: str
) -> ReplicaObservation:
    check.pattern(message.name, DNS_SUBDOMAIN, f"{path}.name", what="pod name")
    check.pattern(message.namespace, DNS_LABEL, f"{path}.namespace", what="namespace", limit=63)
    if message.node_id:
        check.pattern(message.node_id, DNS_SUBDOMAIN, f"{path}.node_id", what="node name")
    if message.serving_digest:
        check.pattern(
            message.serving_digest, DIGEST, f"{path}.serving_digest", what="serving digest"
        )
    if message.role not in ROLES:
        raise errors.InvalidArgument(
            f"{path}.role", f"expected one of: {', '.join(r for r in ROLES if r)}"
        )
    if message.ready and not message.node_id:
        raise errors.InvalidArgument(f"{path}.node_id", "a ready replica must name its node")
    return ReplicaObservation(
        name=message.name,
        namespace=message.namespace,
        node_id=message.node_id,
        ready=message.ready,
        serving_digest=message.serving_digest,
        engine_version=check.text(message.engine_version, f"{path}.engine_version", limit=64),
        role=message.role,
    )


def _node(message: sync_pb2.NodeObservation, check: Checker, path: str) -> NodeObservation:
    check.pattern(message.node_id, DNS_SUBDOMAIN, f"{path}.node_id", what="node name")
    observe_ns = check.observed_at(message.observe_unix_nanos, f"{path}.observe_unix_nanos")
    if len(message.devices) > MAX_DEVICES_PER_NODE:
        raise errors.InvalidArgument(f"{path}.devices", f"at most {MAX_DEVICES_PER_NODE}")
    check.unique((d.uuid for d in message.devices), f"{path}.devices", what="device")
    check.unique(
        ((a.namespace, a.pod_name) for a in message.allocations), f"{path}.allocations", what="pod"
    )
    if message.absent and (message.devices or message.allocations):
        raise errors.InvalidArgument(path, "an absent node carries no devices or allocations")
    return NodeObservation(
        node_id=message.node_id,
        observe_ns=observe_ns,
        # Paths are built only for an item that fails (the hot path of ingest).
        devices=tuple(_device(d, check, path, i) for i, d in enumerate(message.devices)),
        allocations=tuple(
            _allocation(a, check, path, i) for i, a in enumerate(message.allocations)
        ),
        absent=message.absent,
        inventory_error=check.text(message.inventory_error, f"{path}.inventory_error", limit=2048),
    )


def _printable(value: str, limit: int) -> bool:
    return len(value) <= limit and value.isascii() and value.isprintable()


def _device(message: resources_pb2.Device, check: Checker, node_path: str, index: int) -> Device:
    """The hot path of ingest (every device of every node report): check every field in one
    expression, and build error paths only for a device that fails (in _device_checked)."""
    uuid, name, pci = message.uuid, message.name, message.pci_bus_id
    device_class, reason = message.device_class, message.health_reason
    domain, parent = message.nvlink_domain, message.parent_uuid
    if (
        DEVICE_UUID.match(uuid)
        and message.memory_bytes <= MAX_MEMORY_BYTES
        and _printable(name, 128)
        and _printable(pci, 64)
        and len(device_class) <= 63
        and DEVICE_CLASS.match(device_class)
        and _printable(reason, 512)
        and _printable(domain, 128)
        and (not parent or DEVICE_UUID.match(parent))
    ):
        return Device(
            uuid,
            name,
            message.memory_bytes,
            pci,
            device_class,
            message.healthy,
            reason,
            message.verified,
            domain,
            parent,
        )
    return _device_checked(message, check, f"{node_path}.devices[{index}]")


def _device_checked(message: resources_pb2.Device, check: Checker, path: str) -> Device:
    return Device(
        uuid=_device_uuid(message.uuid, f"{path}.uuid"),
        name=check.text(message.name, f"{path}.name", limit=128),
        memory_bytes=check.count(
            message.memory_bytes, f"{path}.memory_bytes", limit=MAX_MEMORY_BYTES
        ),
        pci_bus_id=check.text(message.pci_bus_id, f"{path}.pci_bus_id", limit=64),
        device_class=check.pattern(
            message.device_class,
            DEVICE_CLASS,
            f"{path}.device_class",
            what="device class",
            limit=63,
        ),
        healthy=message.healthy,
        health_reason=check.text(message.health_reason, f"{path}.health_reason", limit=512),
        verified=message.verified,
        nvlink_domain=check.text(message.nvlink_domain, f"{path}.nvlink_domain", limit=128),
        parent_uuid=_device_uuid(message.parent_uuid, f"{path}.parent_uuid", required=False),
    )


def _device_uuid(value: str, path: str, *, required: bool = True) -> str:
    if not value and not required:
        return value
    if not value:
        raise errors.InvalidArgument(path, f"required: {DEVICE_UUID_RULE}")
    if not DEVICE_UUID.match(value):
        raise errors.InvalidArgument(path, f"invalid {value[:80]!r}: {DEVICE_UUID_RULE}")
    return value


def _allocation(
    message: sync_pb2.AllocationReport, check: Checker, node_path: str, index: int
) -> AllocationObservation:
    """Hot path (every allocation of every node report): one expression, then the checked
    version only for a failure, to name the field."""
    pod, namespace, ids = message.pod_name, message.namespace, tuple(message.device_ids)
    if (
        len(pod) <= 253
        and DNS_SUBDOMAIN.match(pod)
        and len(namespace) <= 63
        and DNS_LABEL.match(namespace)
        and ids
        and len(set(ids)) == len(ids)
        and all(DEVICE_ID.match(d) for d in ids)
        and _printable(message.resource_name, 253)
    ):
        return AllocationObservation(pod, namespace, ids, message.resource_name)
    return _allocation_checked(message, check, f"{node_path}.allocations[{index}]")


def _allocation_checked(
    message: sync_pb2.AllocationReport, check: Checker, path: str
) -> AllocationObservation:
    check.pattern(message.pod_name, DNS_SUBDOMAIN, f"{path}.pod_name", what="pod name")
    check.pattern(message.namespace, DNS_LABEL, f"{path}.namespace", what="namespace", limit=63)
    if not message.device_ids:
        raise errors.InvalidArgument(f"{path}.device_ids", "required: at least one device id")
    check.unique(message.device_ids, f"{path}.device_ids", what="device id")
    for i, device_id in enumerate(message.device_ids):
        if not DEVICE_ID.match(device_id):
            raise errors.InvalidArgument(
                f"{path}.device_ids[{i}]",
                f"invalid {device_id[:80]!r}: {DEVICE_UUID_RULE}, optionally '::<n>' for a"
                " time-sliced replica (or MIG-GPU-<uuid>/<gi>/<ci>)",
            )
    return AllocationObservation(
        pod_name=message.pod_name,
        namespace=message.namespace,
        device_ids=tuple(message.device_ids),
        resource_name=check.text(message.resource_name, f"{path}.resource_name", limit=253),
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
