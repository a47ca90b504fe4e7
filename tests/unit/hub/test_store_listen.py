"""Notifications between hubs on PostgreSQL (Store.listen): delivered at commit, never on
rollback, and after the listening connection is lost it reconnects and says so (the hub then
re-checks every stream it holds)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import psycopg
import pytest

from hub.store.port import open_store
from hub.store.postgres import LISTENER_NAME
from tests import stores


def test_notifications_arrive_at_commit_and_a_lost_connection_is_reconnected(
    tmp_path: Path,
) -> None:
    url = stores.store_url(tmp_path, "postgres")
    db = open_store(url)
    heard: queue.Queue[tuple[str, str]] = queue.Queue()
    reconnects = threading.Semaphore(0)
    listening = db.listen(["wingsmith_test"], lambda c, p: heard.put((c, p)), reconnects.release)
    try:
        assert reconnects.acquire(timeout=10), "listening"
        with pytest.raises(RuntimeError), db.write() as tx:
            tx.notify("wingsmith_test", "rolled back")
            raise RuntimeError("abort")
        with db.write() as tx:
            tx.notify("wingsmith_test", "c1,c2")
        assert heard.get(timeout=10) == ("wingsmith_test", "c1,c2")
        assert heard.empty(), "nothing of the rolled-back transaction"

        with psycopg.connect(url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (LISTENER_NAME,),
            ).fetchone()
        assert killed is not None and killed[0] == 1
        assert reconnects.acquire(timeout=10), "reconnected after the connection was killed"
        with db.write() as tx:
            tx.notify("wingsmith_test", "c3")
        assert heard.get(timeout=10) == ("wingsmith_test", "c3")
    finally:
        listening.close()
        db.close()
