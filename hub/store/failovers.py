"""Failovers (table failovers): a workload's replicas on a lost cluster standing in elsewhere
(docs/placement.md "Failover and failback"). One row per (workload, lost cluster); an ended
row is history, replaced by the next failover of that cluster."""

from __future__ import annotations

from collections.abc import Iterable

from hub.model import FailoverRecord
from hub.store import codec, port
from hub.store.port import Row, Transaction

_COLUMNS = (
    "workload_id, cluster_id, deployment_id, cause, state, start_time, replicas, stand_ins,"
    " recovered_since, end_time, message"
)


def save(conn: Transaction, record: FailoverRecord) -> None:
    conn.execute(
        f"INSERT INTO failovers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (workload_id, cluster_id) DO UPDATE SET"
        " deployment_id = excluded.deployment_id, cause = excluded.cause,"
        " state = excluded.state, start_time = excluded.start_time,"
        " replicas = excluded.replicas, stand_ins = excluded.stand_ins,"
        " recovered_since = excluded.recovered_since, end_time = excluded.end_time,"
        " message = excluded.message",
        (
            record.workload_id,
            record.cluster_id,
            record.deployment_id,
            record.cause,
            record.state,
            record.start_time,
            record.replicas,
            codec.dumps(dict(sorted(record.stand_ins.items()))),
            record.recovered_since,
            record.end_time,
            record.message,
        ),
    )


def of_workloads(conn: Transaction, workload_ids: Iterable[str]) -> dict[str, list[FailoverRecord]]:
    """Every record (active and ended) of these workloads, by workload, by cluster id."""
    result: dict[str, list[FailoverRecord]] = {}
    for chunk in port.chunks(workload_ids):
        for row in conn.execute(
            f"SELECT {_COLUMNS} FROM failovers"
            f" WHERE workload_id IN ({port.marks(chunk)}) ORDER BY cluster_id",
            chunk,
        ):
            record = _record(row)
            result.setdefault(record.workload_id, []).append(record)
    return result


def active_workloads(conn: Transaction, projects: Iterable[str] | None = None) -> list[str]:
    """Workloads with a failover in progress (of these projects)."""
    query = (
        "SELECT DISTINCT f.workload_id FROM failovers f"
        " JOIN workloads w ON w.workload_id = f.workload_id WHERE f.end_time IS NULL"
    )
    if projects is None:
        return [r["workload_id"] for r in conn.execute(query)]
    clause, names = port.among("w.project", projects)
    return [r["workload_id"] for r in conn.execute(f"{query} AND {clause}", names)]


def active_workloads_among(conn: Transaction, workload_ids: Iterable[str]) -> list[str]:
    """Those of these workloads with a failover in progress."""
    result: list[str] = []
    for chunk in port.chunks(workload_ids):
        result += [
            r["workload_id"]
            for r in conn.execute(
                "SELECT DISTINCT workload_id FROM failovers WHERE end_time IS NULL"
                f" AND workload_id IN ({port.marks(chunk)})",
                chunk,
            )
        ]
    return result


def _record(row: Row) -> FailoverRecord:
    return FailoverRecord(
        workload_id=row["workload_id"],
        cluster_id=row["cluster_id"],
        deployment_id=row["deployment_id"],
        cause=row["cause"],
        state=row["state"],
        start_time=row["start_time"],
        replicas=row["replicas"],
        stand_ins={k: int(v) for k, v in codec.loads(row["stand_ins"]).items()},
        recovered_since=row["recovered_since"],
        end_time=row["end_time"],
        message=row["message"],
    )
