"""The watch feed (tables watch_objects, watch_events): what watchers last saw of each watched
object, and the numbered changes since (docs/rest.md "Watch").

Revisions are allocated by the one writer holding the "watch" lock (hub/service/watch.py), so
they are dense and commit in order: a reader that has seen revision R and reads `> R` later
misses nothing, on any hub.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hub.store.port import Transaction


@dataclass(frozen=True)
class Seen:
    """A watched object as watchers last saw it."""

    kind: str
    object_id: str
    project: str
    digest: str
    body: str
    revision: int


@dataclass(frozen=True)
class Event:
    revision: int
    kind: str
    object_id: str
    project: str
    type: str  # ADDED, MODIFIED, DELETED
    body: str


def head(conn: Transaction) -> int:
    """The last revision handed out (0: none yet)."""
    row = conn.execute("SELECT COALESCE(MAX(revision), 0) FROM watch_events").fetchone()
    seen = conn.execute("SELECT COALESCE(MAX(revision), 0) FROM watch_objects").fetchone()
    return max(int(row[0]), int(seen[0]))


def oldest(conn: Transaction) -> int | None:
    """The oldest revision still kept (None: no event kept)."""
    row = conn.execute("SELECT MIN(revision) FROM watch_events").fetchone()
    return None if row[0] is None else int(row[0])


def seen(conn: Transaction, kinds: Sequence[str] = ()) -> list[Seen]:
    sql = "SELECT kind, object_id, project, digest, body, revision FROM watch_objects"
    params: list[str] = []
    if kinds:
        sql += f" WHERE kind IN ({', '.join('?' for _ in kinds)})"
        params = list(kinds)
    rows = conn.execute(sql + " ORDER BY revision", params).fetchall()
    return [Seen(r[0], r[1], r[2], r[3], r[4], int(r[5])) for r in rows]


def append(conn: Transaction, events: Iterable[Event], *, now: float) -> None:
    """Record `events` and make watch_objects follow them (a DELETED one removes its row)."""
    for e in events:
        conn.execute(
            "INSERT INTO watch_events (revision, kind, object_id, project, type, body, time)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (e.revision, e.kind, e.object_id, e.project, e.type, e.body, now),
        )
        conn.execute(
            "DELETE FROM watch_objects WHERE kind = ? AND object_id = ?", (e.kind, e.object_id)
        )


def keep(conn: Transaction, rows: Iterable[Seen]) -> None:
    """Insert the current state of objects just recorded as ADDED or MODIFIED (after
    `append`, which removed their old rows)."""
    conn.executemany(
        "INSERT INTO watch_objects (kind, object_id, project, digest, body, revision)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(s.kind, s.object_id, s.project, s.digest, s.body, s.revision) for s in rows],
    )


def since(conn: Transaction, revision: int, *, limit: int) -> list[Event]:
    rows = conn.execute(
        "SELECT revision, kind, object_id, project, type, body FROM watch_events"
        " WHERE revision > ? ORDER BY revision LIMIT ?",
        (revision, limit),
    ).fetchall()
    return [Event(int(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in rows]


def prune(conn: Transaction, *, keep_after: int) -> None:
    """Forget events at or before `keep_after` (a watcher resuming from before it relists)."""
    conn.execute("DELETE FROM watch_events WHERE revision <= ?", (keep_after,))
