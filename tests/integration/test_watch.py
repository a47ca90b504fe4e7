"""The Watch API (docs/rest.md "Watch") against a real hub with a simulated agent, over gRPC
and Server-Sent Events, on SQLite and PostgreSQL: changes are seen, a resumed watch misses
nothing and repeats nothing, a scoped token sees only its projects, a slow client is cut off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from hub.api import jsonmap
from tests import stores
from tests.harness import (
    ADMIN_TOKEN,
    FAST,
    Hub,
    LoopThread,
    running_hub,
    start_agent,
    wait_until,
    workload,
)
from wingsmith.v1 import control_pb2, control_pb2_grpc

WATCH = dataclasses.replace(FAST, watch_interval_s=0.1, watch_heartbeat_s=1.0)


class GrpcWatcher:
    """A gRPC Watch read in a thread; its events as REST JSON documents."""

    def __init__(self, hub: Hub, token: str = ADMIN_TOKEN, **request: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.error: grpc.RpcError | None = None
        self._channel = grpc.insecure_channel(hub.grpc_target)
        stub = control_pb2_grpc.ControlServiceStub(self._channel)
        self._call = stub.Watch(
            control_pb2.WatchRequest(**request), metadata=(("authorization", f"Bearer {token}"),)
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for event in self._call:
                self.events.append(jsonmap.to_json(event))
        except grpc.RpcError as e:
            self.error = e

    def close(self) -> None:
        self._call.cancel()
        self._thread.join(10)
        self._channel.close()


class SseWatcher:
    """GET /v1/watch read in a thread; its events parsed from the SSE stream."""

    def __init__(self, hub: Hub, query: str = "", token: str = ADMIN_TOKEN) -> None:
        self.events: list[dict[str, Any]] = []
        self.frames: list[dict[str, str]] = []
        self._conn = http.client.HTTPConnection("127.0.0.1", hub.http_port, timeout=60)
        self._conn.request("GET", f"/v1/watch{query}", headers={"authorization": f"Bearer {token}"})
        self._sock = self._conn.sock  # the response keeps it once the connection lets go
        self.response = self._conn.getresponse()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        # Ends when the stream does, or when close() pulls the socket away (any error then).
        with_errors = (OSError, http.client.HTTPException, ValueError, AttributeError)
        try:
            for frame in frames(iter(self.response.readline, b"")):
                self.frames.append(frame)
                if frame.get("event") != "error":
                    self.events.append(json.loads(frame["data"]))
        except with_errors:
            pass

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        self.response.close()
        self._conn.close()
        self._thread.join(10)


def frames(lines: Iterator[bytes]) -> Iterator[dict[str, str]]:
    frame: dict[str, str] = {}
    for raw in lines:
        line = raw.decode().rstrip("\n")
        if not line:
            if frame:
                yield frame
            frame = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        frame[key] = value


def dechunked(body: bytes) -> bytes:
    """An HTTP/1.1 chunked body's bytes (up to where the connection ended)."""
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out


def objects(events: list[dict[str, Any]], kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["type"], e[kind]) for e in events if e.get(kind)]


def seen(watcher: GrpcWatcher | SseWatcher, kind: str, type_: str, **fields: Any) -> bool:
    return any(
        t == type_ and all(o.get(k) == v for k, v in fields.items())
        for t, o in objects(watcher.events, kind)
    )


@pytest.fixture(params=stores.BACKENDS)
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[LoopThread, Hub]]:
    with running_hub(tmp_path, WATCH, backend=request.param) as (loop, hub):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=16)
        hub.create_project("ads", H100_80GB=16)
        agent = start_agent(loop, hub, cluster_id="east", token=token)
        try:
            yield loop, hub
        finally:
            agent.stop()


def test_a_create_scale_and_delete_are_seen_by_a_grpc_and_an_sse_watcher(
    fleet: tuple[LoopThread, Hub],
) -> None:
    _, hub = fleet
    rpc, sse = GrpcWatcher(hub), SseWatcher(hub)
    try:
        assert sse.response.status == 200
        assert sse.response.getheader("Content-Type") == "text/event-stream"
        for w in (rpc, sse):  # the current state first, then a bookmark
            wait_until(lambda w=w: seen(w, "cluster", "added", cluster_id="east"), what="east")
            wait_until(lambda w=w: any(e["type"] == "bookmark" for e in w.events), what="mark")
        created = hub.post("/v1/workloads", workload("llama", tp=1))
        ref = created["workload_id"]
        for w in (rpc, sse):
            wait_until(lambda w=w: seen(w, "workload", "added", workload_id=ref), what="added")
            wait_until(lambda w=w: seen(w, "deployment", "added", workload_id=ref), what="dep")
        hub.patch(f"/v1/workloads/{ref}", {"replicas": 2})
        for w in (rpc, sse):
            wait_until(
                lambda w=w: seen(w, "workload", "modified", workload_id=ref, replicas=2),
                what="scaled",
            )
        hub.rest("DELETE", f"/v1/workloads/{ref}")
        for w in (rpc, sse):
            wait_until(lambda w=w: seen(w, "workload", "deleted", workload_id=ref), what="gone")
            wait_until(lambda w=w: seen(w, "deployment", "deleted", workload_id=ref), what="gone")
        for w in (rpc, sse):
            revisions = [e["revision"] for e in w.events if e["type"] != "bookmark"]
            assert revisions == sorted(set(revisions)), "revisions increase, none repeated"
        # SSE: each event's id is its revision (what Last-Event-ID resumes from).
        assert all(f["id"] == str(json.loads(f["data"])["revision"]) for f in sse.frames)
    finally:
        rpc.close()
        sse.close()


def test_a_watch_resumed_from_a_revision_misses_nothing_and_repeats_nothing(
    fleet: tuple[LoopThread, Hub],
) -> None:
    _, hub = fleet
    steady = GrpcWatcher(hub, kinds=["workloads", "deployments"])
    try:
        first = SseWatcher(hub, "?kinds=workloads&kinds=deployments")
        a = hub.post("/v1/workloads", workload("a", tp=1))["workload_id"]
        wait_until(lambda: seen(first, "workload", "added", workload_id=a), what="a")
        first.close()
        resume_from = max(e["revision"] for e in first.events)

        # Changes while nobody of these watches (the steady one keeps the feed recording, as
        # another client would; without it the changes coalesce, still nothing is missed).
        b = hub.post("/v1/workloads", workload("b", tp=1))["workload_id"]
        wait_until(lambda: seen(steady, "workload", "added", workload_id=b), what="b")
        hub.patch(f"/v1/workloads/{a}", {"replicas": 2})
        hub.rest("DELETE", f"/v1/workloads/{b}")
        wait_until(lambda: seen(steady, "workload", "deleted", workload_id=b), what="b gone")

        resumed = SseWatcher(
            hub, f"?kinds=workloads&kinds=deployments&since_revision={resume_from}"
        )
        by_header = GrpcWatcher(hub, kinds=["workloads", "deployments"], since_revision=resume_from)
        try:
            last = max(e["revision"] for e in steady.events)
            for w in (resumed, by_header):
                wait_until(
                    lambda w=w: any(e["revision"] >= last for e in w.events), what="caught up"
                )
            expected = [
                (e["type"], e["revision"])
                for e in steady.events
                if resume_from < e["revision"] <= last and e["type"] != "bookmark"
            ]
            for w in (resumed, by_header):
                got = [
                    (e["type"], e["revision"])
                    for e in w.events
                    if e["revision"] <= last and e["type"] != "bookmark"
                ]
                assert got == expected
            assert ("added", "b") in {
                (t, o["name"]) for t, o in objects(resumed.events, "workload")
            }
        finally:
            resumed.close()
            by_header.close()
    finally:
        steady.close()


def test_last_event_id_resumes_an_sse_watch(fleet: tuple[LoopThread, Hub]) -> None:
    _, hub = fleet
    a = hub.post("/v1/workloads", workload("a", tp=1))["workload_id"]
    first = SseWatcher(hub, "?kinds=workloads")
    wait_until(lambda: seen(first, "workload", "added", workload_id=a), what="a")
    mark = wait_until(lambda: [e for e in first.events if e["type"] == "bookmark"], what="mark")
    first.close()
    hub.patch(f"/v1/workloads/{a}", {"replicas": 2})
    conn = http.client.HTTPConnection("127.0.0.1", hub.http_port, timeout=60)
    headers = {"authorization": f"Bearer {ADMIN_TOKEN}", "Last-Event-ID": str(mark[0]["revision"])}
    conn.request("GET", "/v1/watch?kinds=workloads", headers=headers)
    response = conn.getresponse()
    resumed = []
    for frame in frames(iter(response.readline, b"")):
        resumed.append(json.loads(frame["data"]))
        if resumed[-1]["workload"] and resumed[-1]["workload"]["replicas"] == 2:
            break
    conn.close()
    # Only what came after the bookmark (the agent may have moved its phase meanwhile too).
    assert resumed[-1]["type"] == "modified"
    assert all(e["revision"] > mark[0]["revision"] for e in resumed)


def test_a_project_scoped_token_watches_only_its_projects(
    fleet: tuple[LoopThread, Hub],
) -> None:
    _, hub = fleet
    answer = hub.post("/v1/tokens", {"name": "team-s", "role": "operator", "projects": ["search"]})
    scoped = str(answer["secret"])
    rpc, sse = GrpcWatcher(hub, token=scoped), SseWatcher(hub, token=scoped)
    try:
        ads = hub.post("/v1/workloads", workload("ad", project="ads", tp=1))["workload_id"]
        mine = hub.post("/v1/workloads", workload("mine", project="search", tp=1))["workload_id"]
        for w in (rpc, sse):
            wait_until(lambda w=w: seen(w, "workload", "added", workload_id=mine), what="mine")
            wait_until(lambda w=w: seen(w, "deployment", "added", workload_id=mine), what="dep")
            assert seen(w, "cluster", "added", cluster_id="east")
        hub.patch(f"/v1/workloads/{mine}", {"replicas": 2})
        for w in (rpc, sse):
            wait_until(lambda w=w: seen(w, "workload", "modified", replicas=2), what="scaled")
            projects = {
                o["project"] for k in ("workload", "deployment") for _, o in objects(w.events, k)
            }
            assert projects == {"search"}, f"saw {projects}; ads' workload is {ads}"
    finally:
        rpc.close()
        sse.close()
    status, refused = hub.rest("GET", "/v1/watch?project=ads", token=scoped, check=False)
    assert status == 403 and refused["error"]["status"] == "PERMISSION_DENIED"
    denied = GrpcWatcher(hub, token=scoped, project="ads")
    wait_until(lambda: denied.error is not None, what="refused")
    assert denied.error is not None and denied.error.code() == grpc.StatusCode.PERMISSION_DENIED
    denied.close()


def test_a_revision_not_kept_or_never_given_is_refused(tmp_path: Path) -> None:
    settings = dataclasses.replace(WATCH, watch_keep=2)
    with running_hub(tmp_path, settings) as (_, hub):
        hub.create_project("search", H100_80GB=16)
        hub.register_cluster("east")
        for name in ("a", "b", "c"):
            hub.post("/v1/workloads", workload(name, tp=1))
        watcher = SseWatcher(hub, "?kinds=workloads")
        mark = wait_until(lambda: [e for e in watcher.events if e["type"] == "bookmark"])
        watcher.close()
        head = mark[0]["revision"]
        for since in (1, head + 5):
            status, answer = hub.rest("GET", f"/v1/watch?since_revision={since}", check=False)
            assert status == 410 and answer["error"]["status"] == "OUT_OF_RANGE", answer
        status, answer = hub.rest("GET", "/v1/watch?kinds=pods", check=False)
        assert status == 400 and "kinds" in answer["error"]["message"]


def test_an_idle_watch_gets_a_heartbeat_while_the_feed_records(tmp_path: Path) -> None:
    """The feed wakes every watcher at each recording (every 0.1 s here), events or not; the
    heartbeat (every 1 s) counts from the last write, so an idle stream still gets its
    bookmarks. Before, each wake restarted the heartbeat's wait and none ever came."""
    with running_hub(tmp_path, WATCH) as (_, hub):
        hub.register_cluster("east")
        rpc, sse = GrpcWatcher(hub, kinds=["clusters"]), SseWatcher(hub, "?kinds=clusters")
        try:
            for w in (rpc, sse):
                wait_until(
                    lambda w=w: sum(e["type"] == "bookmark" for e in w.events) >= 3,
                    what="the first bookmark and two heartbeats",
                )
        finally:
            rpc.close()
            sse.close()


def test_a_client_that_stops_reading_is_cut_off_with_a_clear_status(tmp_path: Path) -> None:
    settings = dataclasses.replace(WATCH, watch_buffer=4, watch_heartbeat_s=30.0)
    with running_hub(tmp_path, settings) as (_, hub):
        hub.create_project("search", H100_80GB=1000)
        hub.register_cluster("east")
        # A client with a tiny receive window that reads nothing after the headers.
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", hub.http_port))
        sock.sendall(
            f"GET /v1/watch?kinds=workloads HTTP/1.1\r\nHost: hub\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\n\r\n".encode()
        )
        feed = hub.server.watch_feed if hub.server else None
        assert feed is not None
        wait_until(lambda: feed.watchers == 1, what="the watch open")
        # Fat workloads (long engine args) so a few events fill the socket's buffers.
        args = ["--flag-" + "x" * 2000 for _ in range(8)]
        deadline = time.monotonic() + 120
        n = 0
        while feed.cut_offs == 0 and time.monotonic() < deadline:
            hub.post("/v1/workloads", workload(f"w{n}", tp=1, replicas=0, engine_args=args))
            n += 1
        assert feed.cut_offs == 1, f"not cut off after {n} workloads"
        assert feed.watchers == 0
        received = b""
        sock.settimeout(30)
        while chunk := sock.recv(65536):
            received += chunk
        sock.close()
        body = dechunked(received.split(b"\r\n\r\n", 1)[1])
        last = list(frames(iter(body.splitlines(keepends=True))))
        errors = [f for f in last if f.get("event") == "error"]
        assert errors, "the stream ends with an error event"
        error = json.loads(errors[-1]["data"])["error"]
        assert error["status"] == "RESOURCE_EXHAUSTED" and "since_revision" in error["message"]


def test_a_watcher_on_one_hub_sees_changes_committed_on_another_and_resumes_on_it(
    tmp_path: Path,
) -> None:
    """Two hubs on one PostgreSQL database: the feed lives in the store, so a change made
    through hub b reaches a watcher of hub a, and a revision from a resumes on b."""
    url = stores.store_url(tmp_path, "postgres")
    loop = LoopThread()
    a = Hub(loop=loop, db_path=url, settings=WATCH).start()
    b = Hub(loop=loop, db_path=url, settings=WATCH).start()
    try:
        b.register_cluster("east")
        b.create_project("search", H100_80GB=16)
        on_a = SseWatcher(a, "?kinds=workloads")
        try:
            ref = b.post("/v1/workloads", workload("llama", tp=1))["workload_id"]
            wait_until(lambda: seen(on_a, "workload", "added", workload_id=ref), what="on a")
            revision = max(e["revision"] for e in on_a.events)
        finally:
            on_a.close()
        a.patch(f"/v1/workloads/{ref}", {"replicas": 3})
        on_b = GrpcWatcher(b, kinds=["workloads"], since_revision=revision)
        try:
            wait_until(
                lambda: seen(on_b, "workload", "modified", workload_id=ref, replicas=3),
                what="the change made on a, resumed on b",
            )
            assert all(e["revision"] > revision for e in on_b.events)
        finally:
            on_b.close()
    finally:
        a.stop()
        b.stop()
        loop.close()


def test_a_grpc_client_that_stops_reading_is_cut_off_with_resource_exhausted(
    tmp_path: Path,
) -> None:
    settings = dataclasses.replace(WATCH, watch_buffer=4, watch_heartbeat_s=30.0)
    with running_hub(tmp_path, settings) as (_, hub):
        hub.create_project("search", H100_80GB=1000)
        hub.register_cluster("east")
        with grpc.insecure_channel(hub.grpc_target) as channel:
            stub = control_pb2_grpc.ControlServiceStub(channel)
            metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
            stream = stub.Watch(control_pb2.WatchRequest(kinds=["workloads"]), metadata=metadata)
            assert next(stream).type == control_pb2.WatchEvent.TYPE_BOOKMARK  # then no reads
            feed = hub.server.watch_feed if hub.server else None
            assert feed is not None
            args = ["--flag-" + "x" * 2000 for _ in range(8)]
            deadline = time.monotonic() + 120
            n = 0
            while feed.cut_offs == 0 and time.monotonic() < deadline:
                hub.post("/v1/workloads", workload(f"w{n}", tp=1, replicas=0, engine_args=args))
                n += 1
            assert feed.cut_offs == 1, f"not cut off after {n} workloads"
            # What was in flight still arrives, then the status says why it ended.
            with pytest.raises(grpc.RpcError) as ended:
                for _ in stream:
                    pass
            assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "since_revision" in (ended.value.details() or "")
