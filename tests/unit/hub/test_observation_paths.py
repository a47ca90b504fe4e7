"""An observation batch with one bad field is refused whole, naming the field's path and what
is accepted: for every field the hot paths of hub/sync/observed.py check in one expression
(nodes, devices, allocations, deployments, their status and replicas), the Problem is the
one the Checker gives when it checks the field alone."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from hub import errors
from hub.sync import convert
from wingsmith.v1 import resources_pb2, sync_pb2

UUID = "GPU-0123abcd-0123-4567-89ab-0123456789ab"
OTHER = "GPU-89abcdef-0123-4567-89ab-0123456789ab"
NOW = time.time_ns()


def batch() -> sync_pb2.ObservationBatch:
    devices = [
        resources_pb2.Device(
            uuid=u,
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=80 * 2**30,
            pci_bus_id=f"00000000:1{g}:00.0",
            device_class="H100-80GB",
            healthy=True,
            verified=True,
            nvlink_domain="fabric.1",
        )
        for g, u in enumerate((UUID, OTHER))
    ]
    node = sync_pb2.NodeObservation(
        node_id="node-a",
        observe_unix_nanos=NOW,
        devices=devices,
        allocations=[
            sync_pb2.AllocationReport(
                pod_name="chat-0", namespace="serving", device_ids=[UUID], resource_name="gpu"
            )
        ],
    )
    status = sync_pb2.DeploymentStatusReport(
        phase="Ready", reason="", message="", ready_replicas=2, desired_replicas=2,
        applied_generation=3, replicas_owner="adapter",
    )  # fmt: skip
    replicas = [
        sync_pb2.ReplicaReport(
            name=f"chat-{r}", namespace="serving", node_id="node-a", ready=True,
            serving_digest="svg_0123456789abcdef", engine_version="0.11.0", role="worker",
        )
        for r in range(2)
    ]  # fmt: skip
    deployment = sync_pb2.DeploymentObservation(
        deployment_id="dep_0123456789abcdef",
        observe_unix_nanos=NOW,
        status=status,
        replicas=replicas,
        live_args=["--max-model-len", "8192"],
    )
    return sync_pb2.ObservationBatch(seq=1, deployments=[deployment], nodes=[node])


def check(message: sync_pb2.ObservationBatch) -> None:
    convert.observations(message, convert.Checker(now_ns=NOW, max_skew_ns=5 * 10**9))


Change = Callable[[sync_pb2.ObservationBatch], object]
N = "observations.nodes[0]"
D = "observations.deployments[0]"
CASES: list[tuple[str, Change, str, str]] = [
    ("node id", lambda b: setattr(b.nodes[0], "node_id", "Node_A"), f"{N}.node_id",
     "invalid node name: 'Node_A'"),
    ("node id, long", lambda b: setattr(b.nodes[0], "node_id", "a" * 254), f"{N}.node_id",
     "invalid node name"),
    ("node time unset", lambda b: setattr(b.nodes[0], "observe_unix_nanos", 0),
     f"{N}.observe_unix_nanos", "required: the observation time in Unix nanoseconds"),
    ("node time ahead", lambda b: setattr(b.nodes[0], "observe_unix_nanos", NOW + 6 * 10**9),
     f"{N}.observe_unix_nanos", "is in the future beyond the allowed clock skew"),
    ("duplicate device", lambda b: setattr(b.nodes[0].devices[1], "uuid", UUID),
     f"{N}.devices", f"duplicate device {UUID!r}"),
    ("duplicate allocation", lambda b: b.nodes[0].allocations.add().CopyFrom(
        b.nodes[0].allocations[0]), f"{N}.allocations", "duplicate pod ('serving', 'chat-0')"),
    ("absent with devices", lambda b: setattr(b.nodes[0], "absent", True), N,
     "an absent node carries no devices or allocations"),
    ("inventory error", lambda b: setattr(b.nodes[0], "inventory_error", "nvml\x00"),
     f"{N}.inventory_error", "at most 2048 printable ASCII characters"),
    ("device uuid", lambda b: setattr(b.nodes[0].devices[1], "uuid", "GPU-1"),
     f"{N}.devices[1].uuid", "invalid 'GPU-1'"),
    ("device name", lambda b: setattr(b.nodes[0].devices[1], "name", "H100\n"),
     f"{N}.devices[1].name", "at most 128 printable ASCII characters"),
    ("device name, long", lambda b: setattr(b.nodes[0].devices[1], "name", "H" * 129),
     f"{N}.devices[1].name", "at most 128 printable ASCII characters"),
    ("device memory", lambda b: setattr(b.nodes[0].devices[1], "memory_bytes", 2**51),
     f"{N}.devices[1].memory_bytes", "must be between 0 and"),
    ("device bus id", lambda b: setattr(b.nodes[0].devices[1], "pci_bus_id", "é"),
     f"{N}.devices[1].pci_bus_id", "at most 64 printable ASCII characters"),
    ("device bus id, long", lambda b: setattr(b.nodes[0].devices[1], "pci_bus_id", "0" * 65),
     f"{N}.devices[1].pci_bus_id", "at most 64 printable ASCII characters"),
    ("device class", lambda b: setattr(b.nodes[0].devices[1], "device_class", "-H100"),
     f"{N}.devices[1].device_class", "invalid device class"),
    ("health reason", lambda b: setattr(b.nodes[0].devices[1], "health_reason", "x" * 513),
     f"{N}.devices[1].health_reason", "at most 512 printable ASCII characters"),
    ("nvlink domain", lambda b: setattr(b.nodes[0].devices[1], "nvlink_domain", "a\tb"),
     f"{N}.devices[1].nvlink_domain", "at most 128 printable ASCII characters"),
    ("parent uuid", lambda b: setattr(b.nodes[0].devices[1], "parent_uuid", "GPU-x"),
     f"{N}.devices[1].parent_uuid", "invalid 'GPU-x'"),
    ("allocation device", lambda b: b.nodes[0].allocations[0].device_ids.append("../x"),
     f"{N}.allocations[0].device_ids[1]", "invalid '../x'"),
    ("allocation pod", lambda b: setattr(b.nodes[0].allocations[0], "pod_name", "Chat"),
     f"{N}.allocations[0].pod_name", "invalid pod name: 'Chat'"),
    ("deployment id", lambda b: setattr(b.deployments[0], "deployment_id", "dep_1"),
     f"{D}.deployment_id", "invalid deployment id: 'dep_1'"),
    ("deployment time", lambda b: setattr(b.deployments[0], "observe_unix_nanos", 0),
     f"{D}.observe_unix_nanos", "required: the observation time in Unix nanoseconds"),
    ("duplicate replica", lambda b: setattr(b.deployments[0].replicas[1], "name", "chat-0"),
     f"{D}.replicas", "duplicate pod ('serving', 'chat-0')"),
    ("absent with replicas", lambda b: setattr(b.deployments[0], "absent", True),
     f"{D}.replicas", "must be empty when absent is true"),
    ("phase", lambda b: setattr(b.deployments[0].status, "phase", "R" * 65),
     f"{D}.status.phase", "at most 64 printable ASCII characters"),
    ("reason", lambda b: setattr(b.deployments[0].status, "reason", "\x7f"),
     f"{D}.status.reason", "at most 128 printable ASCII characters"),
    ("message", lambda b: setattr(b.deployments[0].status, "message", "m" * 2049),
     f"{D}.status.message", "at most 2048 printable ASCII characters"),
    ("ready replicas", lambda b: setattr(b.deployments[0].status, "ready_replicas", 10_001),
     f"{D}.status.ready_replicas", "must be between 0 and 10000"),
    ("desired replicas", lambda b: setattr(b.deployments[0].status, "desired_replicas", 10_001),
     f"{D}.status.desired_replicas", "must be between 0 and 10000"),
    ("generation", lambda b: setattr(b.deployments[0].status, "applied_generation", 2**62 + 1),
     f"{D}.status.applied_generation", f"must be between 0 and {2**62}"),
    ("replicas owner", lambda b: setattr(b.deployments[0].status, "replicas_owner", "kubectl"),
     f"{D}.status.replicas_owner", "invalid replicas owner"),
    ("two bad status fields: the first named", lambda b: (
        setattr(b.deployments[0].status, "message", "\x00"),
        setattr(b.deployments[0].status, "replicas_owner", "x"),
    ), f"{D}.status.message", "printable ASCII"),
    ("replica name", lambda b: setattr(b.deployments[0].replicas[1], "name", "Chat-1"),
     f"{D}.replicas[1].name", "invalid pod name: 'Chat-1'"),
    ("replica ready without node", lambda b: setattr(b.deployments[0].replicas[1], "node_id", ""),
     f"{D}.replicas[1].node_id", "a ready replica must name its node"),
    ("live args", lambda b: b.deployments[0].live_args.append("a\x00"),
     f"{D}.live_args[2]", "at most 4096 characters, no NUL"),
]  # fmt: skip


def test_a_valid_batch_passes() -> None:
    check(batch())


@pytest.mark.parametrize(
    ("change", "path", "what"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_one_bad_field_is_named(change: Change, path: str, what: str) -> None:
    message = batch()
    change(message)
    with pytest.raises(errors.InvalidArgument) as refused:
        check(message)
    assert refused.value.field == path, refused.value
    assert what in refused.value.problem, refused.value.problem
