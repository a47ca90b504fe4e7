"""The figures a run prints, each from the phases' details (bench/scenarios.py), beside the
baseline it is compared with and the issue's target for it (docs/benchmark.md)."""

from __future__ import annotations

from typing import Any

from bench.report import Figure, Target


def figures(agents: int, d: dict[str, Any]) -> list[Figure]:
    """The table's rows, from the phases' details (absent phases give empty values)."""
    n = agents

    def get(phase: str, key: str) -> float | None:
        value = d.get(phase, {}).get(key)
        return None if value is None else float(value)

    bare = "bare grpc.aio"
    at_size = "" if n == 10_000 else f" (target stated for 10,000 agents; this run: {n:,})"
    return [
        Figure(
            "connect_s",
            "connect + first sync, all agents",
            get("connect", "all_synced_s"),
            "s",
            get("baseline_stream", "connect_s"),
            bare,
        ),
        Figure("settle_s", "all workloads admitted and running", get("connect", "settled_s"), "s"),
        Figure(
            "fanout_one_p50_ms",
            "fan-out, one workload, p50",
            get("fanout_one", "p50_ms"),
            "ms",
            get("baseline_stream", "one_p50_ms"),
            bare,
        ),
        Figure(
            "fanout_one_p99_ms",
            "fan-out, one workload, p99",
            get("fanout_one", "p99_ms"),
            "ms",
            get("baseline_stream", "one_p99_ms"),
            bare,
        ),
        Figure(
            "fanout_all_p50_ms",
            "fan-out, every cluster, p50",
            get("fanout_all", "p50_ms"),
            "ms",
            get("baseline_stream", "all_p50_ms"),
            bare,
        ),
        Figure(
            "fanout_all_p99_ms",
            "fan-out, every cluster, p99",
            get("fanout_all", "p99_ms"),
            "ms",
            get("baseline_stream", "all_p99_ms"),
            bare,
            targets=(Target("<=", 2000.0, "<= 2 s" + at_size),),
        ),
        Figure(
            "fanout_all_hub_p99_ms",
            "fan-out, every cluster, hub's share p99",
            get("fanout_all", "hub_p99_ms"),
            "ms",
            note="from the commit until gRPC took the delta (worst round; histogram buckets)",
        ),
        Figure(
            "fanout_all_hub_cpu_s",
            "fan-out, every cluster, hub CPU per change",
            get("fanout_all", "hub_cpu_s"),
            "s",
            note="from the call until the last agent applied it",
        ),
        Figure(
            "fanout_all_workers_cpu_s",
            "fan-out, every cluster, agents' CPU per change",
            get("fanout_all", "workers_cpu_s"),
            "s",
            note="the load generator: every agent applies the change and reports its rollout",
        ),
        Figure(
            "fanout_all_last_ms",
            "fan-out, every cluster, last agent",
            get("fanout_all", "last_ms"),
            "ms",
            get("baseline_stream", "all_last_ms"),
            bare,
        ),
        Figure(
            "ingest_records_per_s",
            "observation records persisted",
            get("ingest", "records_per_s"),
            "rec/s",
            get("baseline_sqlite", "rows_per_s"),
            "bare SQLite upsert",
            targets=(Target(">=", 50_000.0, ">= 50,000/s"),),
            ratio_targets=(Target(">=", 0.5, ">= 0.5x bare"),),
        ),
        Figure(
            "ingest_batches_per_s",
            "observation batches ingested",
            get("ingest", "batches_per_s"),
            "msg/s",
            get("baseline_stream", "messages_per_s"),
            bare + " msgs",
        ),
        Figure(
            "admission_decisions_per_s",
            "admission decisions",
            get("admission", "decisions_per_s"),
            "/s",
            get("baseline_admission", "decisions_per_s"),
            "pure decide()",
            targets=(Target(">=", 1000.0, ">= 1,000/s"),),
        ),
        Figure(
            "reconnect_resume_s",
            "all agents resumed after hub restart",
            get("reconnect", "resumed_s"),
            "s",
            get("baseline_stream", "connect_s"),
            bare + " connect",
            targets=(Target("<=", 60.0, "<= 60 s"),),
        ),
        Figure(
            "reconnect_resent_bytes",
            "desired state resent after restart",
            get("reconnect", "desired_bytes_resent"),
            "B",
            targets=(Target("==", 0.0, "0 (nothing changed)"),),
        ),
        Figure(
            "hub_rss_mib",
            f"hub RSS, {n:,} agents connected",
            get("idle", "hub_rss_mib"),
            "MiB",
            get("baseline_stream", "rss_mib"),
            bare + " server",
            targets=(Target("<=", 2048.0, "< 2 GiB" + at_size),),
        ),
        Figure(
            "hub_rss_per_agent_kib",
            "hub RSS per connected agent",
            get("idle", "hub_rss_per_agent_kib"),
            "KiB",
            get("baseline_stream", "rss_per_stream_kib"),
            bare + " per stream",
        ),
        Figure(
            "hub_cpu_idle_pct",
            "hub CPU, connected and idle",
            _pct(get("idle", "hub_cpu_share")),
            "% core",
            _pct(get("baseline_stream", "idle_cpu_share")),
            bare + " server",
        ),
        Figure(
            "hub_cpu_ingest_pct",
            "hub CPU during ingest",
            _pct(get("ingest", "hub_cpu_share")),
            "% core",
            note="100% of one core: the hub (one event loop) is the bottleneck",
        ),
        Figure(
            "workers_cpu_ingest_pct",
            "load generator CPU during ingest",
            _pct(get("ingest", "workers_cpu_share")),
            "% core",
            note="all worker processes together",
        ),
    ]


def _pct(share: float | None) -> float | None:
    return None if share is None else share * 100
