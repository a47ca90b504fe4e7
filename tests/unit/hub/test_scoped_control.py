"""Control calls under scoped write locks (hub/service/scoped.py, docs/architecture.md "Write
locks"), run at once from several stores (as on several hubs), on both backends: scale-ups of
one project's workloads on separate clusters, racing with changes of its quota, never admit
past the quota; changes of one workload's placement and replicas racing with each other leave
its deployments' shares adding up to its replicas (a change that found a cluster joined its
workload meanwhile ran again with that cluster's lock)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

import psycopg
import pytest

from hub import errors
from hub.model import (
    Device,
    DiscoveredObservation,
    FailoverPolicy,
    NodeObservation,
    ObservationBatch,
    Placement,
    RolloutPolicy,
    Serving,
)
from hub.service import (
    admit,
    adoption,
    clusters,
    failover,
    ingest,
    projects,
    rollouts,
    scoped,
    sync,
    workloads,
)
from hub.service.context import ServiceContext, Tx, transaction
from hub.store import deployments as deployment_rows
from hub.store import port
from hub.store import projects as project_rows
from hub.store.port import open_store
from tests.harness import wait_until

H100 = "H100-80GB"
CLUSTERS = tuple(f"east{i}" for i in range(4))
SERVING = Serving(engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=4)


def _gpus(cluster_id: str, n: int) -> tuple[Device, ...]:
    return tuple(
        Device(f"GPU-{cluster_id}-{i}", "H100", 80, f"0:{i}", H100, True, "", verified=True)
        for i in range(n)
    )


def _store(url: str) -> ServiceContext:
    return ServiceContext(
        db=open_store(url, pool_size=2)
        if port.is_postgres(url)
        else open_store(url, busy_timeout_s=30)
    )


def _at_once(calls: list[Callable[[ServiceContext], None]], url: str) -> None:
    """Each call on its own store, all released together; any failure re-raised here."""
    failures: list[BaseException] = []
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[ServiceContext], None]) -> None:
        ctx = _store(url)
        try:
            barrier.wait()
            call(ctx)
        except BaseException as e:  # re-raised in the test's thread
            failures.append(e)
        finally:
            ctx.db.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def _fleet(setup: ServiceContext, *, quota: int) -> None:
    projects.create(setup, name="search", quotas={H100: quota})
    for cluster_id in CLUSTERS:
        clusters.create(setup, cluster_id=cluster_id, labels={"zone": "east"})
        node = NodeObservation("n1", time.time_ns(), _gpus(cluster_id, 16), ())
        ingest.ingest(setup, [(cluster_id, ObservationBatch(seq=1, nodes=(node,)))])


def test_scale_ups_on_separate_clusters_never_admit_past_the_quota(store_url: str) -> None:
    """Each scale is scoped to its workload's cluster; the project's admission lock keeps
    the quota, also against quota changes (scoped to every cluster of the project)."""
    setup = _store(store_url)
    _fleet(setup, quota=16)
    for cluster_id in CLUSTERS:
        workloads.create(
            setup,
            workloads.WorkloadSpec(
                name=f"w-{cluster_id}",
                project="search",
                replicas=1,
                device_class=H100,
                serving=SERVING,
                placement=Placement(clusters=(cluster_id,)),
            ),
        )
    # 4 replicas of 4 devices admitted: the quota is full.
    assert projects.get(setup, "search").usage[H100].reserved == 16

    def scale(cluster_id: str) -> Callable[[ServiceContext], None]:
        return lambda ctx: (
            workloads.update(ctx, f"w-{cluster_id}", workloads.WorkloadChange(replicas=3)),
            None,
        )[1]

    def quota(limit: int) -> Callable[[ServiceContext], None]:
        return lambda ctx: (projects.set_quotas(ctx, name="search", quotas={H100: limit}), None)[1]

    _at_once([scale(c) for c in CLUSTERS] + [quota(24), quota(24)], store_url)
    limit = projects.get(setup, "search").project.quotas[H100]
    usage = projects.get(setup, "search").usage[H100]
    assert usage.reserved + usage.used <= limit, "never past the quota"
    # (Both raise it to 24: a lowered quota evicts nothing, so two different limits racing
    # could leave more reserved than the one committed last.) The last pass to decide
    # admitted up to it: 4 workloads of 3 replicas want 48 devices.
    assert usage.reserved + usage.used == limit
    setup.db.close()


def test_racing_changes_of_one_workload_keep_its_shares_adding_up(store_url: str) -> None:
    """Placement changes (which move its deployments to other clusters) and scales of the
    same workload, all at once: each began with the clusters it saw, and one that found its
    workload on a cluster it had not locked ran again with it (WiderScope), so none decided
    on shares another had changed under it."""
    setup = _store(store_url)
    _fleet(setup, quota=1000)
    workloads.create(
        setup,
        workloads.WorkloadSpec(
            name="chat",
            project="search",
            replicas=2,
            device_class=H100,
            serving=SERVING,
            placement=Placement(clusters=CLUSTERS[:1]),
        ),
    )

    def move(to: tuple[str, ...]) -> Callable[[ServiceContext], None]:
        change = workloads.WorkloadChange(placement=Placement(clusters=to))
        return lambda ctx: (workloads.update(ctx, "chat", change), None)[1]

    def scale(replicas: int) -> Callable[[ServiceContext], None]:
        change = workloads.WorkloadChange(replicas=replicas)
        return lambda ctx: (workloads.update(ctx, "chat", change), None)[1]

    _at_once(
        [move(CLUSTERS[1:2]), move(CLUSTERS[2:4]), scale(3), scale(5), move(CLUSTERS[:1])],
        store_url,
    )
    chat = workloads.get(setup, "chat")
    with setup.db.read() as conn:
        found = deployment_rows.of_workload(conn, chat.workload.workload_id)
    # Deployments leaving a cluster that left the placement keep their replicas until their
    # replacements run (make-before-break): only those on its clusters add up to it.
    placed = {
        d.cluster_id: d.desired_replicas
        for d in found
        if d.cluster_id in chat.workload.placement.clusters
    }
    assert sum(placed.values()) == chat.workload.replicas, (chat.workload.placement, found)
    setup.db.close()


def test_a_workload_with_no_deployment_is_changed_under_the_covering_lock(
    store_url: str,
) -> None:
    """No cluster lock guards the row of a workload with no deployment: the change runs
    again covering (it asked for NeedsCovering under its first, empty scope)."""
    setup = _store(store_url)
    _fleet(setup, quota=16)
    workloads.create(
        setup,
        workloads.WorkloadSpec(
            name="idle",
            project="search",
            replicas=0,
            device_class=H100,
            serving=SERVING,
            placement=Placement(clusters=CLUSTERS[:1]),
        ),
    )
    seen: list[bool] = []
    workload = workloads.spec(setup, "idle")
    with setup.db.read() as conn:
        assert deployment_rows.of_workload(conn, workload.workload_id) == []

    def body(tx: Tx) -> None:
        seen.append(tx.conn.locks.covering)
        workloads._update(setup, tx, "idle", workloads.WorkloadChange(labels={"a": "b"}))

    scoped.write(setup, (), body)
    assert seen == [False, True]
    assert workloads.spec(setup, "idle").labels == {"a": "b"}
    setup.db.close()


def _spec(name: str, project: str, cluster_id: str) -> workloads.WorkloadSpec:
    return workloads.WorkloadSpec(
        name=name,
        project=project,
        replicas=1,
        device_class=H100,
        serving=SERVING,
        placement=Placement(clusters=(cluster_id,)),
    )


def test_creates_of_one_name_from_several_stores_make_one_workload(store_url: str) -> None:
    """Creates of one name in different projects on different clusters share no write lock
    (each is scoped to its own cluster and project): the workloads table's unique index on
    the name decides, so exactly one is created and every other is AlreadyExists (409), never
    two workloads of one name."""
    setup = _store(store_url)
    _fleet(setup, quota=16)
    for i in range(len(CLUSTERS)):
        projects.create(setup, name=f"team{i}", quotas={H100: 16})
    created: list[str] = []
    refused: list[str] = []

    def create(i: int) -> Callable[[ServiceContext], None]:
        def call(ctx: ServiceContext) -> None:
            try:
                workloads.create(ctx, _spec("chat", f"team{i}", CLUSTERS[i]))
                created.append(CLUSTERS[i])
            except errors.AlreadyExists:
                refused.append(CLUSTERS[i])

        return call

    _at_once([create(i) for i in range(len(CLUSTERS))], store_url)
    assert len(created) == 1 and len(refused) == len(CLUSTERS) - 1, (created, refused)
    chat = workloads.get(setup, "chat")
    assert [d.deployment.cluster_id for d in chat.deployments] == created
    with setup.db.read() as conn:
        found = deployment_rows.on_clusters(conn, list(CLUSTERS))
    assert [d.cluster_id for d in found] == created, "no deployment of a refused create"
    setup.db.close()


def test_creates_racing_with_quota_changes_admit_up_to_the_quota_and_never_past_it(
    store_url: str,
) -> None:
    """Creates of one project's workloads on clusters where it has none yet (each scoped to
    its own cluster) race with changes of its quota (scoped to the clusters where it has
    deployments): the project's lock orders them. A quota change that committed first is what
    a create's admission reads; a create that committed first is seen by the quota change,
    which runs again with its cluster. Without the project lock, a quota change could find a
    deployment on a cluster it holds no lock of (refused at commit), or decide before a create
    committed while that create admitted under the old quota: it would wait for nothing."""
    setup = _store(store_url)
    _fleet(setup, quota=4)
    workloads.create(setup, _spec("w-east0", "search", CLUSTERS[0]))

    def create(cluster_id: str) -> Callable[[ServiceContext], None]:
        return lambda ctx: (
            workloads.create(ctx, _spec(f"w-{cluster_id}", "search", cluster_id)),
            None,
        )[1]

    def quota(limit: int) -> Callable[[ServiceContext], None]:
        return lambda ctx: (projects.set_quotas(ctx, name="search", quotas={H100: limit}), None)[1]

    _at_once([create(c) for c in CLUSTERS[1:]] + [quota(24), quota(24)], store_url)
    usage = projects.get(setup, "search").usage[H100]
    # Four workloads of one replica of 4 devices: 16 wanted, the quota (24) fits them all.
    assert usage.reserved + usage.used == 16, usage
    setup.db.close()


def _waiting_locks(url: str) -> int:
    """Lock requests of this database not granted (a write waiting for another's lock)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND database ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
        return int(row[0]) if row else 0


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as e:  # re-raised in the test's thread
            failures.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, failures


def _admitted(ctx: ServiceContext, name: str) -> int:
    return sum(d.deployment.admitted_replicas for d in workloads.get(ctx, name).deployments)


def _search_quota_full(
    store_url: str,
) -> tuple[ServiceContext, ServiceContext, ServiceContext]:
    """PostgreSQL only (skips on SQLite, one writer): the fleet with project search's quota
    full on east0; three stores on it (set-up and reads, a creator, a quota changer)."""
    if not port.is_postgres(store_url):
        pytest.skip("SQLite has one writer: no two writes run at once")
    setup = _store(store_url)
    _fleet(setup, quota=4)
    workloads.create(setup, _spec("w-east0", "search", CLUSTERS[0]))  # the quota is full
    return setup, _store(store_url), _store(store_url)


def test_a_create_waits_for_its_projects_quota_change_and_admits_under_it(
    store_url: str,
) -> None:
    """A quota change holds its project's lock from before it reads where the project has
    deployments: a create of the project on a cluster where it has none (scoped to that
    cluster only) waits for it, then admits under the new quota. Without the project lock
    the create admitted under the old quota meanwhile (nothing), and the quota change's
    pass, finding its deployment committed on a cluster it holds no lock of, was refused."""
    setup, creator, changer = _search_quota_full(store_url)
    with transaction(changer, [CLUSTERS[0]]) as tx:
        projects._need_clusters(tx, "search")
        project_rows.set_quotas(tx.conn, name="search", quotas={H100: 8}, now=tx.now)
        thread, failures = _in_thread(
            lambda: workloads.create(creator, _spec("w-east1", "search", CLUSTERS[1]))
        )
        wait_until(lambda: _waiting_locks(store_url) >= 1, what="the create waiting")
        admit.run(changer, tx, project_names=["search"])
    thread.join()
    assert failures == []
    assert _admitted(setup, "w-east1") == 1, "admitted under the quota committed first"
    for ctx in (setup, creator, changer):
        ctx.db.close()


def test_a_quota_change_waits_for_a_create_of_its_project_and_decides_with_it(
    store_url: str,
) -> None:
    """The other order: a create holding its project's lock (its deployment waits: the quota
    is full) makes a quota change of the project wait; the change then finds the new
    deployment on a cluster it had not locked, runs again with it (WiderScope) and admits it.
    Without the project lock the change decided before the create committed, and the new
    deployment waited for a quota change already made."""
    setup, creator, changer = _search_quota_full(store_url)
    spec = workloads._valid_spec(_spec("w-east1", "search", CLUSTERS[1]))
    with transaction(creator, [CLUSTERS[1]]) as tx:
        workloads._create(creator, tx, spec)
        thread, failures = _in_thread(
            lambda: projects.set_quotas(changer, name="search", quotas={H100: 8})
        )
        wait_until(lambda: _waiting_locks(store_url) >= 1, what="the quota change waiting")
    thread.join()
    assert failures == []
    assert _admitted(setup, "w-east1") == 1, "admitted by the quota change that came after"
    for ctx in (setup, creator, changer):
        ctx.db.close()


def test_the_failover_tick_and_the_rollout_sweep_do_not_wait_for_another_clusters_write(
    store_url: str,
) -> None:
    """While a write holding cluster east0's lock stays open (as a slow ingest would), the
    failover tick (a workload on east1 and east2 whose east1 went silent) and the rollout sweep
    (a wave on east3 past its deadline) do their work: each is scoped to the clusters its due
    workloads' decisions read. Under the covering lock (the code before) each waited for the
    open write."""
    if not port.is_postgres(store_url):
        pytest.skip("SQLite has one writer: no two writes run at once")
    setup = _store(store_url)
    _fleet(setup, quota=1000)
    now = time.time()
    sync.record_liveness(setup, last_seen={c: now for c in CLUSTERS}, applied={})
    workloads.create(
        setup,
        workloads.WorkloadSpec(
            name="moving",
            project="search",
            replicas=1,
            device_class=H100,
            serving=SERVING,
            placement=Placement(
                clusters=CLUSTERS[1:3],
                failover=FailoverPolicy(toleration_s=1, stabilization_s=1),
            ),
        ),
    )
    (lost,) = [d.deployment.cluster_id for d in workloads.get(setup, "moving").deployments]
    # On the clock of the chores below (100 s on): every cluster but `lost` heard from.
    heard = {c: now + 100 for c in CLUSTERS if c != lost}
    sync.record_liveness(setup, last_seen=heard, applied={})
    rolling = _spec("rolling", "search", CLUSTERS[3])
    workloads.create(
        setup,
        replace(
            rolling, rollout_policy=RolloutPolicy(max_clusters_in_flight=1, wave_deadline_seconds=1)
        ),
    )
    workloads.update(
        setup,
        "rolling",
        workloads.WorkloadChange(serving=replace(SERVING, engine_version="0.11.1")),
    )
    assert workloads.spec(setup, "rolling").rollout.state == "rolling"
    late = ServiceContext(db=setup.db, clock=lambda: time.time() + 100)
    with setup.db.write([CLUSTERS[0]]):
        for what, chore in (("failover tick", failover.tick), ("rollout sweep", rollouts.sweep)):
            thread, failures = _in_thread(lambda c=chore: c(late))
            wait_until(lambda t=thread: not t.is_alive(), timeout=30.0, what=f"{what} done")
            assert failures == []
        # Committed while east0's write is still open.
        moving = workloads.get(setup, "moving")
        assert [(r.cluster_id, r.state) for r in moving.failovers] == [(lost, "failed_over")]
        paused = workloads.spec(setup, "rolling").rollout
        assert (paused.state, paused.reason) == ("paused", "wave_deadline_exceeded"), paused
    setup.db.close()


def test_a_create_in_a_project_being_deleted_waits_and_finds_it_gone(store_url: str) -> None:
    """A project's deletion and a workload create in it hold the project's lock (neither
    holds the other's clusters): the create waits, then finds no project (404), never a
    workload of a deleted project, nor a bare constraint failure."""
    if not port.is_postgres(store_url):
        pytest.skip("SQLite has one writer: no two writes run at once")
    setup = _store(store_url)
    _fleet(setup, quota=16)
    projects.create(setup, name="doomed", quotas={H100: 16})
    creator, deleter = _store(store_url), _store(store_url)
    with transaction(deleter, ()) as tx:
        tx.conn.serialize(port.project_lock("doomed"))
        project_rows.delete(tx.conn, "doomed")
        thread, failures = _in_thread(
            lambda: workloads.create(creator, _spec("orphan", "doomed", CLUSTERS[1]))
        )
        wait_until(lambda: _waiting_locks(store_url) >= 1, what="the create waiting")
    thread.join()
    assert len(failures) == 1 and isinstance(failures[0], errors.NotFound), failures
    with setup.db.read() as conn:
        assert deployment_rows.on_clusters(conn, list(CLUSTERS)) == []
    for ctx in (setup, creator, deleter):
        ctx.db.close()


def test_promoting_a_discovered_dgd_does_not_wait_for_another_clusters_write(
    store_url: str,
) -> None:
    """A promote (adoption) is scoped to the cluster the DGD was found on and its project's
    lock: while a write holding east0's lock stays open, a DGD found on east1 is promoted;
    promoting it again is refused (the second finds it promoted). Under the covering lock
    (the code before) it waited for the open write."""
    if not port.is_postgres(store_url):
        pytest.skip("SQLite has one writer: no two writes run at once")
    setup = _store(store_url)
    _fleet(setup, quota=64)
    sighting = DiscoveredObservation("ml", "legacy", time.time_ns(), replicas=1, device_class=H100)
    ingest.ingest(setup, [(CLUSTERS[1], ObservationBatch(seq=2, discovered=(sighting,)))])
    ref = f"{CLUSTERS[1]}.ml.legacy"
    with setup.db.write([CLUSTERS[0]]):
        thread, failures = _in_thread(lambda: adoption.promote(setup, ref, project="search"))
        wait_until(lambda: not thread.is_alive(), timeout=30.0, what="promoted meanwhile")
        assert failures == []
    (adopted,) = workloads.get(setup, "legacy").deployments
    assert adopted.deployment.cluster_id == CLUSTERS[1]
    with pytest.raises(errors.FailedPrecondition, match="already promoted"):
        adoption.promote(setup, ref, project="search", workload_name="again")
    setup.db.close()
