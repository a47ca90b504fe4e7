"""The agent's end of the sync stream: connect, hello, receive desired state, send the rest.

One `StreamClient` per agent process holds one stream at a time and reconnects forever with
jittered exponential backoff (agent/backoff.py's rule: a uniform delay in [d/2, d], d =
min(cap, base x 2^n)), reset once a session is welcomed. A handshake the hub refused because a
herd is reconnecting (RESOURCE_EXHAUSTED with `wingsmith-retry-after-ms`) comes back at the
slot the hub gave it. A stream the hub closed for a newer one of the same slot (ABORTED:
another agent uses this cluster's token) waits on a separate, slower backoff that a welcome
does not reset, and says so in an error log: two such agents settle instead of taking the
stream from each other several times a second. Messages queued while disconnected are dropped:
after a reconnect the agent's observer resends what the hub's Welcome says it lacks, and
revisions are acked afresh.

Desired state is handed to `on_desired`, which applies it and returns the rejects; the client
then acks the revision. A delta that does not start at the revision held raises RevisionGap in
`on_desired`: the client drops the stream and reconnects, and the hello (revision 0) asks for a
snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc

from agent.backoff import Backoff
from agent.desired import RevisionGap
from wingsmith.v1 import sync_pb2, sync_pb2_grpc

log = logging.getLogger(__name__)


# Trailing metadata of a refused handshake (hub/sync/handshake.py): ms until our slot.
RETRY_AFTER_KEY = "wingsmith-retry-after-ms"
MAX_RETRY_AFTER_S = 300.0


def retry_after(error: grpc.aio.AioRpcError) -> float | None:
    """The hub's slot for a refused handshake (RESOURCE_EXHAUSTED), in seconds; None if it
    gave none or something unusable."""
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for key, value in error.trailing_metadata() or ():
        if key == RETRY_AFTER_KEY:
            try:
                seconds = int(value) / 1000
            except (TypeError, ValueError):
                return None
            return seconds if 0 <= seconds <= MAX_RETRY_AFTER_S else None
    return None


# What grpc's asyncio client reports, in place of the peer's status, for a write to a call that
# ended meanwhile (not the hub's word: the hub never sends it).
LOST_STATUS = "Internal error from Core"


def lost_status_note(error: grpc.aio.AioRpcError) -> str:
    """A note for a status grpc made up itself, so the log does not read as the hub's."""
    if error.code() == grpc.StatusCode.INTERNAL and error.details() == LOST_STATUS:
        return (
            " (grpc's own status: the stream ended while this agent was writing to it, and the"
            " hub's reason was lost; the next attempt shows it)"
        )
    return ""


def superseded_backoff() -> Backoff:
    """After the hub closed our stream for a newer one of the same cluster (and node): another
    agent holds this cluster's token. Wait long, and longer each time, so two such agents do not
    take the stream from each other forever; never less than half the ceiling (the rule's), so
    a lucky draw cannot restart the fight at once."""
    return Backoff(base_s=5.0, cap_s=120.0)


@dataclass
class ClientStats:
    sessions: int = 0
    desired_messages: int = 0
    desired_specs: int = 0
    snapshots: int = 0
    problems: list[str] = field(default_factory=list)
    last_error: str = ""
    last_code: grpc.StatusCode | None = None
    # Times the hub closed our stream for a newer one with the same token (ABORTED).
    superseded: int = 0
    # Times the hub asked for the full state again (it could not store a batch).
    resyncs: int = 0


OnDesired = Callable[[sync_pb2.DesiredState], Awaitable[Sequence[sync_pb2.Reject]]]


class StreamClient:
    def __init__(
        self,
        *,
        channel: grpc.aio.Channel,
        token: str,
        hello: Callable[[], sync_pb2.Hello],
        on_desired: OnDesired,
        on_connected: Callable[[sync_pb2.Welcome], None] = lambda welcome: None,
        on_fence: Callable[[int, str], None] = lambda term, reason: None,
        on_grant: Callable[[int, Sequence[str]], None] = lambda term, node_ids: None,
        on_resync: Callable[[], None] = lambda: None,
        backoff: Backoff | None = None,
        superseded: Backoff | None = None,
        stable_s: float = 300.0,
        default_heartbeat_s: float = 5.0,
    ) -> None:
        self._stub = sync_pb2_grpc.ClusterSyncStub(channel)
        self._token = token
        self._hello = hello
        self._on_desired = on_desired
        self._on_connected = on_connected
        self._on_fence = on_fence
        self._on_grant = on_grant
        self._on_resync = on_resync
        self._backoff = backoff or Backoff()
        # Not reset by a welcome (the fight would restart at once): only by a session that
        # lasted `stable_s` without being superseded.
        self._superseded = superseded or superseded_backoff()
        self._stable_s = stable_s
        self._welcomed_at: float | None = None
        self._heartbeat_s = default_heartbeat_s
        self._outbox: asyncio.Queue[sync_pb2.AgentMessage] = asyncio.Queue()
        self._seq = 0
        self.connected = asyncio.Event()
        self.stats = ClientStats()

    # -- what the agent sends ---------------------------------------------------------------

    def send(self, message: sync_pb2.AgentMessage) -> bool:
        """Queue a message for the open stream; False (dropped) when disconnected."""
        if not self.connected.is_set():
            return False
        self._outbox.put_nowait(message)
        return True

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- the connection loop ------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            delay: float | None = None
            try:
                await self._session()
            except grpc.aio.AioRpcError as e:
                self.stats.last_code = e.code()
                self.stats.last_error = f"{e.code().name}: {e.details()}"
                if e.code() == grpc.StatusCode.ABORTED:
                    delay = self._after_superseded()
                elif (pushback := retry_after(e)) is not None:
                    # The hub is admitting a herd at its rate and gave us a slot: come back
                    # then (spread a little), not on the exponential backoff.
                    delay = pushback * self._backoff.rng.uniform(1.0, 1.1)
                    log.info("hub busy with handshakes: retrying in %.1fs", delay)
                else:
                    level = logging.WARNING
                    if e.code() in (
                        grpc.StatusCode.UNAUTHENTICATED,
                        grpc.StatusCode.PERMISSION_DENIED,
                    ):
                        level = logging.ERROR  # configuration: the token or cluster id is wrong
                    log.log(
                        level, "stream closed: %s%s", self.stats.last_error, lost_status_note(e)
                    )
            except RevisionGap as e:
                log.warning("%s; reconnecting for a snapshot", e)
            except asyncio.InvalidStateError:
                # grpc.aio raises this, not AioRpcError, on a write to a call the hub already
                # ended (grpc core cancels new calls beyond its pending-request limits while
                # the hub is busy, as when a whole fleet reconnects): a closed stream like any.
                self.stats.last_error = "the stream ended before it was used"
                log.warning("stream closed: %s", self.stats.last_error)
            finally:
                self.connected.clear()
            await asyncio.sleep(self._backoff.next_delay() if delay is None else delay)

    def _after_superseded(self) -> float:
        """The hub gave our slot to a newer stream (ABORTED): another agent process uses this
        cluster's token (and node name). Say so, and wait long before taking it back."""
        if self._welcomed_at is not None and time.monotonic() - self._welcomed_at >= self._stable_s:
            self._superseded.reset()  # we held the stream a long while: a one-off
        self.stats.superseded += 1
        delay = self._superseded.next_delay()
        log.error(
            "another agent is using this cluster's token: the hub closed this stream for a"
            " newer one (%s; %d time(s) so far). Waiting %.0fs before reconnecting, longer"
            " each time, so the two do not take turns forever. Run one agent per cluster token"
            " (in a DaemonSet, one per node, each with its own --node-name).",
            self.stats.last_error,
            self.stats.superseded,
            delay,
        )
        return delay

    async def _session(self) -> None:
        call = self._stub.Sync(metadata=(("authorization", f"Bearer {self._token}"),))
        try:
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                # A hub that refuses the stream (authentication, handshake limit) may end the
                # call before reading the hello: the write fails, and the call's own status,
                # read next, says why (with its trailing metadata: a retry slot).
                await call.write(sync_pb2.AgentMessage(hello=self._hello()))
            first = await call.read()
            if first is grpc.aio.EOF or first.WhichOneof("kind") != "welcome":
                ended = first is grpc.aio.EOF
                raise grpc.aio.AioRpcError(
                    await call.code() if ended else grpc.StatusCode.UNKNOWN,
                    grpc.aio.Metadata(),
                    (await call.trailing_metadata()) if ended else grpc.aio.Metadata(),
                    details=(await call.details()) if ended else "no welcome",
                )
            self._welcomed(first.welcome)
            writer = asyncio.create_task(self._write(call))
            heartbeat = asyncio.create_task(self._heartbeat())
            try:
                await self._read(call)
            finally:
                for task in (writer, heartbeat):
                    task.cancel()
                for task in (writer, heartbeat):
                    with contextlib.suppress(
                        asyncio.CancelledError, asyncio.InvalidStateError, grpc.aio.AioRpcError
                    ):
                        await task
        finally:
            call.cancel()

    def _welcomed(self, welcome: sync_pb2.Welcome) -> None:
        self._backoff.reset()
        self._welcomed_at = time.monotonic()
        self.stats.sessions += 1
        if welcome.heartbeat_interval_ms > 0:
            self._heartbeat_s = welcome.heartbeat_interval_ms / 1000
        while not self._outbox.empty():
            self._outbox.get_nowait()  # stale: acks and batches of the previous session
        self.connected.set()
        self._on_connected(welcome)
        log.info("stream open (session %s)", welcome.session_id)

    async def _read(
        self, call: grpc.aio.StreamStreamCall[sync_pb2.AgentMessage, sync_pb2.HubMessage]
    ) -> None:
        while True:
            message = await call.read()
            if message is grpc.aio.EOF:
                code = await call.code()
                raise grpc.aio.AioRpcError(
                    code,
                    await call.initial_metadata(),
                    await call.trailing_metadata(),
                    details=await call.details() or "the hub ended the stream",
                )
            kind = message.WhichOneof("kind")
            if kind == "desired":
                await self._desired(message.desired)
            elif kind == "fence":
                log.warning("fenced (term %d): %s", message.fence.term, message.fence.reason)
                self._on_fence(message.fence.term, message.fence.reason)
            elif kind == "grant":
                log.info("leadership granted or confirmed (term %d)", message.grant.term)
                self._on_grant(message.grant.term, tuple(message.grant.node_ids))
            elif kind == "resync":
                # The hub lost a batch of ours for a reason of its own: send everything again.
                log.warning(
                    "hub could not store batch %d (%s): resending full state",
                    message.resync.seq,
                    message.resync.reason,
                )
                self.stats.resyncs += 1
                self._on_resync()
            elif kind == "problem":
                text = f"{message.problem.code}: {message.problem.message}"
                self.stats.problems.append(text)
                log.warning("hub refused a message (seq %d): %s", message.problem.seq, text)

    async def _desired(self, desired: sync_pb2.DesiredState) -> None:
        self.stats.desired_messages += 1
        self.stats.desired_specs += len(desired.upserts) + len(desired.removals)
        self.stats.snapshots += int(desired.snapshot)
        rejects = await self._on_desired(desired)
        for reject in rejects:
            self._outbox.put_nowait(sync_pb2.AgentMessage(reject=reject))
        self._outbox.put_nowait(sync_pb2.AgentMessage(ack=sync_pb2.Ack(revision=desired.revision)))

    async def _write(
        self, call: grpc.aio.StreamStreamCall[sync_pb2.AgentMessage, sync_pb2.HubMessage]
    ) -> None:
        while True:
            message = await self._outbox.get()
            await call.write(message)
            self._last_write = time.monotonic()

    async def _heartbeat(self) -> None:
        self._last_write = time.monotonic()
        while True:
            await asyncio.sleep(self._heartbeat_s / 2)
            if time.monotonic() - self._last_write >= self._heartbeat_s * 0.9:
                self._outbox.put_nowait(
                    sync_pb2.AgentMessage(
                        heartbeat=sync_pb2.Heartbeat(sent_unix_ms=int(time.time() * 1000))
                    )
                )
