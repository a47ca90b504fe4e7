"""`wingsmith hub backup`: an online copy taken under write load restores to a working hub.

A real hub serves a real SQLite file while a writer thread creates workloads over REST and an
agent streams observations; the backup runs as the real CLI in another process meanwhile. A
second hub then starts on the copy: it serves every workload the copy holds, each with the
deployments its creation wrote in the same transaction (a torn copy would show a workload
without them), and an agent connecting to it converges on a full snapshot (the copy has its
own store epoch, so no agent can take a delta against a history the restore rewound).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.harness import (
    Hub,
    LoopThread,
    running_hub,
    start_agent,
    wait_until,
    workload,
)


def _wingsmith(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=60
    )


def _all_workloads(hub: Hub) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    token = ""
    while True:
        page = hub.get(f"/v1/workloads?page_size=100&page_token={token}")
        found += page.get("workloads", [])
        token = page.get("next_page_token", "")
        if not token:
            return found


def _epoch(db_path: Path) -> str:
    conn = sqlite3.connect(db_path)
    try:
        return str(conn.execute("SELECT value FROM meta WHERE key='store_epoch'").fetchone()[0])
    finally:
        conn.close()


def test_backup_under_write_load_restores_to_a_serving_hub(tmp_path: Path) -> None:
    backup_path = tmp_path / "backup.db"
    # `wingsmith hub backup` copies a SQLite file (PostgreSQL has its own tools).
    with running_hub(tmp_path, backend="sqlite") as (loop, hub):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=10_000)
        agent = start_agent(loop, hub, cluster_id="east", token=token)
        try:
            created: list[str] = []
            stop = threading.Event()

            def write_load() -> None:
                n = 0
                while not stop.is_set():
                    hub.post("/v1/workloads", workload(f"w{n}", tp=1, clusters=("east",)))
                    created.append(f"w{n}")
                    n += 1

            writer = threading.Thread(target=write_load, daemon=True)
            writer.start()
            wait_until(lambda: len(created) >= 10, what="the write load to start")
            before = len(created)
            done = _wingsmith("hub", "backup", str(backup_path), "--db", hub.db_path)
            after = len(created)
            assert after > before, "the backup must run while the hub is being written"
            stop.set()
            writer.join(timeout=30)
            assert done.returncode == 0, done.stderr
            assert "backup written to" in done.stdout
            original_epoch = _epoch(Path(hub.db_path))
        finally:
            agent.stop()

    # One self-contained file: no WAL beside it is needed.
    assert not Path(f"{backup_path}-wal").exists()
    assert _epoch(backup_path) != original_epoch

    loop = LoopThread()
    restored = Hub(loop=loop, db_path=str(backup_path))
    try:
        restored.start()
        names = {w["name"] for w in _all_workloads(restored)}
        # A consistent prefix of the writes: what was committed before the copy began is in
        # it, and nothing the load never wrote.
        assert {f"w{i}" for i in range(before)} <= names
        assert names <= {f"w{i}" for i in range(after + 1)}
        deployments = restored.get("/v1/deployments?page_size=1000")["deployments"]
        with_deployments = {d["workload_name"] for d in deployments}
        assert names <= with_deployments, f"without deployments: {names - with_deployments}"

        # The cluster's token survived (stored hashed in the copy): its agent reconnects and
        # takes a full snapshot of the restored desired state.
        agent = start_agent(loop, restored, cluster_id="east", token=token)
        try:
            wait_until(
                lambda: len(agent.agent.desired.deployments) == len(deployments),
                timeout=30,
                what="the agent to hold every restored deployment",
            )
        finally:
            agent.stop()
    finally:
        restored.stop()
        loop.close()


def test_backup_refuses_what_it_cannot_do_cleanly(tmp_path: Path) -> None:
    missing = _wingsmith("hub", "backup", str(tmp_path / "b.db"), "--db", str(tmp_path / "no.db"))
    assert missing.returncode == 1
    assert "no database file" in missing.stderr
    assert not (tmp_path / "no.db").exists(), "a mistyped --db must not create a database"

    not_db = tmp_path / "notes.txt"
    not_db.write_text("not a database at all, just text\n" * 200)
    refused = _wingsmith("hub", "backup", str(tmp_path / "b.db"), "--db", str(not_db))
    assert refused.returncode == 1
    assert "not a Wingsmith hub database" in refused.stderr
    assert not (tmp_path / "b.db").exists()
    assert not list(tmp_path.glob(".b.db.partial-*"))

    with running_hub(tmp_path, backend="sqlite") as (_, hub):
        existing = tmp_path / "existing.db"
        existing.write_bytes(b"keep me")
        kept = _wingsmith("hub", "backup", str(existing), "--db", hub.db_path)
        assert kept.returncode == 1
        assert "--overwrite" in kept.stderr
        assert existing.read_bytes() == b"keep me"
        replaced = _wingsmith("hub", "backup", str(existing), "--db", hub.db_path, "--overwrite")
        assert replaced.returncode == 0, replaced.stderr
        assert existing.read_bytes()[:16] == b"SQLite format 3\x00"


def test_backup_of_a_postgresql_store_points_at_its_own_tools(tmp_path: Path) -> None:
    done = _wingsmith("hub", "backup", str(tmp_path / "b.db"), "--db", "postgresql://u@h/db")
    assert done.returncode != 0
    assert "pg_dump" in done.stderr and "Traceback" not in done.stderr
