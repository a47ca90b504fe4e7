"""The desired-state pump: hands every stream of a changed cluster its delta.

One task on the hub's loop. It takes the clusters the fanout marked dirty a few hundred at a
time, reads the deltas of all their streams in one snapshot (hub/service/sync.py
desired_deltas), builds each distinct message once (the streams of one cluster holding the
same revision share it) and puts it in the streams' outboxes; the streams only write.

Why one pump rather than each stream reading its own delta: a change touching every cluster
(a fleet-wide workload's new engine version) would otherwise be 10,000 reads of three
statements each on the event loop; here it is a few dozen statements. Observation ingest
waits while the pump has work (hub/sync/ingest.py), so the agents hear of a change before
the hub writes their reports of the previous one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from opentelemetry import trace

from hub import tracing
from hub.service import sync as sync_service
from hub.service.context import ServiceContext
from hub.sync import convert
from hub.sync.fanout import Fanout, Listener
from wingsmith.v1 import sync_pb2

log = logging.getLogger(__name__)

# Clusters per round: one round is one read transaction and then a yield to the streams, so the
# first agents are written to while the pump reads the next round.
ROUND = 256
RETRY_AFTER_S = 0.5


class PumpMetrics(Protocol):
    def desired_sent(
        self, *, snapshot: bool, deployments: int, removals: int, size: int
    ) -> None: ...


def desired_message(ctx: ServiceContext, delta: sync_service.DesiredDelta) -> sync_pb2.HubMessage:
    return sync_pb2.HubMessage(
        desired=sync_pb2.DesiredState(
            revision=delta.revision,
            snapshot=delta.snapshot,
            from_revision=delta.from_revision,
            store_epoch=ctx.db.epoch,
            upserts=[convert.deployment_spec(d) for d in delta.upserts],
            removals=list(delta.removals),
            releases=list(delta.releases),
        )
    )


def traced(message: sync_pb2.HubMessage, cause: tracing.Carrier | None, *, cluster_id: str) -> None:
    """A span for sending a traced change's delta, continuing the change's trace, and that
    span's context on the message: the agent continues it (hub/tracing.py)."""
    if cause is None:
        return
    desired = message.desired
    with tracing.tracer().start_as_current_span(
        "send desired",
        context=tracing.extracted(cause),
        kind=trace.SpanKind.PRODUCER,
        attributes={
            "wingsmith.cluster": cluster_id,
            "wingsmith.revision": desired.revision,
            "wingsmith.deployments": [d.deployment_id for d in desired.upserts][:100],
        },
    ):
        desired.trace_context.update(tracing.current_carrier() or {})


class DesiredPump:
    def __init__(self, *, ctx: ServiceContext, fanout: Fanout, metrics: PumpMetrics) -> None:
        self._ctx = ctx
        self._fanout = fanout
        self._metrics = metrics

    async def run(self) -> None:
        while True:
            cluster_ids = await self._fanout.take_dirty(ROUND)
            try:
                self.pump(cluster_ids)
            except Exception:
                # Every stream's desired state goes through this one task: it must outlive any
                # failure (a store error, a bug in one delta), retrying those clusters later.
                log.exception("reading desired state for %d clusters failed", len(cluster_ids))
                await asyncio.sleep(RETRY_AFTER_S)
                self._fanout.desired_changed(list(cluster_ids))
            # Let the streams write what they were handed before the next round.
            await asyncio.sleep(0)

    def pump(self, cluster_ids: dict[str, float]) -> int:
        """Hand the streams of these clusters (-> when they changed) their deltas; returns how
        many got one."""
        streams: list[Listener] = []
        for cluster_id in cluster_ids:
            streams += [s for s in self._fanout.listeners(cluster_id) if s.accepts_desired()]
        if not streams:
            return 0
        deltas = sync_service.desired_deltas(
            self._ctx, [(s.cluster_id, s.sent_revision) for s in streams]
        )
        built: dict[tuple[str, int], tuple[sync_pb2.HubMessage, int]] = {}
        causes = {c: self._fanout.take_cause(c) for c in {s.cluster_id for s in streams}}
        delivered = 0
        for stream in streams:
            key = (stream.cluster_id, stream.sent_revision)
            delta = deltas.get(key)
            if delta is None or delta.empty:
                continue
            if key not in built:
                message = desired_message(self._ctx, delta)
                traced(message, causes[stream.cluster_id], cluster_id=stream.cluster_id)
                built[key] = (message, message.ByteSize())
            message, size = built[key]
            self._metrics.desired_sent(
                snapshot=delta.snapshot,
                deployments=len(delta.upserts),
                removals=len(delta.removals),
                size=size,
            )
            stream.deliver(
                message, revision=delta.revision, changed_at=cluster_ids[stream.cluster_id]
            )
            delivered += 1
        return delivered
