"""Stream messages <-> the agent's domain values. The only place agent code reads protobuf
fields of desired state; everything past here works with agent.model values. The rule is the
one converter's (common/convert.py), shared with the hub; only what differs is written here."""

from __future__ import annotations

from agent.model import DeploymentSpec, Serving
from agent.observe import NodeObservation, Observations
from common import convert
from wingsmith.v1 import resources_pb2 as pb
from wingsmith.v1 import sync_pb2

enum_word = convert.enum_word


def serving(message: pb.ServingConfig) -> Serving:
    """The converter's rule (common/convert.py); parallelism an old hub left unset reads as 1."""
    return convert.serving_from_message(
        message,
        tensor_parallel=message.tensor_parallel or 1,
        pipeline_parallel=message.pipeline_parallel or 1,
        expert_parallel=message.expert_parallel or 1,
        prefill_workers=message.disaggregation.prefill_workers or 1,
        decode_workers=message.disaggregation.decode_workers or 1,
    )


def deployment(message: sync_pb2.DeploymentSpec) -> DeploymentSpec:
    """The fields of the same name copied (common/convert.py); authority's default and the
    serving config given here."""
    spec: DeploymentSpec = convert.from_message(
        DeploymentSpec,
        message,
        authority=enum_word(pb.Authority, message.authority) or "managed",
        serving=serving(message.serving),
    )
    return spec


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
    """Every record by the converter's rule; the observation time and what the records hold
    apart (a device's verification, a complete discovery) given here."""
    return sync_pb2.ObservationBatch(
        seq=seq,
        deployments=[
            convert.to_message(sync_pb2.DeploymentObservation, d, observe_unix_nanos=now_ns)
            for d in observations.deployments
        ],
        nodes=[_node_observation(n, now_ns) for n in observations.nodes],
        discovered=[
            convert.to_message(sync_pb2.DiscoveredObservation, d, observe_unix_nanos=now_ns)
            for d in observations.discovered
        ],
        discovered_complete_unix_nanos=now_ns if observations.discovered_complete else 0,
    )


def _node_observation(n: NodeObservation, now_ns: int) -> sync_pb2.NodeObservation:
    message: sync_pb2.NodeObservation = convert.to_message(
        sync_pb2.NodeObservation,
        n,
        observe_unix_nanos=now_ns,
        inventory_error=n.inventory_error[:2048],
        devices=[convert.to_message(pb.Device, d.gpu, verified=d.verified) for d in n.devices],
    )
    return message
