"""The records of an agent's observation batch, checked field by field into the hub's
observation values: deployments (status, pods, the applied object), discovered DGDs, and nodes
(devices, allocations). A bad field raises hub.errors.InvalidArgument naming its path; the
node, deployment, per-pod, per-device and per-allocation checks are ingest's hot path, one
expression each, paths built only for a record that fails, and a device reported as before is
taken from `DEVICES` (a bounded cache of validated devices by their message's bytes) rather
than checked again. Called by `hub.sync.convert.observations`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

from hub import errors, wire
from hub.model import (
    AllocationObservation,
    AppliedObject,
    DeploymentObservation,
    Device,
    DiscoveredObservation,
    DiscoveredService,
    NodeObservation,
    ReplicaObservation,
    StatusReport,
)
from hub.sync.fields import (
    APPLIED_DIGEST,
    DEPLOYMENT_ID,
    DEVICE_CLASS,
    DEVICE_ID,
    DEVICE_UUID,
    DEVICE_UUID_RULE,
    DIGEST,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    MAX_APPLIED_BYTES,
    MAX_ARGS,
    MAX_DEVICES_PER_NODE,
    MAX_MEMORY_BYTES,
    MAX_REPLICAS,
    REPLICAS_OWNER,
    ROLES,
    Checker,
    printable,
)
from hub.sync.memo import Memo
from wingsmith.v1 import resources_pb2, sync_pb2


def deployment(
    message: sync_pb2.DeploymentObservation, check: Checker, path: str
) -> DeploymentObservation:
    """Hot path (every deployment report): each check a plain expression, its path built and
    the Checker called only for a value that fails, to name it."""
    deployment_id, observe_ns = message.deployment_id, message.observe_unix_nanos
    replicas = message.replicas
    if len(deployment_id) > 253 or not DEPLOYMENT_ID.match(deployment_id):
        check.pattern(deployment_id, DEPLOYMENT_ID, f"{path}.deployment_id", what="deployment id")
    if not 0 < observe_ns <= check.now_ns + check.max_skew_ns:
        check.observed_at(observe_ns, f"{path}.observe_unix_nanos")
    if len(replicas) > MAX_REPLICAS:
        raise errors.InvalidArgument(f"{path}.replicas", f"at most {MAX_REPLICAS}")
    if len({(r.namespace, r.name) for r in replicas}) != len(replicas):
        check.unique(((r.namespace, r.name) for r in replicas), f"{path}.replicas", what="pod")
    if message.absent and replicas:
        raise errors.InvalidArgument(f"{path}.replicas", "must be empty when absent is true")
    status = (
        _status(message.status, check, f"{path}.status", observe_ns, message.absent)
        if message.HasField("status")
        else None
    )
    live_args = tuple(message.live_args)
    listed = f"{path}.replicas"
    return DeploymentObservation(
        deployment_id=deployment_id,
        observe_ns=observe_ns,
        status=status,
        replicas=tuple([_replica(r, check, listed, i) for i, r in enumerate(replicas)]),
        absent=message.absent,
        live_args=_args(live_args, check, f"{path}.live_args") if live_args else (),
        applied=(
            _applied(message, check, f"{path}.applied", observe_ns)
            if message.HasField("applied")
            else None
        ),
    )


def _status(
    s: sync_pb2.DeploymentStatusReport, check: Checker, sp: str, observe_ns: int, absent: bool
) -> StatusReport:
    owner = s.replicas_owner
    if not (
        printable(s.phase, 64)
        and printable(s.reason, 128)
        and printable(s.message, 2048)
        and 0 <= s.ready_replicas <= MAX_REPLICAS
        and 0 <= s.desired_replicas <= MAX_REPLICAS
        and 0 <= s.applied_generation <= 2**62
        and len(owner) <= 160
        and REPLICAS_OWNER.match(owner)
    ):
        # Name the first field that fails.
        check.text(s.phase, f"{sp}.phase", limit=64)
        check.text(s.reason, f"{sp}.reason", limit=128)
        check.text(s.message, f"{sp}.message", limit=2048)
        check.count(s.ready_replicas, f"{sp}.ready_replicas", limit=MAX_REPLICAS)
        check.count(s.desired_replicas, f"{sp}.desired_replicas", limit=MAX_REPLICAS)
        check.count(s.applied_generation, f"{sp}.applied_generation", limit=2**62)
        check.pattern(
            owner,
            REPLICAS_OWNER,
            f"{sp}.replicas_owner",
            what='replicas owner ("", "adapter" or "autoscaler:<field manager>")',
            limit=160,
        )
    return StatusReport(
        phase=s.phase,
        reason=s.reason,
        message=s.message,
        ready_replicas=s.ready_replicas,
        applied_replicas=s.desired_replicas,
        applied_generation=s.applied_generation,
        replicas_owner=owner,
        observe_ns=observe_ns,
        absent=absent,
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
    body = a.body
    # A body checked before under this digest is not parsed and hashed again (`BODIES`).
    if a.truncated or BODIES.get(a.digest) != body:
        _check_body(a, path)
    return AppliedObject(
        deployment_id=message.deployment_id,
        api_version=a.api_version,
        kind=a.kind,
        namespace=a.namespace,
        name=a.name,
        digest=a.digest,
        body=body,
        truncated=a.truncated,
        observe_ns=observe_ns,
    )


def _check_body(a: sync_pb2.AppliedObjectReport, path: str) -> None:
    """The body within its bound, a JSON object, its digest its sha256; then kept in
    `BODIES`. Empty when truncated."""
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
        BODIES.put(a.digest, a.body, weight=len(encoded))


def _args(values: Iterable[str], check: Checker, path: str) -> tuple[str, ...]:
    args = tuple(values)
    if len(args) > MAX_ARGS:
        raise errors.InvalidArgument(path, f"at most {MAX_ARGS} arguments")
    for i, arg in enumerate(args):
        if len(arg) > 4096 or "\x00" in arg:
            raise errors.InvalidArgument(f"{path}[{i}]", "at most 4096 characters, no NUL")
    return args


def discovered(
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
    service: DiscoveredService = wire.record_from(DiscoveredService, message)
    check.text(service.name, f"{path}.name", limit=63, required=True)
    check.text(service.component_type, f"{path}.component_type", limit=32)
    check.text(service.sub_component_type, f"{path}.sub_component_type", limit=32)
    check.count(service.replicas, f"{path}.replicas", limit=MAX_REPLICAS)
    check.count(service.ready_replicas, f"{path}.ready_replicas", limit=MAX_REPLICAS)
    check.count(service.gpus_per_pod, f"{path}.gpus_per_pod", limit=1024)
    check.text(service.image, f"{path}.image", limit=512)
    _args(service.args, check, f"{path}.args")
    return service


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
        and printable(version, 64)
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


def node(message: sync_pb2.NodeObservation, check: Checker, path: str) -> NodeObservation:
    """Hot path (every node report): each check a plain expression, its path built and the
    Checker called only for a value that fails, to name it."""
    node_id, observe_ns = message.node_id, message.observe_unix_nanos
    devices, allocations = message.devices, message.allocations
    if len(node_id) > 253 or not DNS_SUBDOMAIN.match(node_id):
        check.pattern(node_id, DNS_SUBDOMAIN, f"{path}.node_id", what="node name")
    if not 0 < observe_ns <= check.now_ns + check.max_skew_ns:
        check.observed_at(observe_ns, f"{path}.observe_unix_nanos")
    if len(devices) > MAX_DEVICES_PER_NODE:
        raise errors.InvalidArgument(f"{path}.devices", f"at most {MAX_DEVICES_PER_NODE}")
    if len({d.uuid for d in devices}) != len(devices):
        check.unique((d.uuid for d in devices), f"{path}.devices", what="device")
    if allocations and len({(a.namespace, a.pod_name) for a in allocations}) != len(allocations):
        check.unique(
            ((a.namespace, a.pod_name) for a in allocations), f"{path}.allocations", what="pod"
        )
    if message.absent and (devices or allocations):
        raise errors.InvalidArgument(path, "an absent node carries no devices or allocations")
    inventory_error = message.inventory_error
    if inventory_error and not printable(inventory_error, 2048):
        check.text(inventory_error, f"{path}.inventory_error", limit=2048)
    return NodeObservation(
        node_id,
        observe_ns,
        # Paths are built only for an item that fails (the hot path of ingest).
        tuple([DEVICES.device(d, check, path, i) for i, d in enumerate(devices)]),
        tuple([_allocation(a, check, path, i) for i, a in enumerate(allocations)]),
        message.absent,
        inventory_error,
    )


class DeviceCache:
    """Validated devices by their message's serialized bytes (a `Memo` of at most `limit`
    devices), so that a device reported as it was last time (almost every device of a node
    report: a node is reported for its pods) is not converted and checked again. A device's
    validation is a pure function of its message (no clock, no cluster, no path on success),
    and equal bytes are an equal message. Only a device that passed every check is kept."""

    def __init__(self, limit: int, *, draw: Callable[[int], int] | None = None) -> None:
        self._memo: Memo[bytes, Device] = Memo(limit, draw=draw)

    def device(
        self, message: resources_pb2.Device, check: Checker, node_path: str, index: int
    ) -> Device:
        """The device of `message`, validated (raises as `_device` does)."""
        key = message.SerializeToString()
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        device = _device(message, check, node_path, index)
        self._memo.put(key, device)
        return device

    def __len__(self) -> int:
        return len(self._memo)


def _device(message: resources_pb2.Device, check: Checker, node_path: str, index: int) -> Device:
    """The hot path of ingest (every device of every node report): the fields copied by hand,
    one expression checks them all, and error paths are built only for a device that fails
    (in _device_checked). By hand, not through `wire.record_from`: the converter's generic
    loop cost 2.7 us a device, more than all the checks (docs/benchmark.md "Ingest and reads
    at scale"); a test holds the two to the same result for every field of the message."""
    device = Device(
        message.uuid,
        message.name,
        message.memory_bytes,
        message.pci_bus_id,
        message.device_class,
        message.healthy,
        message.health_reason,
        message.verified,
        message.nvlink_domain,
        message.parent_uuid,
    )
    name, pci, reason, domain, parent = (
        device.name,
        device.pci_bus_id,
        device.health_reason,
        device.nvlink_domain,
        device.parent_uuid,
    )
    # The four free-text fields are printable ASCII (fields.printable) if their concatenation
    # is: one pair of string scans instead of four calls.
    text = name + pci + reason + domain
    if (
        DEVICE_UUID.match(device.uuid)
        and device.memory_bytes <= MAX_MEMORY_BYTES
        and len(name) <= 128
        and len(pci) <= 64
        and len(reason) <= 512
        and len(domain) <= 128
        and text.isascii()
        and text.isprintable()
        and len(device.device_class) <= 63
        and DEVICE_CLASS.match(device.device_class)
        and (not parent or DEVICE_UUID.match(parent))
    ):
        return device
    return _device_checked(device, check, f"{node_path}.devices[{index}]")


def _device_checked(device: Device, check: Checker, path: str) -> Device:
    """Raise naming the first field of `device` that breaks its rule."""
    _device_uuid(device.uuid, f"{path}.uuid")
    check.text(device.name, f"{path}.name", limit=128)
    check.count(device.memory_bytes, f"{path}.memory_bytes", limit=MAX_MEMORY_BYTES)
    check.text(device.pci_bus_id, f"{path}.pci_bus_id", limit=64)
    check.pattern(
        device.device_class, DEVICE_CLASS, f"{path}.device_class", what="device class", limit=63
    )
    check.text(device.health_reason, f"{path}.health_reason", limit=512)
    check.text(device.nvlink_domain, f"{path}.nvlink_domain", limit=128)
    _device_uuid(device.parent_uuid, f"{path}.parent_uuid", required=False)
    return device


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
        and printable(message.resource_name, 253)
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


# Every device of a fleet of 4,096 clusters of 64 GPUs. About 0.7 KiB a device (its message's
# bytes and the validated record), so at most about 180 MiB, held only as the fleet reports
# that many devices: 2,000 such clusters hold 90 MiB. At half that limit a fleet of 2,000
# clusters found a fifth of its devices here, and each miss cost its ingest far more than the
# check itself: 16.1 -> 13.2 us of hub CPU a record (docs/benchmark.md "Ingest at 2,000
# agents: what every record cost").
DEVICE_CACHE_LIMIT = 262_144
DEVICES = DeviceCache(DEVICE_CACHE_LIMIT)
# Applied objects' bodies checked (hub/sync/memo.py), by digest: a body reported again as it
# was (every report of a deployment carries what its agent applied) is compared, not parsed
# and hashed again. Bounded by bytes: 64 MiB, the bodies of 10,000 deployments of 6 KiB.
APPLIED_BODY_BYTES = 64 * 2**20
BODIES: Memo[str, str] = Memo(APPLIED_BODY_BYTES)
