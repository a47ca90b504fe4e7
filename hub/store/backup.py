"""Online backups of the SQLite database: `wingsmith hub backup PATH` (hub/backup.py).

The copy is taken with SQLite's online backup API (`sqlite3.Connection.backup`), in one step:
the source is read inside one read transaction, so the copy is a consistent snapshot of one
committed state, and in WAL mode that read never blocks the serving hub's writers (they append
to the WAL meanwhile). A file copy of a live WAL database is not safe (the WAL holds committed
transactions the main file lacks), which is why this exists.

What the copy gets that the source does not:
- its own store epoch. Agents hold (epoch, revision) of the desired state they applied; a hub
  restored from a backup has an older revision history than they saw, and once it writes past
  their revision again a delta would skip changes. A new epoch makes every agent take one full
  snapshot after a restore (docs/stream.md), which is always correct.
- journal_mode=DELETE: one self-contained file (no -wal/-shm beside it) to ship or archive.
It is checked (`PRAGMA quick_check`) before it is renamed into place, so PATH only ever holds a
whole, verified backup; a failed run leaves nothing at PATH.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass

from hub.store import port

# Tables whose row counts a backup reports, so an operator sees at a glance what it holds.
COUNTED_TABLES = ("projects", "clusters", "workloads", "deployments")


class BackupError(Exception):
    """The backup could not be taken; the message says what to fix. Nothing is left at the
    target path."""


@dataclass(frozen=True)
class BackupResult:
    path: str
    size_bytes: int
    schema_version: int
    source_epoch: str
    store_epoch: str
    counts: dict[str, int]
    seconds: float


def backup_database(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    busy_timeout_s: float = 30.0,
) -> BackupResult:
    """Copy the Wingsmith database at `source` to `target` while a hub may be serving it."""
    started = time.monotonic()
    if port.is_postgres(str(source)):
        raise BackupError(
            "this copies a SQLite file; back up a PostgreSQL store with its own tools"
            " (pg_dump, your provider's snapshots, CloudNativePG backups)"
        )
    source_path = pathlib.Path(port.sqlite_path(str(source)))
    target_path = pathlib.Path(target)
    if not source_path.is_file():
        raise BackupError(f"no database file at {source_path} (pass the hub's --db)")
    if target_path.exists() and not overwrite:
        raise BackupError(f"{target_path} exists: choose a new path or pass --overwrite")
    if target_path.exists() and target_path.is_dir():
        raise BackupError(f"{target_path} is a directory: give a file path")
    if not target_path.parent.is_dir():
        raise BackupError(f"directory {target_path.parent} does not exist")
    if target_path.resolve() == source_path.resolve():
        raise BackupError("the backup path is the database itself: choose another path")

    partial = target_path.parent / f".{target_path.name}.partial-{os.getpid()}"
    try:
        schema_version, source_epoch = _copy(source_path, partial, busy_timeout_s)
        store_epoch, counts = _finish_copy(partial)
        _fsync(partial)
        os.replace(partial, target_path)
        _fsync(target_path.parent)
    except sqlite3.Error as e:
        raise BackupError(f"backup of {source_path} failed: {e}") from e
    except OSError as e:
        raise BackupError(f"cannot write {target_path}: {e.strerror or e}") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return BackupResult(
        path=str(target_path),
        size_bytes=target_path.stat().st_size,
        schema_version=schema_version,
        source_epoch=source_epoch,
        store_epoch=store_epoch,
        counts=counts,
        seconds=time.monotonic() - started,
    )


def _copy(source: pathlib.Path, partial: pathlib.Path, busy_timeout_s: float) -> tuple[int, str]:
    """One-step online backup into `partial`; (schema version, source epoch)."""
    # mode=rw: never create a database where the operator mistyped a path.
    uri = f"file:{urllib.parse.quote(str(source.resolve()))}?mode=rw"
    src = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None)
    try:
        src.execute("PRAGMA query_only=ON")
        try:
            version_row = src.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
            epoch_row = src.execute("SELECT value FROM meta WHERE key = 'store_epoch'").fetchone()
        except sqlite3.DatabaseError as e:
            raise BackupError(f"{source} is not a Wingsmith hub database ({e})") from None
        if version_row is None or version_row[0] is None or epoch_row is None:
            raise BackupError(f"{source} is not an initialised Wingsmith hub database")
        dst = sqlite3.connect(partial, isolation_level=None)
        try:
            # pages=-1: the whole database in one step, under one read transaction. Stepwise
            # copying would restart from scratch each time the hub writes between steps.
            src.backup(dst, pages=-1)
        finally:
            dst.close()
        return int(version_row[0]), str(epoch_row[0])
    finally:
        src.close()


def _finish_copy(partial: pathlib.Path) -> tuple[str, dict[str, int]]:
    """Verify the copy, give it its own epoch and make it one file; (epoch, row counts)."""
    conn = sqlite3.connect(partial, isolation_level=None)
    try:
        check = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if check != ["ok"]:
            raise BackupError(f"the copy failed its integrity check: {'; '.join(check[:5])}")
        epoch = "se_" + secrets.token_hex(8)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'store_epoch'", (epoch,))
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode=DELETE")
        counts = {
            table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in COUNTED_TABLES
        }
        return epoch, counts
    finally:
        conn.close()


def _fsync(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
