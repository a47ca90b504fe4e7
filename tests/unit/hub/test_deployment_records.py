"""A deployment's stored form (hub/store/deployments.py): indexed columns plus one JSON body
derived from the model's fields, on each backend. Every field comes back as saved; a body
written before a field existed reads that field's default; a field of a type with no stored
form is named when the module loads, not at the first row."""

from __future__ import annotations

import dataclasses

import pytest

from hub import errors
from hub.model import Placement, Workload
from hub.store import clusters, codec, deployments, workloads
from hub.store.port import open_store
from tests.records import CONFIG, every_field_deployment


def _seed(url: str) -> None:
    with open_store(url).write() as conn:
        conn.execute(
            "INSERT INTO projects (name, create_time, update_time) VALUES ('search', 1, 1)"
        )
        clusters.insert(conn, cluster_id="east", labels={}, token_hash="h", now=1.0)
        workloads.insert(
            conn,
            Workload(
                workload_id="wl_0000000000000001",
                name="chat",
                project="search",
                replicas=5,
                device_class="H100-80GB",
                serving=CONFIG,
                placement=Placement(clusters=("east",), topology="nvlink"),
                create_time=1.0,
                update_time=1.0,
            ),
        )


def test_every_field_comes_back_as_saved_and_an_update_replaces_the_rest(store_url: str) -> None:
    _seed(store_url)
    db = open_store(store_url)
    saved = every_field_deployment(enabled=False)
    with db.write() as conn:
        revision = deployments.save(conn, saved)
    with db.read() as conn:
        assert deployments.get(conn, saved.deployment_id) == dataclasses.replace(
            saved, revision=revision
        )
    changed = dataclasses.replace(
        saved,
        enabled=True,
        rolling=False,
        engine_args=(),
        adopted_from="",
        update_time=1700000200.0,
        admitted_replicas=5,
    )
    with db.write() as conn:
        revision = deployments.save(conn, changed)
    with db.read() as conn:
        assert deployments.get(conn, "chat.east") == dataclasses.replace(changed, revision=revision)
    db.close()


def test_a_body_written_before_a_field_existed_reads_its_default(store_url: str) -> None:
    _seed(store_url)
    db = open_store(store_url)
    with db.write() as conn:
        deployments.save(conn, every_field_deployment(enabled=False))
        # As a hub stored it before adopted_from and dgd_name were fields: keys absent.
        body = codec.loads(conn.execute("SELECT body FROM deployments").fetchone()["body"])
        del body["adopted_from"], body["dgd_name"]
        conn.execute("UPDATE deployments SET body = ?", (codec.dumps(body),))
    with db.read() as conn:
        read = deployments.get(conn, "chat.east")
    assert read is not None
    assert (read.adopted_from, read.dgd_name, read.dgd_namespace) == ("", "", "team-a")
    db.close()


@dataclasses.dataclass(frozen=True)
class Odd:
    name: str
    weights: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Pair:
    left: str
    right: int = 0


@dataclasses.dataclass(frozen=True)
class Holder:
    pairs: tuple[Pair, ...] = ()
    ratio: float = 0.0
    # A map (a proto map field's record form): a JSON object, each value by its type.
    by_name: dict[str, Pair] = dataclasses.field(default_factory=dict)


def test_a_field_of_a_type_with_no_stored_form_is_named_up_front() -> None:
    with pytest.raises(TypeError, match=r"Odd\.weights: no stored form"):
        codec.Fields(Odd)
    # Nested records and tuples of them have one, derived the same way.
    fields = codec.Fields(Holder)
    value = Holder(pairs=(Pair("a", 1), Pair("b")), ratio=2.0, by_name={"c": Pair("c", 3)})
    assert fields.record(codec.loads(fields.dumps(value))) == value
    assert isinstance(fields.record({"ratio": 2}).ratio, float)


def test_save_many_takes_one_revision_per_cluster_and_writes_each_whole(store_url: str) -> None:
    _seed(store_url)
    db = open_store(store_url)
    with db.write() as conn:
        clusters.insert(conn, cluster_id="west", labels={}, token_hash="h2", now=1.0)
        for n in (2, 3):
            workloads.insert(conn, _workload(n))
        before = deployments.save(conn, every_field_deployment(deployment_id="dep_0"))
    # (workload_name and topology are read from the workload.)
    first = every_field_deployment(
        deployment_id="dep_1", workload_id="wl_2", workload_name="chat2", topology=""
    )
    second = every_field_deployment(
        deployment_id="dep_2", workload_id="wl_3", workload_name="chat3", topology=""
    )
    third = every_field_deployment(deployment_id="dep_3", cluster_id="west")
    with db.write() as conn:
        deployments.save_many(conn, [first, second, third])
    with db.read() as conn:
        got = {d: deployments.get(conn, d) for d in ("dep_1", "dep_2", "dep_3")}
        east = clusters.get(conn, "east")
        west = clusters.get(conn, "west")
    assert east is not None and west is not None
    # One change to east's desired state, read by its agent as one delta.
    assert before > 0
    assert got["dep_1"] == dataclasses.replace(first, revision=before + 1)
    assert got["dep_2"] == dataclasses.replace(second, revision=before + 1)
    assert got["dep_3"] == dataclasses.replace(third, revision=west.desired_revision)
    assert east.desired_revision == before + 1

    with db.read() as conn:
        changed = deployments.changed_since(conn, "east", before)
    assert sorted(d.deployment_id for d in changed) == ["dep_1", "dep_2"]

    with pytest.raises(errors.NotFound, match="mars"), db.write() as conn:
        deployments.save_many(conn, [every_field_deployment(deployment_id="x", cluster_id="mars")])


def _workload(n: int) -> Workload:
    return Workload(
        workload_id=f"wl_{n}",
        name=f"chat{n}",
        project="search",
        replicas=1,
        device_class="H100-80GB",
        serving=CONFIG,
        placement=Placement(clusters=("east",)),
        create_time=1.0,
        update_time=1.0,
    )
