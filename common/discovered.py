"""What an agent reports of the pods it sees and of the DynamoGraphDeployments it did not
create (docs/adoption.md): defined once for the agent, which builds them (agent/discover.py,
agent/observe.py), and the hub, which validates them as they arrive (hub/sync/observed.py),
stores them (hub/store/discovered.py) and reads a workload off them (hub/adoption.py).

The wire forms are `wingsmith.v1.ReplicaReport`, `DiscoveredService` and
`DiscoveredObservation`, converted by common/convert.py by field name (the observation time
travels as the message's `observe_unix_nanos`, which the sender gives). No protobuf here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaObservation:
    """One pod as the agent saw it (a deployment's replica, or a discovered DGD's pod)."""

    name: str
    namespace: str
    node_id: str
    ready: bool
    serving_digest: str
    engine_version: str
    # worker | prefill | decode
    role: str


@dataclass(frozen=True)
class DiscoveredService:
    """One service of a discovered DGD, as its spec declares it and its pods run it."""

    name: str
    component_type: str
    sub_component_type: str
    replicas: int
    ready_replicas: int
    gpus_per_pod: int
    image: str
    # The engine flags its oldest running pod runs (else those the DGD declares).
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiscoveredObservation:
    """A DGD nobody declared, described (agent/discover.py's `describe`); `absent`: it is
    gone from the cluster."""

    namespace: str
    name: str
    # When the agent observed it: set by the hub from the message's observe_unix_nanos; the
    # agent leaves it 0 and gives the send time as the message is built.
    observe_ns: int = 0
    absent: bool = False
    backend_framework: str = ""
    services: tuple[DiscoveredService, ...] = ()
    replicas: int = 0
    ready_replicas: int = 0
    imported_args: tuple[str, ...] = ()
    engine_version: str = ""
    device_class: str = ""
    devices_per_replica: int = 0
    pods: tuple[ReplicaObservation, ...] = ()
