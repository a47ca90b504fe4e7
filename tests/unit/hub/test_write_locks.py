"""The write locks' order (hub/store/locks.py, docs/architecture.md "Write locks"), on both
backends: a transaction records what it holds and refuses a lock that comes before one it
holds; a desired state is never changed without its cluster's lock; a write that needs more
clusters starts again with them; a leadership grant hands out every term once, even from
several stores at once; admission passes of separate clusters never admit past a shared
quota; a deadlock PostgreSQL breaks is StoreBusy (retry), never a bare database error."""

from __future__ import annotations

import threading
import time

import pytest

from hub import errors
from hub.model import Device, NodeObservation, ObservationBatch, Placement, Serving
from hub.service import clusters, projects, sync, workloads
from hub.service import ingest as ingest_service
from hub.service.context import ServiceContext, transaction
from hub.store import clusters as cluster_rows
from hub.store import port
from hub.store.port import open_store
from tests.harness import wait_until

H100 = "H100-80GB"


def test_the_lock_order_is_checked_per_transaction() -> None:
    locks = port.Locks(covering=False)
    assert locks.begin(["b", "a"]) == ["a", "b"]
    assert locks.take(port.admission_lock("red"))
    assert not locks.take(port.admission_lock("red")), "held: nothing to take again"
    assert locks.take(port.admission_lock("teal"))
    with pytest.raises(port.LockOrderError, match="out of order"):
        locks.take(port.admission_lock("blue"))  # before red: a cycle could close
    with pytest.raises(port.LockOrderError, match="out of order"):
        locks.take(port.DEVICES)  # device binding comes before admission
    assert locks.take(port.WATCH)
    with pytest.raises(port.LockOrderError, match="out of order"):
        locks.take(port.admission_lock("zinc"))  # admission comes before the watch
    with pytest.raises(port.LockOrderError, match="when it begins"):
        locks.take(port.cluster_lock("c"))  # a cluster lock only as the write begins
    with pytest.raises(port.LockOrderError, match="no lock named"):
        locks.take("everything")
    assert locks.missing(["a", "c"]) == ["c"]


def test_a_projects_lock_comes_after_the_clusters_and_before_devices_and_admission() -> None:
    """The project lock (a workload create, a quota change: the project's set of clusters)
    is level 3: after the cluster locks a write begins with, before device binding and the
    admission locks its pass takes."""
    locks = port.Locks(covering=False)
    locks.begin(["a"])
    assert locks.take(port.project_lock("blue"))
    assert locks.take(port.project_lock("red"))
    with pytest.raises(port.LockOrderError, match="out of order"):
        locks.take(port.project_lock("amber"))  # projects in name order
    assert locks.take(port.DEVICES)
    with pytest.raises(port.LockOrderError, match="out of order"):
        locks.take(port.project_lock("zinc"))  # after device binding: a cycle could close
    assert locks.take(port.admission_lock("amber"))
    with pytest.raises(port.LockOrderError, match="out of order"):
        locks.take(port.project_lock("zinc"))


def test_the_covering_lock_covers_every_other() -> None:
    locks = port.Locks(covering=True)
    assert locks.begin(["a"]) == []
    assert not locks.take(port.WATCH)
    assert not locks.take(port.admission_lock("red")), "after the watch, yet covered"
    assert locks.missing(["a", "z"]) == []


def test_too_many_clusters_take_the_covering_lock() -> None:
    many = [f"c{i}" for i in range(port.MAX_SCOPED_CLUSTERS + 1)]
    assert port.scope_of(many) is None
    assert port.scope_of(many[:2]) == {"c0", "c1"}
    assert port.scope_of(None) is None


def _two_clusters(store_url: str) -> ServiceContext:
    ctx = ServiceContext(db=open_store(store_url))
    for cluster_id in ("east", "west"):
        clusters.create(ctx, cluster_id=cluster_id, labels={})
    return ctx


def test_a_write_out_of_order_is_refused_on_either_backend(store_url: str) -> None:
    ctx = _two_clusters(store_url)
    with pytest.raises(port.LockOrderError), transaction(ctx, ["east"]) as tx:
        tx.conn.serialize(port.WATCH)
        tx.conn.serialize(port.admission_lock("red"))
    # A desired state changed without its cluster's lock never commits.
    with pytest.raises(port.LockOrderError, match="west"), transaction(ctx, ["east"]) as tx:
        cluster_rows.bump_revisions(tx.conn, ["east", "west"])
    with ctx.db.read() as conn:
        assert cluster_rows.get(conn, "east").desired_revision == 0  # type: ignore[union-attr]
    with transaction(ctx, ["east", "west"]) as tx:
        assert set(cluster_rows.bump_revisions(tx.conn, ["east", "west"])) == {"east", "west"}
    ctx.db.close()


def test_a_write_needing_more_clusters_starts_again_with_them(store_url: str) -> None:
    ctx = _two_clusters(store_url)
    scopes: list[frozenset[str] | None] = []

    def attempt(scope: frozenset[str] | None) -> int:
        scopes.append(scope)
        with transaction(ctx, scope) as tx:
            port.lock_clusters(tx.conn, ["west"])
            return cluster_rows.bump_revisions(tx.conn, ["east", "west"])["west"]

    assert port.retry_wider(attempt, ["east"]) == 1
    assert scopes == [{"east"}, {"east", "west"}]
    ctx.db.close()


def _grant_from_many_stores(url: str, *, stores: int, grants: int) -> list[int]:
    terms: list[int] = []
    failures: list[BaseException] = []
    barrier = threading.Barrier(stores)

    def granter() -> None:
        ctx = ServiceContext(
            db=open_store(url, pool_size=2)
            if port.is_postgres(url)
            else open_store(url, busy_timeout_s=30)
        )
        try:
            barrier.wait()
            for _ in range(grants):
                terms.append(sync.next_leader_term(ctx, cluster_id="east"))
        except BaseException as e:  # re-raised in the test's thread
            failures.append(e)
        finally:
            ctx.db.close()

    threads = [threading.Thread(target=granter) for _ in range(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    return terms


def test_grants_from_several_hubs_at_once_hand_out_every_term_once(store_url: str) -> None:
    ctx = _two_clusters(store_url)
    terms = _grant_from_many_stores(store_url, stores=4, grants=25)
    assert sorted(terms) == list(range(1, 101)), "every term handed out once"
    assert sync.raise_leader_term(ctx, cluster_id="east", term=0) == 100
    ctx.db.close()


def _gpus(cluster_id: str, n: int) -> tuple[Device, ...]:
    return tuple(
        Device(f"GPU-{cluster_id}-{i}", "H100", 80, f"0:{i}", H100, True, "", verified=True)
        for i in range(n)
    )


CLUSTERS = tuple(f"east{i}" for i in range(6))


def test_ingests_of_separate_clusters_never_admit_past_a_shared_quota(store_url: str) -> None:
    """Each cluster's capacity arrives in its own ingest, on its own store (as on several
    hubs), all at once: each ingest runs admission for its cluster under that cluster's lock
    only, and the project's quota is kept by the project's admission lock."""
    setup = ServiceContext(db=open_store(store_url))
    projects.create(setup, name="search", quotas={H100: 16})
    for cluster_id in CLUSTERS:
        clusters.create(setup, cluster_id=cluster_id, labels={})
        for j in range(3):
            workloads.create(
                setup,
                workloads.WorkloadSpec(
                    name=f"w-{cluster_id}-{j}",
                    project="search",
                    replicas=1,
                    device_class=H100,
                    serving=Serving(
                        engine="vllm", engine_version="0.11.0", model="m", tensor_parallel=4
                    ),
                    placement=Placement(clusters=(cluster_id,)),
                ),
            )
    failures: list[BaseException] = []
    barrier = threading.Barrier(len(CLUSTERS))

    def ingest(cluster_id: str) -> None:
        ctx = ServiceContext(
            db=open_store(store_url, pool_size=2)
            if port.is_postgres(store_url)
            else open_store(store_url, busy_timeout_s=30)
        )
        try:
            node = NodeObservation("n1", time.time_ns(), _gpus(cluster_id, 16), ())
            barrier.wait()
            ingest_service.ingest(ctx, [(cluster_id, ObservationBatch(seq=1, nodes=(node,)))])
        except BaseException as e:  # re-raised in the test's thread
            failures.append(e)
        finally:
            ctx.db.close()

    threads = [threading.Thread(target=ingest, args=(c,)) for c in CLUSTERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    usage = projects.get(setup, "search").usage[H100]
    assert usage.reserved + usage.used == 16, "exactly the quota, never more"
    setup.db.close()


def test_a_deadlock_is_store_busy(store_url: str) -> None:
    """Two writes taking the same two rows in opposite orders: PostgreSQL breaks the cycle by
    failing one (40P01), which leaves as StoreBusy (503, retry) with nothing written."""
    if not port.is_postgres(store_url):
        pytest.skip("SQLite has one writer: no two writes wait for each other")
    ctx = _two_clusters(store_url)
    both = threading.Barrier(2)
    outcomes: list[BaseException | None] = []

    def writer(first: str, second: str) -> None:
        try:
            with ctx.db.write(()) as tx:
                tx.execute("UPDATE clusters SET labels = labels WHERE cluster_id = ?", (first,))
                both.wait()
                tx.execute("UPDATE clusters SET labels = labels WHERE cluster_id = ?", (second,))
            outcomes.append(None)
        except BaseException as e:  # looked at in the test's thread
            outcomes.append(e)

    threads = [
        threading.Thread(target=writer, args=("east", "west")),
        threading.Thread(target=writer, args=("west", "east")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [e for e in outcomes if e is not None]
    assert len(failed) == 1 and isinstance(failed[0], errors.StoreBusy), outcomes
    assert failed[0].grpc_code.name == "UNAVAILABLE"
    ctx.db.close()


def test_a_client_certificate_check_does_not_wait_for_another_clusters_write(
    store_url: str,
) -> None:
    """A stream open's certificate check (mutual TLS) takes the fleet lock shared only: while
    a write of east stays open it answers, and a revoked certificate is still refused (its
    revocation is a covering write). Under the covering lock (the code before) it waited."""
    if not port.is_postgres(store_url):
        pytest.skip("SQLite has one writer: no two writes run at once")
    ctx = _two_clusters(store_url)
    clusters.check_certificate(ctx, cluster_id="west", fingerprint="f-old")
    clusters.rotate_token(ctx, "west", revoke_certificates=True)
    outcomes: list[BaseException | None] = []

    def check(fingerprint: str) -> None:
        try:
            clusters.check_certificate(ctx, cluster_id="west", fingerprint=fingerprint)
            outcomes.append(None)
        except BaseException as e:  # looked at in the test's thread
            outcomes.append(e)

    with ctx.db.write(["east"]):
        for fingerprint in ("f-new", "f-old"):
            thread = threading.Thread(target=check, args=(fingerprint,))
            thread.start()
            wait_until(lambda t=thread: not t.is_alive(), timeout=30.0, what="checked meanwhile")
    assert outcomes[0] is None
    assert isinstance(outcomes[1], errors.Unauthenticated), outcomes
    ctx.db.close()
