"""Queries over a set of ids bind them a statement's worth at a time (`port.chunks`), so a set
larger than either engine binds in one statement (SQLite 32,766 parameters, PostgreSQL
65,535) is answered whole, in the order the query promises, on each backend."""

from __future__ import annotations

from hub.model import Device, NodeObservation, Placement, Workload
from hub.store import clusters, deployments, failovers, observations, workloads
from hub.store import nodes as node_store
from hub.store.port import IN_CHUNK, chunks, open_store
from tests.records import CONFIG, every_field_deployment

MANY = 70_000  # past both engines' limits on bound parameters


def _ids(prefix: str, *real: str) -> list[str]:
    return [*(f"{prefix}-{i}" for i in range(MANY)), *real]


def test_chunks_are_sorted_without_repeats_and_none_too_long() -> None:
    values = [f"id-{i % 1234}" for i in range(5000)]
    got = list(chunks(values))
    assert [v for chunk in got for v in chunk] == sorted(set(values))
    assert all(0 < len(chunk) <= IN_CHUNK for chunk in got)
    assert list(chunks([])) == []


def test_more_ids_than_a_statement_binds_are_all_answered(store_url: str) -> None:
    db = open_store(store_url)
    saved = every_field_deployment(cluster_id="west", pending_since=2.0)
    other = every_field_deployment(
        deployment_id="dep_0000000000000002", cluster_id="east", pending_since=1.0
    )
    with db.write() as conn:
        conn.execute(
            "INSERT INTO projects (name, create_time, update_time) VALUES ('search', 1, 1)"
        )
        for cluster_id in ("east", "west"):
            clusters.insert(conn, cluster_id=cluster_id, labels={}, token_hash=cluster_id, now=1.0)
        workloads.insert(
            conn,
            Workload(
                workload_id=saved.workload_id,
                name="chat",
                project="search",
                replicas=5,
                device_class="H100-80GB",
                serving=CONFIG,
                placement=Placement(clusters=("east", "west"), topology="nvlink"),
                create_time=1.0,
                update_time=1.0,
            ),
        )
        deployments.save(conn, saved)
        deployments.save(conn, other)
    both = ["dep_0000000000000002", "dep_0000000000000001"]
    with db.read() as conn:
        cluster_ids = _ids("c", "west", "east")
        assert [d.cluster_id for d in deployments.on_clusters(conn, cluster_ids)] == [
            "east",
            "west",
        ]
        assert [
            d.cluster_id for d in deployments.of_workloads(conn, _ids("w", saved.workload_id))
        ] == [
            "east",
            "west",
        ]
        assert [d.deployment_id for d in deployments.waiting(conn, cluster_ids=cluster_ids)] == both
        assert deployments.workloads_on(conn, cluster_ids) == {saved.workload_id}
        assert deployments.owners(conn, _ids("d", *both)) == {both[0]: "east", both[1]: "west"}
        assert deployments.tombstoned(conn, "east", _ids("d", *both)) == set()
        assert failovers.of_workloads(conn, _ids("w", saved.workload_id)) == {}
        assert failovers.active_workloads_among(conn, _ids("w", saved.workload_id)) == []
        assert observations.rejections(conn, _ids("d", *both)) == {}
    db.close()


def test_rows_written_many_statements_at_a_time_keep_the_last_of_a_repeated_key(
    store_url: str,
) -> None:
    """Multi-row writes (`port.write_rows`) bind up to a statement's worth of rows each: a node
    group of more rows than a statement holds is written whole, a device reported twice in one
    group keeps the last report (as a statement per row did; PostgreSQL refuses to update a row
    twice in one statement), and a node that lost devices loses exactly those."""
    db = open_store(store_url)
    nodes = 40
    per_node = 64  # 2,560 device rows: past port.ROWS_PER_STATEMENT (1,000)
    with db.write() as conn:
        clusters.insert(conn, cluster_id="west", labels={}, token_hash="west", now=1.0)

    def device(n: int, g: int, *, healthy: bool = True) -> Device:
        return Device(
            f"GPU-{n}-{g}",
            "H100",
            80,
            f"0:{g}",
            "H100-80GB",
            healthy=healthy,
            health_reason="",
            verified=True,
        )

    group = [
        ("west", NodeObservation(f"n{n}", 10, tuple(device(n, g) for g in range(per_node)), ()))
        for n in range(nodes)
    ]
    # The same device twice in one node's report: the later one wins.
    twice = NodeObservation("n0", 10, (*group[0][1].devices, device(0, 0, healthy=False)), ())
    group[0] = ("west", twice)
    with db.write() as conn:
        written = node_store.write_nodes(conn, group)
    assert written.nodes == nodes and written.capacity_changed == {"west"}
    # Later, every node drops its last device.
    fewer = [
        ("west", NodeObservation(f"n{n}", 20, tuple(device(n, g) for g in range(per_node - 1)), ()))
        for n in range(nodes)
    ]
    with db.write() as conn:
        node_store.write_nodes(conn, fewer)
    with db.read() as conn:
        held = {
            (n.node_id, d.uuid): d for n in node_store.nodes_of(conn, "west") for d in n.devices
        }
    assert len(held) == nodes * (per_node - 1)
    assert held[("n0", "GPU-0-0")].healthy  # rewritten by the newer, healthy report
    with db.read() as conn:
        assert conn.execute("SELECT healthy FROM devices WHERE uuid = 'GPU-1-0'").fetchone()[0] == 1
    db.close()


def test_a_device_reported_twice_in_one_group_is_stored_once(store_url: str) -> None:
    """Two rows for one key in one multi-row upsert: written as one (PostgreSQL refuses to
    update a row twice in one statement), the same on both backends."""
    db = open_store(store_url)
    with db.write() as conn:
        clusters.insert(conn, cluster_id="west", labels={}, token_hash="west", now=1.0)
        twice = NodeObservation(
            "n0",
            10,
            (
                Device(
                    "GPU-a",
                    "H100",
                    80,
                    "0:0",
                    "H100-80GB",
                    healthy=True,
                    health_reason="",
                    verified=False,
                ),
                Device(
                    "GPU-a",
                    "H100",
                    80,
                    "0:0",
                    "H100-80GB",
                    healthy=False,
                    health_reason="x",
                    verified=False,
                ),
            ),
            (),
        )
        node_store.write_nodes(conn, [("west", twice)])
    with db.read() as conn:
        rows = conn.execute("SELECT healthy FROM devices WHERE uuid = 'GPU-a'").fetchall()
    assert len(rows) == 1
    db.close()
