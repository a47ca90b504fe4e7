"""Scaling and rolling updates of the simulated Dynamo operator."""

from __future__ import annotations

import pytest

from agent.cluster import port
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.cluster.simulated.rollout import (
    Holder,
    RoomPlan,
    fits_all,
    max_unavailable,
    plan_room,
)
from tests.unit.cluster import builders
from tests.unit.cluster.conftest import MakeCluster
from tests.unit.cluster.helpers import FakeClock, drive, gpus_in_use, pods_of

NEW_ARGS = ("--model", "Qwen/Qwen3-0.6B", "--max-model-len", "8192")


def status(cluster: SimulatedCluster) -> dict:
    return cluster.list_dgds()[0].status


def settled(cluster: SimulatedCluster, clock: FakeClock, manifest: dict) -> None:
    cluster.apply_dgd(manifest)
    drive(cluster, clock)


def worker_names(cluster: SimulatedCluster) -> set[str]:
    return {p.name for p in pods_of(cluster, "VllmWorker")}


# -- scaling ----------------------------------------------------------------------------------


def test_scaling_up_adds_pods_and_restarts_none(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=2, gpus=2)
    settled(cluster, clock, manifest)
    before = {p.name: p.created_unix for p in pods_of(cluster, "VllmWorker")}

    cluster.apply_dgd(builders.scaled(manifest, "VllmWorker", 4))

    after = {p.name: p for p in pods_of(cluster, "VllmWorker")}
    assert len(after) == 4
    assert all(after[name].ready and after[name].created_unix == t for name, t in before.items())
    assert "rollingUpdate" not in status(cluster)


def test_scaling_down_removes_not_ready_pods_first_then_the_newest(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=3, gpus=2)
    settled(cluster, clock, manifest)
    cluster.apply_dgd(builders.scaled(manifest, "VllmWorker", 4))
    starting = {p.name for p in pods_of(cluster, "VllmWorker") if not p.ready}

    cluster.apply_dgd(builders.scaled(manifest, "VllmWorker", 2))

    names = sorted(worker_names(cluster), key=lambda n: int(n.rsplit("-", 1)[1]))
    assert not starting & set(names)
    assert [n.rsplit("-", 1)[1] for n in names] == ["0", "1"]


def test_scaling_to_zero_removes_every_pod_of_the_service(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    manifest = builders.aggregated(replicas=2)
    cluster.apply_dgd(manifest)

    cluster.apply_dgd(builders.scaled(manifest, "VllmWorker", 0))

    assert pods_of(cluster, "VllmWorker") == []
    assert status(cluster)["state"] == "successful"


# -- rolling updates ----------------------------------------------------------------------------


def test_a_rollout_with_spare_capacity_runs_old_and_new_side_by_side(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=2, gpus=4)
    settled(cluster, clock, manifest)
    old = worker_names(cluster)

    cluster.apply_dgd(builders.with_args(manifest, "VllmWorker", NEW_ARGS))

    assert gpus_in_use(cluster) == 16  # peak = old footprint + new footprint
    assert old <= worker_names(cluster)
    assert all(p.ready for p in pods_of(cluster, "VllmWorker") if p.name in old)
    assert status(cluster)["services"]["VllmWorker"]["replicas"] == 4
    assert status(cluster)["services"]["VllmWorker"]["updatedReplicas"] == 2
    assert status(cluster)["rollingUpdate"]["phase"] == "InProgress"

    drive(cluster, clock)

    assert not old & worker_names(cluster)
    assert gpus_in_use(cluster) == 8
    assert status(cluster)["rollingUpdate"] == {
        "phase": "Completed",
        "updatedServices": ["VllmWorker"],
    }
    assert status(cluster)["state"] == "successful"


def test_old_pods_stay_until_new_ones_are_ready(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=2, gpus=4)
    settled(cluster, clock, manifest)
    old = worker_names(cluster)
    cluster.apply_dgd(builders.with_args(manifest, "VllmWorker", NEW_ARGS))

    clock.tick(1.5)
    cluster.advance()

    assert old <= worker_names(cluster)
    assert status(cluster)["state"] == "initializing"
    assert status(cluster)["conditions"][0]["reason"] == "updating"


@pytest.mark.parametrize(
    ("spec", "replicas", "old_gpus", "new_gpus"),
    [
        ("nodes=2,gpus=8", 4, 4, 4),
        ("nodes=1,gpus=8", 8, 1, 1),
        ("nodes=2,gpus=8", 2, 8, 8),
        ("nodes=4,gpus=8", 16, 2, 2),
        ("nodes=2,gpus=8", 1, 8, 8),
        ("nodes=2,gpus=8", 4, 2, 4),  # the new generation needs twice the devices
        ("nodes=2,gpus=8", 4, 4, 2),
        ("nodes=2,gpus=8;nodes=1,gpus=4,class=A100-40GB", 5, 4, 4),
    ],
)
def test_a_rollout_on_a_cluster_sized_for_one_generation_converges(
    make_cluster: MakeCluster,
    clock: FakeClock,
    spec: str,
    replicas: int,
    old_gpus: int,
    new_gpus: int,
) -> None:
    cluster = make_cluster(f"{spec},ready_after=2s")
    capacity = cluster.spec.total_gpus
    manifest = builders.aggregated(replicas=replicas, gpus=old_gpus)
    settled(cluster, clock, manifest)
    assert status(cluster)["state"] == "successful"
    new = builders.with_gpus(
        builders.with_args(manifest, "VllmWorker", NEW_ARGS), "VllmWorker", new_gpus
    )
    floor = replicas - max_unavailable(replicas)
    lowest_ready = replicas

    def check(c: SimulatedCluster) -> None:
        nonlocal lowest_ready
        assert gpus_in_use(c) <= capacity
        lowest_ready = min(lowest_ready, sum(p.ready for p in pods_of(c, "VllmWorker")))

    cluster.apply_dgd(new)
    check(cluster)
    drive(cluster, clock, each=check)

    workers = pods_of(cluster, "VllmWorker")
    assert len(workers) == replicas
    assert all(p.ready and p.gpu_request == new_gpus for p in workers)
    assert status(cluster)["state"] == "successful"
    assert status(cluster)["rollingUpdate"]["phase"] == "Completed"
    if new_gpus <= old_gpus:
        assert lowest_ready >= floor  # within maxUnavailable all the way


def test_a_rollout_whose_new_pods_fit_nowhere_keeps_the_old_generation_serving(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=2, gpus=8)
    settled(cluster, clock, manifest)
    old = worker_names(cluster)

    cluster.apply_dgd(builders.with_gpus(manifest, "VllmWorker", 16))
    drive(cluster, clock)

    assert old <= worker_names(cluster)
    assert all(p.ready for p in pods_of(cluster, "VllmWorker") if p.name in old)
    assert status(cluster)["state"] == "pending"
    assert status(cluster)["conditions"][0]["reason"] == "InsufficientDevices"
    assert status(cluster)["rollingUpdate"]["phase"] == "Pending"


def test_a_new_generation_too_big_for_the_cluster_never_costs_more_than_max_unavailable(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=4, gpus=4)
    settled(cluster, clock, manifest)

    cluster.apply_dgd(builders.with_gpus(manifest, "VllmWorker", 8))  # 32 GPUs on 16
    drive(cluster, clock)

    ready = [p for p in pods_of(cluster, "VllmWorker") if p.ready]
    assert len(ready) >= 4 - max_unavailable(4)
    assert status(cluster)["state"] == "pending"


def test_changing_one_worker_rolls_every_worker_of_the_graph(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    manifest = builders.disaggregated(prefill=1, decode=1)
    settled(cluster, clock, manifest)
    before = {p.name for p in cluster.list_pods()}
    old_hash = pods_of(cluster, "VllmDecodeWorker")[0].labels[port.DYNAMO_WORKER_HASH]

    cluster.apply_dgd(builders.with_args(manifest, "VllmDecodeWorker", NEW_ARGS))
    drive(cluster, clock)

    prefill, decode = pods_of(cluster, "VllmPrefillWorker"), pods_of(cluster, "VllmDecodeWorker")
    assert prefill[0].name not in before and decode[0].name not in before
    new_hash = prefill[0].labels[port.DYNAMO_WORKER_HASH]
    assert new_hash == decode[0].labels[port.DYNAMO_WORKER_HASH] != old_hash
    assert prefill[0].labels[port.DYNAMO_NAMESPACE].endswith(new_hash)
    assert pods_of(cluster, "Frontend")[0].name in before
    assert status(cluster)["rollingUpdate"]["updatedServices"] == [
        "VllmPrefillWorker",
        "VllmDecodeWorker",
    ]


def test_a_frontend_change_replaces_the_frontend_in_place_and_leaves_workers_alone(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    manifest = builders.aggregated()
    settled(cluster, clock, manifest)
    workers, (frontend,) = worker_names(cluster), pods_of(cluster, "Frontend")

    cluster.apply_dgd(builders.with_args(manifest, "Frontend", ("--router-mode", "kv")))
    drive(cluster, clock)

    assert worker_names(cluster) == workers
    (new_frontend,) = pods_of(cluster, "Frontend")
    assert new_frontend.name != frontend.name and new_frontend.ready
    assert "rollingUpdate" not in status(cluster)


def test_a_second_change_during_a_rollout_converges_on_the_latest(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=4, gpus=4)
    settled(cluster, clock, manifest)
    cluster.apply_dgd(builders.with_args(manifest, "VllmWorker", NEW_ARGS))
    clock.tick(2)
    cluster.advance()

    latest = builders.with_args(manifest, "VllmWorker", ("--model", "other"))
    cluster.apply_dgd(latest)
    drive(cluster, clock, each=lambda c: None if gpus_in_use(c) <= 16 else pytest.fail("over"))

    workers = pods_of(cluster, "VllmWorker")
    assert len(workers) == 4
    assert all(p.ready and p.argv[-1] == "other" for p in workers)
    assert status(cluster)["rollingUpdate"]["phase"] == "Completed"


def test_scaling_during_a_rollout_ends_with_the_new_replica_count(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = builders.aggregated(replicas=4, gpus=4)
    settled(cluster, clock, manifest)
    changed = builders.with_args(manifest, "VllmWorker", NEW_ARGS)
    cluster.apply_dgd(changed)

    cluster.apply_dgd(builders.scaled(changed, "VllmWorker", 2))
    drive(cluster, clock)

    assert len(pods_of(cluster, "VllmWorker")) == 2
    assert status(cluster)["state"] == "successful"


# -- the arithmetic ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("desired", "unavailable"), [(0, 1), (1, 1), (3, 1), (4, 1), (7, 1), (8, 2), (16, 4), (10, 2)]
)
def test_max_unavailable_is_a_quarter_rounded_down_but_at_least_one(
    desired: int, unavailable: int
) -> None:
    assert max_unavailable(desired) == unavailable


def holder(key: str, node: str, *, frees: int = 4, ready: bool = True, seq: int = 0) -> Holder:
    return Holder(key=key, node=node, frees=frees, ready=ready, seq=seq)


@pytest.mark.parametrize(
    ("need", "free", "holders", "plan"),
    [
        (4, {"n0": 0}, [holder("a", "n0")], RoomPlan("n0", ("a",), 1)),
        (
            4,
            {"n0": 0, "n1": 2},
            [holder("a", "n0"), holder("b", "n1", frees=2)],
            RoomPlan("n0", ("a",), 1),
        ),
        (
            4,
            {"n0": 0, "n1": 2},
            [holder("a", "n0"), holder("b", "n1", frees=2, ready=False)],
            RoomPlan("n1", ("b",), 0),
        ),
        (
            4,
            {"n0": 0},
            [holder("a", "n0", frees=2), holder("b", "n0", frees=2, ready=False)],
            RoomPlan("n0", ("b", "a"), 1),
        ),
        (4, {"n0": 0, "n1": 0}, [holder("a", "n0", frees=2), holder("b", "n1", frees=2)], None),
        (
            8,
            {"n0": 0},
            [
                holder("a", "n0", frees=0),
                holder("b", "n0", frees=4, seq=1),
                holder("c", "n0", frees=4, seq=2),
            ],
            RoomPlan("n0", ("c", "b"), 2),
        ),
        (16, {"n0": 0}, [holder("a", "n0", frees=8)], None),
    ],
)
def test_plan_room_frees_devices_on_one_node_at_the_least_cost(
    need: int, free: dict[str, int], holders: list[Holder], plan: RoomPlan | None
) -> None:
    assert plan_room(need, free_by_node=free, holders=holders) == plan


@pytest.mark.parametrize(
    ("need", "count", "room", "fits"),
    [
        (4, 4, {"n0": 8, "n1": 8}, True),
        (4, 5, {"n0": 8, "n1": 8}, False),
        (8, 2, {"n0": 12, "n1": 4}, False),
        (0, 3, {"n0": 0}, True),
        (1, 1, {}, False),
    ],
)
def test_fits_all_packs_whole_pods_per_node(
    need: int, count: int, room: dict[str, int], fits: bool
) -> None:
    assert fits_all(need, count, room_by_node=room) is fits


# -- the surge limit the hub admits (wingsmith.dev/max-surge) --------------------------------


def with_surge(manifest: dict, **surge: int) -> dict:
    import copy
    import json

    edited = copy.deepcopy(manifest)
    annotations = edited["metadata"].setdefault("annotations", {})
    annotations["wingsmith.dev/max-surge"] = json.dumps(surge)
    return edited


@pytest.mark.parametrize(("surge", "peak"), [(0, 8), (1, 10), (4, 16)])
def test_a_rollout_never_holds_more_than_replicas_plus_the_max_surge(
    make_cluster: MakeCluster, clock: FakeClock, surge: int, peak: int
) -> None:
    cluster = make_cluster("nodes=2,gpus=8,ready_after=2s")
    manifest = with_surge(builders.aggregated(replicas=4, gpus=2), VllmWorker=surge)
    settled(cluster, clock, manifest)
    seen = [gpus_in_use(cluster)]

    cluster.apply_dgd(builders.with_args(manifest, "VllmWorker", NEW_ARGS))
    seen.append(gpus_in_use(cluster))
    drive(cluster, clock, each=lambda c: seen.append(gpus_in_use(c)))

    assert max(seen) == peak
    new_names = worker_names(cluster)
    assert len(new_names) == 4
    assert all(p.ready for p in pods_of(cluster, "VllmWorker"))
    assert status(cluster)["state"] == "successful"


def test_with_no_surge_a_rollout_still_converges_one_replica_at_a_time(
    make_cluster: MakeCluster, clock: FakeClock
) -> None:
    cluster = make_cluster("nodes=1,gpus=8,ready_after=2s")
    manifest = with_surge(builders.aggregated(replicas=1, gpus=8), VllmWorker=0)
    settled(cluster, clock, manifest)
    cluster.apply_dgd(builders.with_args(manifest, "VllmWorker", NEW_ARGS))
    drive(cluster, clock, each=lambda c: assert_at_most(c, 8))
    (pod,) = pods_of(cluster, "VllmWorker")
    assert pod.ready and pod.argv[-1] == "8192"


def assert_at_most(cluster: SimulatedCluster, gpus: int) -> None:
    assert gpus_in_use(cluster) <= gpus


def test_an_unreadable_surge_limit_counts_as_zero() -> None:
    from agent.cluster.simulated.rollout import MAX_SURGE_ANNOTATION, max_surge

    assert max_surge({}, "VllmWorker") is None
    assert max_surge({MAX_SURGE_ANNOTATION: "{}"}, "VllmWorker") is None
    assert max_surge({MAX_SURGE_ANNOTATION: '{"VllmWorker": 2}'}, "VllmWorker") == 2
    assert max_surge({MAX_SURGE_ANNOTATION: "not json"}, "VllmWorker") == 0
    assert max_surge({MAX_SURGE_ANNOTATION: '{"VllmWorker": "x"}'}, "VllmWorker") == 0
