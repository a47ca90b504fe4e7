"""Stream messages <-> the agent's domain values. The only place agent code reads protobuf
fields of desired state; everything past here works with agent.model values."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from agent.discover import DiscoveredObservation, PodReport
from agent.model import DeploymentSpec, KvCache, Serving
from agent.observe import DeploymentObservation, NodeObservation, Observations
from wingsmith.v1 import resources_pb2 as pb
from wingsmith.v1 import sync_pb2


def enum_word(enum: Any, value: int) -> str:
    """ENGINE_VLLM -> "vllm" (strip the type prefix); UNSPECIFIED or unknown -> ""."""
    try:
        name: str = enum.Name(value)
    except ValueError:
        return ""
    type_name: str = enum.DESCRIPTOR.name
    prefix = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(type_name)).upper()
    word = name.removeprefix(prefix + "_")
    return "" if word == "UNSPECIFIED" else word.lower()


def serving(message: pb.ServingConfig) -> Serving:
    kv = message.kv_cache
    return Serving(
        engine=enum_word(pb.Engine, message.engine),
        engine_version=message.engine_version,
        model=message.model,
        tensor_parallel=message.tensor_parallel or 1,
        pipeline_parallel=message.pipeline_parallel or 1,
        expert_parallel=message.expert_parallel or 1,
        context_length=message.context_length,
        quantization=message.quantization,
        kv_cache=KvCache(
            dtype=kv.dtype,
            gpu_memory_utilization=kv.gpu_memory_utilization,
            block_size=kv.block_size,
            disable_prefix_caching=kv.disable_prefix_caching,
        ),
        engine_args=tuple(message.engine_args),
        mode=enum_word(pb.ServingMode, message.mode) or "aggregated",
        prefill_workers=message.disaggregation.prefill_workers or 1,
        decode_workers=message.disaggregation.decode_workers or 1,
        router_mode=enum_word(pb.RouterMode, message.router_mode),
        image=message.image,
        runtime_version=message.runtime_version,
    )


def deployment(message: sync_pb2.DeploymentSpec) -> DeploymentSpec:
    """The fields of the same name copied (record_from); authority's default and the serving
    config given here."""
    spec: DeploymentSpec = record_from(
        DeploymentSpec,
        message,
        authority=enum_word(pb.Authority, message.authority) or "managed",
        serving=serving(message.serving),
    )
    return spec


def record_from(record_type: Any, message: Any, **given: Any) -> Any:
    """A `record_type` dataclass from `message`: `given` fields as given, and every other field
    the message has by the same name copied, so a new field of both needs no line here:
    scalars as they are, repeated scalars as tuples, enums as their word (enum_word). Message
    fields come only through `given`."""
    values = dict(given)
    for name, convert in _copied(record_type, message.DESCRIPTOR):
        if name not in values:
            values[name] = convert(getattr(message, name))
    return record_type(**values)


@functools.cache
def _copied(record_type: Any, descriptor: Any) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """(field name, conversion) of the fields `record_from` copies: computed once per pair."""
    names = {f.name for f in dataclasses.fields(record_type)}
    plan: list[tuple[str, Callable[[Any], Any]]] = []
    for field in descriptor.fields:
        if field.name not in names or field.message_type is not None:
            continue
        repeated = field.is_repeated
        convert: Callable[[Any], Any]
        if field.enum_type is not None:
            convert = functools.partial(_words if repeated else _word, field.enum_type)
        else:
            convert = tuple if repeated else _same
        plan.append((field.name, convert))
    return tuple(plan)


def _word(enum: Any, number: int) -> str:
    """As enum_word, from the enum's descriptor."""
    value = enum.values_by_number.get(number)
    if value is None:
        return ""
    prefix = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(enum.name)).upper()
    word: str = value.name.removeprefix(prefix + "_")
    return "" if word == "UNSPECIFIED" else word.lower()


def _words(enum: Any, numbers: Any) -> tuple[str, ...]:
    return tuple(_word(enum, number) for number in numbers)


def _same(value: Any) -> Any:
    return value


def held_observations(welcome: sync_pb2.Welcome) -> dict[tuple[str, str], int]:
    """The Welcome's `held`: ("deployment" | "node", id) -> observation time at the hub."""
    held: dict[tuple[str, str], int] = {}
    for item in welcome.held:
        kind = item.WhichOneof("item")
        if kind == "deployment_id":
            held[("deployment", item.deployment_id)] = item.observe_unix_nanos
        elif kind == "node_id":
            held[("node", item.node_id)] = item.observe_unix_nanos
    return held


def observation_batch(
    observations: Observations, *, seq: int, now_ns: int
) -> sync_pb2.ObservationBatch:
    return sync_pb2.ObservationBatch(
        seq=seq,
        deployments=[_deployment_observation(d, now_ns) for d in observations.deployments],
        nodes=[_node_observation(n, now_ns) for n in observations.nodes],
        discovered=[_discovered_observation(d, now_ns) for d in observations.discovered],
        discovered_complete_unix_nanos=now_ns if observations.discovered_complete else 0,
    )


def _replica_report(r: PodReport) -> sync_pb2.ReplicaReport:
    return sync_pb2.ReplicaReport(
        name=r.name,
        namespace=r.namespace,
        node_id=r.node_id,
        ready=r.ready,
        serving_digest=r.serving_digest,
        engine_version=r.engine_version,
        role=r.role,
    )


def _discovered_observation(
    d: DiscoveredObservation, now_ns: int
) -> sync_pb2.DiscoveredObservation:
    return sync_pb2.DiscoveredObservation(
        namespace=d.namespace,
        name=d.name,
        observe_unix_nanos=now_ns,
        absent=d.absent,
        backend_framework=d.backend_framework,
        services=[
            pb.DiscoveredService(
                name=s.name,
                component_type=s.component_type,
                sub_component_type=s.sub_component_type,
                replicas=s.replicas,
                ready_replicas=s.ready_replicas,
                gpus_per_pod=s.gpus_per_pod,
                image=s.image,
                args=list(s.args),
            )
            for s in d.services
        ],
        replicas=d.replicas,
        ready_replicas=d.ready_replicas,
        imported_args=list(d.imported_args),
        engine_version=d.engine_version,
        device_class=d.device_class,
        devices_per_replica=d.devices_per_replica,
        pods=[_replica_report(p) for p in d.pods],
    )


def _deployment_observation(
    d: DeploymentObservation, now_ns: int
) -> sync_pb2.DeploymentObservation:
    message = sync_pb2.DeploymentObservation(
        deployment_id=d.deployment_id,
        observe_unix_nanos=now_ns,
        absent=d.absent,
        replicas=[_replica_report(r) for r in d.replicas],
        live_args=list(d.live_args),
    )
    if d.applied is not None:
        a = d.applied
        message.applied.CopyFrom(
            sync_pb2.AppliedObjectReport(
                api_version=a.api_version,
                kind=a.kind,
                namespace=a.namespace,
                name=a.name,
                digest=a.digest,
                body=a.body,
                truncated=a.truncated,
            )
        )
    if d.status is not None:
        s = d.status
        message.status.CopyFrom(
            sync_pb2.DeploymentStatusReport(
                phase=s.phase,
                reason=s.reason,
                message=s.message,
                ready_replicas=s.ready_replicas,
                desired_replicas=s.desired_replicas,
                applied_generation=s.applied_generation,
                replicas_owner=s.replicas_owner,
            )
        )
    return message


def _node_observation(n: NodeObservation, now_ns: int) -> sync_pb2.NodeObservation:
    return sync_pb2.NodeObservation(
        node_id=n.node_id,
        observe_unix_nanos=now_ns,
        absent=n.absent,
        inventory_error=n.inventory_error[:2048],
        devices=[
            pb.Device(
                uuid=d.gpu.uuid,
                name=d.gpu.name,
                memory_bytes=d.gpu.memory_bytes,
                pci_bus_id=d.gpu.pci_bus_id,
                device_class=d.gpu.device_class,
                healthy=d.gpu.healthy,
                health_reason=d.gpu.health_reason,
                verified=d.verified,
                nvlink_domain=d.gpu.nvlink_domain,
                parent_uuid=d.gpu.parent_uuid,
            )
            for d in n.devices
        ],
        allocations=[
            sync_pb2.AllocationReport(
                pod_name=a.pod_name,
                namespace=a.namespace,
                device_ids=list(a.device_ids),
                resource_name=a.resource_name,
            )
            for a in n.allocations
        ],
    )
