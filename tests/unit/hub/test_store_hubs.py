"""The store's record of hubs and the streams they hold, on each backend: what several hubs on
one database rely on (heartbeats, sweeping dead hubs, superseding a stream across hubs)."""

from __future__ import annotations

from hub.model import AgentSession
from hub.service.context import payloads
from hub.store import clusters
from hub.store.port import open_store


def _session(session_id: str) -> AgentSession:
    return AgentSession(
        session_id=session_id,
        instance=session_id,
        node_name="",
        leader=False,
        agent_version="1",
        connect_time=1.0,
    )


def test_a_stream_on_another_hub_in_the_same_slot_is_superseded(store_url: str) -> None:
    db = open_store(store_url)
    with db.write() as tx:
        clusters.insert(tx, cluster_id="east", labels={}, token_hash="h", now=1.0)
        for hub_id in ("hub_a", "hub_b"):
            clusters.register_hub(tx, hub_id=hub_id, now=1.0)
        assert (
            clusters.open_session(
                tx, _session("ss_1"), cluster_id="east", read_only=False, hub_id="hub_a", slot=""
            )
            == []
        )
        # Another slot (a DaemonSet pod) on another hub is left alone.
        assert (
            clusters.open_session(
                tx,
                _session("ss_2"),
                cluster_id="east",
                read_only=False,
                hub_id="hub_b",
                slot="pod-1",
            )
            == []
        )
        superseded = clusters.open_session(
            tx, _session("ss_3"), cluster_id="east", read_only=False, hub_id="hub_b", slot=""
        )
    assert superseded == [("ss_1", "hub_a")]
    with db.read() as tx:
        held = clusters.sessions(tx, ["east"])["east"]
    assert sorted(s.session_id for s in held) == ["ss_2", "ss_3"]
    db.close()


def test_dead_hubs_and_their_streams_are_swept_live_ones_kept(store_url: str) -> None:
    db = open_store(store_url)
    with db.write() as tx:
        clusters.insert(tx, cluster_id="east", labels={}, token_hash="h", now=1.0)
        clusters.register_hub(tx, hub_id="hub_old", now=1.0)
        clusters.register_hub(tx, hub_id="hub_new", now=1.0)
        assert clusters.beat(tx, hub_id="hub_new", now=100.0)
        clusters.open_session(
            tx, _session("ss_old"), cluster_id="east", read_only=False, hub_id="hub_old", slot="a"
        )
        clusters.open_session(
            tx, _session("ss_new"), cluster_id="east", read_only=False, hub_id="hub_new", slot="b"
        )
        assert clusters.sweep_dead_hubs(tx, beat_before=50.0) == ["hub_old"]
        assert clusters.live_hubs(tx) == ["hub_new"]
        assert not clusters.beat(tx, hub_id="hub_old", now=101.0), "a swept hub learns it"
    with db.read() as tx:
        assert [s.session_id for s in clusters.sessions(tx, ["east"])["east"]] == ["ss_new"]
    with db.write() as tx:
        clusters.remove_hub(tx, "hub_new")
    with db.read() as tx:
        assert clusters.sessions(tx, ["east"]) == {} and clusters.live_hubs(tx) == []
    db.close()


def test_notification_payloads_stay_under_the_limit_and_lose_nothing() -> None:
    ids = [f"cluster-{i:05d}" for i in range(3000)]
    chunks = list(payloads(ids))
    assert len(chunks) > 1 and all(len(c) < 8000 for c in chunks)
    assert [i for c in chunks for i in c.split(",")] == ids
