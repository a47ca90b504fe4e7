"""The DaemonSet, end to end: several whole `--kubernetes` agents (tests/integration/kube_pods.py)
against one Kubernetes API emulator (tests/fake_kube), with real LeaseElectors, real kubelets
(PodResources gRPC servers on unix sockets), nvidia-ml-py over the fake libnvidia-ml.so.1, and
a real hub: who leads, how the hub fences and grants, what a follower and a read-only agent
send the API server (nothing that writes), and nodes that leave the cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests import fake_nvml
from tests.fake_kube import DGDS, NODES, KubeEmulator
from tests.fake_kube.store import LEASES
from tests.harness import Hub, LoopThread, wait_until, workload
from tests.integration.kube_pods import FAST_LEASE, GPU, KubePod, leader
from tests.integration.rawstream import RawStream, now_ns
from tests.unit.cluster import builders as dgds
from tests.unit.kube import builders as kube
from wingsmith.v1 import resources_pb2, sync_pb2

StartPod = Callable[..., KubePod]
# The kubelet's word for the two GPUs NVML shows: verified capacity, so a deployment is admitted.
TWO = (GPU.format(0), GPU.format(1))


@pytest.fixture(scope="module")
def nvml_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_nvml.build(tmp_path_factory.mktemp("nvml"))


@pytest.fixture(autouse=True)
def node_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The one pod that reads NVML sees two H100s."""
    config = tmp_path / "nvml.conf"
    gpus = (
        {"uuid": GPU.format(i), "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
        for i in range(2)
    )
    fake_nvml.write_config(config, fake_nvml.node(*gpus, driver_version="550.54.15"))
    monkeypatch.setenv(fake_nvml.CONFIG_ENV, str(config))
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()
    yield
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()


@pytest.fixture
def emulator() -> Iterator[KubeEmulator]:
    with KubeEmulator(lifetime_s=180) as server:
        for name in ("n1", "n2"):
            server.store.update(NODES, kube.node(name), manager="kubelet")
        yield server


@pytest.fixture
def cluster(hub: Hub) -> str:
    """Cluster east at the hub, with quota for it; its agent token."""
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    return token


@pytest.fixture
def pods(env: tuple[LoopThread, Hub], emulator: KubeEmulator, cluster: str) -> Iterator[StartPod]:
    loop, hub = env
    started: list[KubePod] = []

    def start(node: str, pod: str, **kwargs: Any) -> KubePod:
        started.append(KubePod(loop, hub, emulator, token=cluster, node=node, pod=pod, **kwargs))
        wait_until(lambda: started[-1].started, what=f"pod {pod} started")
        return started[-1]

    yield start
    for pod in started:
        pod.stop()


def _term(hub: Hub) -> int:
    return int(hub.get("/v1/clusters/east")["leader_term"])


def _dgd_applied(emulator: KubeEmulator, name: str = "chat") -> Any:
    return emulator.store.get(DGDS, "wingsmith", name)


# -- read-only: no mutating request, leadership granted by the hub ------------------------------


def test_a_read_only_daemonset_sends_no_mutating_request_and_the_hub_grants_it_a_leader(
    hub: Hub, emulator: KubeEmulator, pods: StartPod, nvml_library: Path
) -> None:
    # Something to report that only a leader sees: a DGD nobody declared to Wingsmith.
    emulator.store.update(DGDS, dgds.aggregated("legacy-qwen", namespace="ml"), manager="kubectl")
    hub.post("/v1/workloads", workload("chat", replicas=1, tp=1, clusters=("east",)))

    first = pods("n1", "hangar-1", read_only=True, nvml_library=str(nvml_library))
    wait_until(lambda: leader(hub) == "hangar-1", what="the hub grants the first pod")
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="the leader reports")
    first_term = _term(hub)
    assert first.agent.leading and first.agent.term == first_term

    second = pods("n2", "hangar-2", read_only=True)
    wait_until(lambda: len(hub.get("/v1/clusters/east")["nodes"]) == 2, what="both nodes")
    assert leader(hub) == "hangar-1" and not second.agent.leading
    assert emulator.requests_by(second.kube_auth) == [], "a follower needs nothing of the API"

    first.stop()  # its session closes: the hub grants the other pod, with a newer term
    wait_until(lambda: leader(hub) == "hangar-2", what="the hub grants the second pod")
    assert _term(hub) > first_term
    wait_until(lambda: second.agent.leading, what="the second pod leads once its caches list")
    assert any(r.watch for r in emulator.requests_by(second.kube_auth)), "it watches now"
    wait_until(lambda: second.agent.reconciles > 0, what="it reconciles (and writes nothing)")

    assert emulator.mutating_requests() == [], "read-only: no request may write"
    assert emulator.store.get(LEASES, "wingsmith", "wingsmith-hangar") is None
    assert _dgd_applied(emulator) is None


# -- managed: a Lease, a takeover, the hub's fencing -------------------------------------------


def test_a_partitioned_leader_that_still_believes_it_leads_is_fenced_by_the_hub(
    hub: Hub, emulator: KubeEmulator, pods: StartPod, nvml_library: Path
) -> None:
    # A renew deadline past the Lease's duration: partitioned from the API server, pod A
    # keeps believing it leads after the Lease has expired for everyone else, as a pod with a
    # stalled clock would. Only the hub's fencing stops it.
    stubborn = type(FAST_LEASE)(lease_duration_s=2.0, renew_deadline_s=120.0, retry_s=0.2)
    a = pods(
        "n1", "hangar-a", nvml_library=str(nvml_library), lease_timing=stubborn, allocatable=TWO
    )
    wait_until(lambda: leader(hub) == "hangar-a", what="a leads")
    assert _term(hub) == 1
    b = pods("n2", "hangar-b")
    wait_until(lambda: len(hub.get("/v1/clusters/east")["nodes"]) == 2, what="both nodes")
    followed = emulator.requests_by(b.kube_auth)
    assert followed and all("/leases/" in r.path or r.path.endswith("/leases") for r in followed)

    emulator.fail(503, authorization=a.kube_auth)  # a cannot reach the API server any more
    wait_until(lambda: leader(hub) == "hangar-b", what="b takes the expired Lease over")
    assert _term(hub) == 2
    wait_until(lambda: not a.agent.leading, what="the hub fences a")
    reconciles = a.agent.reconciles
    hub.post("/v1/workloads", workload("chat", replicas=1, tp=1, clusters=("east",)))
    wait_until(lambda: _dgd_applied(emulator), what="the new leader applies the DGD")
    # The API server stores the DGD before b's apply call returns and counts it.
    wait_until(lambda: b.agent.applied >= 1, what="b counts its apply")
    assert a.agent.reconciles == reconciles, "the fenced pod reconciles nothing"

    emulator.heal()  # a sees the Lease is b's and steps down for good
    wait_until(lambda: leader(hub) == "hangar-b" and not a.agent.leading)
    lease = emulator.store.get(LEASES, "wingsmith", "wingsmith-hangar")
    assert lease is not None and lease["spec"]["holderIdentity"] == "hangar-b"


def test_a_recreated_lease_moves_its_term_past_the_hubs_and_the_holder_leads_again(
    hub: Hub, emulator: KubeEmulator, pods: StartPod, nvml_library: Path
) -> None:
    a = pods("n1", "hangar-a", nvml_library=str(nvml_library), allocatable=TWO)
    wait_until(lambda: leader(hub) == "hangar-a", what="a leads")
    b = pods("n2", "hangar-b")
    a.stop()  # releases the Lease: b takes it over, term 2
    wait_until(lambda: leader(hub) == "hangar-b" and _term(hub) == 2, what="b leads term 2")

    # The namespace is deleted and the agent reinstalled: a new Lease, its transitions at 0.
    emulator.store.delete(LEASES, "wingsmith", "wingsmith-hangar")
    wait_until(lambda: _term(hub) == 3, what="b claims past the hub's term 2")
    lease = emulator.store.get(LEASES, "wingsmith", "wingsmith-hangar")
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("hangar-b", 2)
    wait_until(lambda: leader(hub) == "hangar-b" and b.agent.leading and b.agent.term == 3)

    hub.post("/v1/workloads", workload("chat", replicas=1, tp=1, clusters=("east",)))
    wait_until(lambda: _dgd_applied(emulator), what="the cluster has a leader again")


# -- nodes that leave the cluster ---------------------------------------------------------------


def _report_node(hub: Hub, token: str, node: str, *uuids: str) -> None:
    """What a node's own agent reports before its node is deleted (and it with it)."""
    stream = RawStream(hub.grpc_target, token)
    stream.hello("east", node_name=node, agent_instance=f"hangar-{node}")
    stream.receive_kind("welcome")
    devices = [
        resources_pb2.Device(uuid=u, device_class="H100-80GB", healthy=True, verified=True)
        for u in uuids
    ]
    stream.send(
        observations=sync_pb2.ObservationBatch(
            seq=1,
            nodes=[
                sync_pb2.NodeObservation(node_id=node, observe_unix_nanos=now_ns(), devices=devices)
            ],
        )
    )
    wait_until(lambda: node in _nodes(hub), what=f"{node} reported")
    stream.close()


def _nodes(hub: Hub) -> set[str]:
    return {n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]}


def test_the_leader_reports_deleted_nodes_absent_so_their_gpus_stop_counting(
    hub: Hub, emulator: KubeEmulator, pods: StartPod, cluster: str, nvml_library: Path
) -> None:
    # Deleted while no one led: the leader learns of it from the hub's grant.
    _report_node(hub, cluster, "gone-before", "GPU-aaaaaaaa-0000-0000-0000-000000000000")
    a = pods("n1", "hangar-a", nvml_library=str(nvml_library), allocatable=(GPU.format(0),))
    wait_until(lambda: leader(hub) == "hangar-a", what="a leads")
    wait_until(lambda: _nodes(hub) == {"n1"}, what="the deleted node dropped")

    # Deleted while it leads: it sees the Node object go.
    emulator.store.update(NODES, kube.node("n3"), manager="kubelet")
    _report_node(hub, cluster, "n3", "GPU-bbbbbbbb-0000-0000-0000-000000000000")
    wait_until(lambda: _nodes(hub) == {"n1", "n3"})
    assert hub.get("/v1/clusters/east")["devices"]["H100-80GB"]["total"] == 2
    wait_until(lambda: "n3" in a.agent.departed.known, what="the leader's pass saw n3")
    emulator.store.delete(NODES, "", "n3")
    wait_until(lambda: _nodes(hub) == {"n1"}, what="n3 dropped")
    capacity = hub.get("/v1/clusters/east")["devices"]["H100-80GB"]
    assert capacity["total"] == 1, "only n1's verified GPU still counts"
