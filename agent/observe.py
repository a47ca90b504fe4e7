"""The observer: what runs in the cluster, as level-triggered observations for the hub.

Reads the cluster port (DGDs, pods), each node's NVML inventory and kubelet allocations, and
builds one observation per deployment, per node and per DGD we did not create (discovered,
agent/discover.py). It remembers what it last sent and returns only what changed, so a quiet
cluster sends nothing but heartbeats. It also remembers the observation time each item last
went out with (`mark_sent`); after a reconnect the hub's Welcome says which times it holds, and
`resume` keeps as sent exactly the items whose time matches: only what the hub lacks (changed
meanwhile, or lost with the old stream) is sent again. `reset()` forgets everything.

Per deployment: its DGD (ours by label, or an adopted one by its coordinates), the DGD's status
and replicas, its worker pods as replicas (frontends are not replicas: they hold no devices
and serve no model), and live_args: the main worker's engine flags as its oldest running pod
runs them. For an adopted DGD those are all its flags (its engine_args declare them in full);
for a DGD we render, the flags beyond what the declaration's serving fields render (so they
compare with its engine_args, and an edit made outside Wingsmith shows as drift).
The deployment's DGD itself goes up too, as the object the agent applied (`applied`):
apiVersion, kind, metadata (name, namespace, labels, annotations) and spec as the cluster holds
them, canonical JSON with its sha256 digest, so an operator sees on the hub exactly what runs
(docs/rendering.md; built by agent/dgd_status.py, with the status). A body over
MAX_APPLIED_BYTES is left out (digest kept, `truncated`).
Per node: every device, verified against the kubelet (agent/devices/verify.py), and every GPU
allocation.

Discovered: every DGD Wingsmith did not render: those without our deployment-id label, and
adopted ones (the reconciler's adopted annotation, or a desired deployment's coordinates),
which stay in the set while managed so that one deleted later is reported gone. The first
cluster-level collection after a reset (a reconnect, or gaining leadership) is the complete
set (`discovered_complete`): the hub marks gone every entry of the cluster missing from it,
since the "gone" markers of what vanished meanwhile were never sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from agent import dgd_status, discover
from agent.cluster import port
from agent.cluster.shape import is_worker, live_flags, main_worker, worker_args
from agent.devices import verify
from agent.devices.model import DeviceInventory, Gpu
from agent.dgd_status import AppliedObject, StatusObservation, applied_object, replicas_owner
from agent.kubelet.model import PodResourcesSource
from agent.manifests import ANNOTATION_ADOPTED
from agent.model import DeploymentSpec
from agent.reconcile import dgd_of
from agent.render.dgd import RenderError, render_dgd
from common.discovered import DiscoveredObservation, ReplicaObservation

T = TypeVar("T")
# A deployment's status reason while its DGD is deleted to be created again (v1beta1).
REASON_RECREATING = "Recreating"


@dataclass(frozen=True)
class NodeSource:
    """One node's device sources: NVML and the kubelet."""

    node_id: str
    inventory: DeviceInventory
    kubelet: PodResourcesSource


@dataclass(frozen=True)
class DeploymentObservation:
    deployment_id: str
    status: StatusObservation | None
    replicas: tuple[ReplicaObservation, ...]
    absent: bool = False
    # The main worker's args as the DGD runs them (drift checks of adopted deployments).
    live_args: tuple[str, ...] = ()
    applied: AppliedObject | None = None


@dataclass(frozen=True)
class DeviceObservation:
    gpu: Gpu
    verified: bool


@dataclass(frozen=True)
class NodeObservation:
    node_id: str
    devices: tuple[DeviceObservation, ...]
    allocations: tuple[verify.PodAllocation, ...]
    inventory_error: str = ""
    absent: bool = False


@dataclass(frozen=True)
class Observations:
    deployments: tuple[DeploymentObservation, ...]
    nodes: tuple[NodeObservation, ...]
    discovered: tuple[DiscoveredObservation, ...] = ()
    # `discovered` is every DGD there is (the first report after a reset), not what changed.
    discovered_complete: bool = False

    @property
    def empty(self) -> bool:
        # A complete set is sent even when empty: it is what tells the hub that all are gone.
        return not (self.deployments or self.nodes or self.discovered or self.discovered_complete)


class Observer:
    def __init__(
        self, *, cluster: port.ClusterPort, nodes: Callable[[], Sequence[NodeSource]]
    ) -> None:
        self._cluster = cluster
        self._nodes = nodes
        self._sent_deployments: dict[str, DeploymentObservation] = {}
        self._sent_nodes: dict[str, NodeObservation] = {}
        self._sent_discovered: dict[str, DiscoveredObservation] = {}
        # ("deployment" | "node", id) -> the observation time the item last went out with.
        self._sent_at: dict[tuple[str, str], int] = {}
        self._complete_due = True
        # Device class per node, from the last inventory read (for discovered DGDs).
        self._node_classes: dict[str, str] = {}
        # (deployment id, serving digest) -> the engine flags its render puts before
        # engine_args; None where it cannot be rendered.
        self._rendered_flags: dict[tuple[str, str], tuple[str, ...] | None] = {}

    def reset(self) -> None:
        self._sent_deployments.clear()
        self._sent_nodes.clear()
        self._sent_discovered.clear()
        self._sent_at.clear()
        self._complete_due = True

    def sent_times(self) -> dict[tuple[str, str], int]:
        """("deployment" | "node", id) -> the observation time each item last went out with:
        what the hub should hold once everything sent is written."""
        return dict(self._sent_at)

    def mark_sent(self, observations: Observations, *, at_ns: int) -> None:
        """`observations` went out stamped `at_ns` (the batch's observation time)."""
        for d in observations.deployments:
            self._sent_at[("deployment", d.deployment_id)] = at_ns
        for n in observations.nodes:
            self._sent_at[("node", n.node_id)] = at_ns

    def resume(self, held: Mapping[tuple[str, str], int]) -> None:
        """After a reconnect: the hub holds `held` (item -> observation time). An item whose
        last report went out with that time is still current at the hub; every other one is
        sent again, and a node the hub holds that this agent does not have is reported absent.
        Discovered DGDs are always sent again, as the complete set."""
        for kind, sent in (("deployment", self._sent_deployments), ("node", self._sent_nodes)):
            for key in list(sent):
                at = self._sent_at.get((kind, key))
                if at is None or held.get((kind, key)) != at:
                    del sent[key]
        self._sent_at = {
            (kind, key): at
            for (kind, key), at in self._sent_at.items()
            if key in (self._sent_deployments if kind == "deployment" else self._sent_nodes)
        }
        # A node the hub holds that this observer never sent (a new process, a reset: the
        # cluster restarted smaller, a node deleted meanwhile) is reported absent by the next
        # collection unless it is still here, in which case it is reported anew.
        for kind, node_id in held:
            if kind == "node" and node_id not in self._sent_nodes:
                self._sent_nodes[node_id] = _unseen_node(node_id)
        self._sent_discovered.clear()
        self._complete_due = True

    def collect(
        self,
        desired: Mapping[str, DeploymentSpec],
        *,
        cluster_level: bool = True,
        recreating: Mapping[str, str] | None = None,
    ) -> Observations:
        """What changed since the last collection (everything after a reset). Only the leader
        reports cluster-level state (deployments, discovered); every agent its nodes.
        `recreating`: deployments whose DGD is being deleted to be created again -> why (their
        status says so, reason `Recreating`)."""
        nodes = {n.node_id: n for n in (self._node(source) for source in self._nodes())}
        changed_nodes = tuple(_changed(self._sent_nodes, nodes, gone=_absent_node))
        if not cluster_level:
            return Observations((), changed_nodes)
        dgds = self._cluster.list_dgds()
        workers = workers_by_graph(self._cluster.list_pods())
        adapters = self._cluster.list_scaling_adapters()
        deployments = self._deployments(desired, dgds, workers, recreating or {}, adapters)
        adopted = {(s.dgd_namespace, s.dgd_name) for s in desired.values() if s.dgd_name}
        found = {
            f"{d.namespace}/{d.name}": discover.describe(
                d, workers.get((d.namespace, d.name), []), self._node_classes
            )
            for d in dgds
            if not rendered_by_us(d, adopted)
        }
        complete, self._complete_due = self._complete_due, False
        if complete:
            self._sent_discovered.clear()
        return Observations(
            tuple(_changed(self._sent_deployments, deployments, gone=_absent_deployment)),
            changed_nodes,
            tuple(_changed(self._sent_discovered, found, gone=_absent_discovered)),
            discovered_complete=complete,
        )

    def forget_cluster_level(self) -> None:
        """After losing leadership: the next leadership reports everything afresh."""
        self._sent_deployments.clear()
        self._sent_discovered.clear()
        self._complete_due = True

    def _deployments(
        self,
        desired: Mapping[str, DeploymentSpec],
        dgds: Sequence[port.Dgd],
        workers: Mapping[tuple[str, str], list[port.Pod]],
        recreating: Mapping[str, str],
        adapters: Sequence[port.ScalingAdapter] = (),
    ) -> dict[str, DeploymentObservation]:
        result = {}
        for deployment_id, spec in desired.items():
            dgd = dgd_of(spec, dgds)
            why = recreating.get(deployment_id, "")
            if dgd is None:
                if why:
                    # Between the delete and the create: say so rather than "absent".
                    status = StatusObservation("pending", REASON_RECREATING, why, 0, 0, 0)
                    result[deployment_id] = DeploymentObservation(deployment_id, status, ())
                continue
            pods = workers.get((dgd.namespace, dgd.name), [])
            status = replace(
                dgd_status.status(spec, dgd, pods), replicas_owner=replicas_owner(dgd, adapters)
            )
            if why:
                status = replace(status, reason=REASON_RECREATING, message=why)
            result[deployment_id] = DeploymentObservation(
                deployment_id=deployment_id,
                status=status,
                replicas=tuple(discover.pod_report(p) for p in pods),
                live_args=self._live_args(spec, dgd, pods),
                applied=applied_object(dgd, version=self._cluster.dgd_version),
            )
        return result

    def _live_args(
        self, spec: DeploymentSpec, dgd: port.Dgd, pods: Sequence[port.Pod]
    ) -> tuple[str, ...]:
        services: Mapping[str, Any] = dgd.spec.get("services", {})
        main = main_worker(services)
        if main is None:
            return ()
        live = tuple(live_flags(main, services[main], pods))
        if spec.adopted or spec.dgd_name:
            return live
        rendered = self._rendered(spec)
        if rendered is not None and live[: len(rendered)] == rendered:
            return live[len(rendered) :]
        return live

    def _rendered(self, spec: DeploymentSpec) -> tuple[str, ...] | None:
        """The main worker's flags as the renderer writes them before engine_args."""
        key = (spec.deployment_id, spec.serving_digest)
        if key not in self._rendered_flags:
            if len(self._rendered_flags) > 4 * 1024:
                self._rendered_flags.clear()  # bounded: entries of old generations go
            try:
                # Only the flags are read: any runtime version renders the same ones.
                services = render_dgd(spec, namespace="rendered", operator_version="0.0.0")["spec"][
                    "services"
                ]
            except RenderError:
                self._rendered_flags[key] = None
            else:
                main = main_worker(services)
                flags = worker_args(services[main]) if main else []
                extra = len(spec.serving.engine_args)
                self._rendered_flags[key] = tuple(flags[: len(flags) - extra] if extra else flags)
        return self._rendered_flags[key]

    def _node(self, source: NodeSource) -> NodeObservation:
        inventory = source.inventory.read()
        try:
            allocatable = source.kubelet.allocatable()
            pod_devices = source.kubelet.list()
            kubelet_error = ""
        except Exception as e:  # the kubelet port raises its own errors; report, keep going
            allocatable, pod_devices, kubelet_error = [], [], f"kubelet: {e}"
        devices = tuple(
            DeviceObservation(gpu=verify.with_reason(v), verified=v.verified)
            for v in verify.verify(inventory, allocatable)
        )
        classes = [g.device_class for g in inventory.devices if not g.parent_uuid]
        if classes:
            self._node_classes[source.node_id] = max(sorted(set(classes)), key=classes.count)
        errors = "; ".join(e for e in (inventory.error, kubelet_error) if e)
        return NodeObservation(
            node_id=source.node_id,
            devices=devices,
            allocations=tuple(verify.allocations(pod_devices)),
            inventory_error=errors,
        )


def rendered_by_us(dgd: port.Dgd, adopted: set[tuple[str, str]]) -> bool:
    """Made by Wingsmith (our deployment-id label), not adopted from someone else."""
    if not dgd.labels.get(port.LABEL_DEPLOYMENT_ID):
        return False
    return ANNOTATION_ADOPTED not in dgd.annotations and (dgd.namespace, dgd.name) not in adopted


def workers_by_graph(pods: Sequence[port.Pod]) -> dict[tuple[str, str], list[port.Pod]]:
    """Worker pods per DGD (namespace, name), by the labels Dynamo puts on every pod."""
    result: dict[tuple[str, str], list[port.Pod]] = {}
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        graph = pod.labels.get(port.DYNAMO_GRAPH)
        if graph and is_worker({"componentType": pod.labels.get(port.DYNAMO_COMPONENT_TYPE)}):
            result.setdefault((pod.namespace, graph), []).append(pod)
    return result


def _absent_deployment(deployment_id: str) -> DeploymentObservation:
    return DeploymentObservation(deployment_id=deployment_id, status=None, replicas=(), absent=True)


def _absent_node(node_id: str) -> NodeObservation:
    return NodeObservation(node_id=node_id, devices=(), allocations=(), absent=True)


def _unseen_node(node_id: str) -> NodeObservation:
    # Held by the hub, not yet observed here: equal to no observation, not even an absent one.
    return NodeObservation(
        node_id=node_id, devices=(), allocations=(), inventory_error="held by the hub"
    )


def _absent_discovered(key: str) -> DiscoveredObservation:
    namespace, _, name = key.partition("/")
    return discover.absent(namespace, name)


def _changed(sent: dict[str, T], current: Mapping[str, T], *, gone: Callable[[str], T]) -> list[T]:
    """Entries that differ from what was sent; entries that disappeared become `gone`. Updates
    `sent` to what the hub will hold once these are delivered."""
    result = []
    for key, value in current.items():
        if sent.get(key) != value:
            result.append(value)
            sent[key] = value
    for key in [k for k in sent if k not in current]:
        previous = sent.pop(key)
        marker = gone(key)
        if previous != marker:
            result.append(marker)
    return result
