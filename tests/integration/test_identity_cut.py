"""Deleting or re-keying a cluster cuts its identity at once (issue 13 item 3).

A stream's identity is the token it was opened with, not only the cluster id: deleting the
cluster or rotating its token closes the streams opened with the old token (UNAUTHENTICATED),
no batch they queued is written, and a cluster registered again under the same id never trusts
them. With mutual TLS, the certificates a deleted cluster's agents used are refused too.
Real hub, real agents on real gRPC streams; nothing is patched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.sync.channel import ChannelSecurity
from hub import tls
from hub.model import Device, NodeObservation, ObservationBatch
from hub.service import clusters as cluster_service
from hub.service import ingest as ingest_service
from tests.certs import Authority, Issued
from tests.harness import Hub, LoopThread, SimAgent, running_hub, start_agent, wait_until, workload
from tests.integration.rawstream import now_ns
from wingsmith.v1 import control_pb2, control_pb2_grpc, sync_pb2, sync_pb2_grpc


def _cut(agent: SimAgent) -> None:
    """Wait until the agent's stream was closed as unauthenticated."""
    stats = agent.agent.client.stats
    wait_until(
        lambda: (
            stats.last_code == grpc.StatusCode.UNAUTHENTICATED
            and not agent.agent.client.connected.is_set()
        ),
        what="the stream closed with UNAUTHENTICATED",
    )


def test_deleting_a_cluster_closes_its_stream_and_a_new_registration_never_trusts_it(
    hub: Hub, agents: Callable[..., SimAgent], caplog: pytest.LogCaptureFixture
) -> None:
    old_token = hub.register_cluster("east")
    old = agents(cluster_id="east", token=old_token, spec="nodes=1,gpus=8,class=H100-80GB")
    wait_until(lambda: hub.get("/v1/clusters/east")["nodes"], what="old agent reported its node")

    hub.rest("DELETE", "/v1/clusters/east")
    _cut(old)
    assert "cluster east was deleted: this stream's token is revoked" in caplog.text

    # The same id, registered again: a new identity. The old agent keeps trying with its
    # dead token and is refused every time; it never receives the new cluster's desired
    # state nor writes its node into it.
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", tp=1, clusters=("east",)))
    sessions = old.agent.client.stats.sessions
    attempts_seen = old.agent.client.stats.last_error
    wait_until(
        lambda: (
            old.agent.client.stats.last_error != attempts_seen
            or old.agent.client.stats.last_code == grpc.StatusCode.UNAUTHENTICATED
        ),
        what="the old agent retried",
    )
    cluster = hub.get("/v1/clusters/east")
    assert cluster["nodes"] == [] and not cluster["connected"]
    assert old.agent.client.stats.sessions == sessions, "no stream was opened with the old token"
    assert old.cluster.list_dgds() == [], "the old agent never received the new desired state"


def test_rotating_a_token_cuts_the_old_streams_and_the_new_token_syncs(
    hub: Hub, agents: Callable[..., SimAgent], caplog: pytest.LogCaptureFixture
) -> None:
    old_token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    old = agents(cluster_id="east", token=old_token)
    wait_until(lambda: hub.get("/v1/clusters/east")["connected"], what="connected")

    status, rotated = hub.rest("POST", "/v1/clusters/east:rotateToken", {})
    assert status == 200 and rotated["token"].startswith("wsa_") and rotated["token"] != old_token
    assert rotated["cluster"]["cluster_id"] == "east"
    _cut(old)
    assert "the token of cluster east was rotated: this stream's token is revoked" in caplog.text
    old.stop()

    new = agents(cluster_id="east", token=rotated["token"])
    hub.post("/v1/workloads", workload("llama", tp=1, clusters=("east",)))
    wait_until(lambda: [d.name for d in new.cluster.list_dgds()] == ["llama"], what="synced")

    # gRPC: the same call, and the agent holding the previous token is cut in turn.
    channel = grpc.insecure_channel(hub.grpc_target)
    try:
        stub = control_pb2_grpc.ControlServiceStub(channel)
        answer = stub.RotateClusterToken(
            control_pb2.RotateClusterTokenRequest(cluster_id="east"),
            metadata=(("authorization", "Bearer test-admin-token-0123456789"),),
        )
        assert answer.token.startswith("wsa_") and answer.token != rotated["token"]
        _cut(new)
        with pytest.raises(grpc.RpcError) as refused:
            stub.RotateClusterToken(
                control_pb2.RotateClusterTokenRequest(cluster_id="nowhere"),
                metadata=(("authorization", "Bearer test-admin-token-0123456789"),),
            )
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        channel.close()
    # The DGD the cut agent applied keeps running: cutting an identity destroys nothing.
    assert [d.name for d in new.cluster.list_dgds()] == ["llama"]


def test_a_batch_queued_under_a_rotated_token_is_never_written(hub: Hub) -> None:
    """The store checks the token in the write's own transaction: a batch that was in the
    ingest queue when the token changed is dropped, not written into the cluster."""
    token = hub.register_cluster("east")
    assert hub.server is not None and hub.server.ctx is not None
    ctx = hub.server.ctx
    gpu = Device(
        "GPU-00000001-0000-4000-8000-000000000001",
        "H100",
        80 << 30,
        "0000:01:00.0",
        "H100-80GB",
        True,
        "",
        True,
        "",
        "",
    )
    node = NodeObservation(node_id="n1", observe_ns=now_ns(), devices=(gpu,), allocations=())
    old = ingest_service.Report(
        "east", cluster_service.token_hash(token), ObservationBatch(1, nodes=(node,))
    )
    hub.rest("POST", "/v1/clusters/east:rotateToken", {})
    outcome = ingest_service.ingest_reports(ctx, [old])
    assert outcome.revoked == {0} and outcome.records == 0
    assert hub.get("/v1/clusters/east")["nodes"] == []
    # The same batch under the cluster's token of now is written.
    current = hub.rest("POST", "/v1/clusters/east:rotateToken", {})[1]["token"]
    fresh = ingest_service.Report("east", cluster_service.token_hash(current), old.batch)
    assert ingest_service.ingest_reports(ctx, [fresh]).revoked == set()
    assert [n["node_id"] for n in hub.get("/v1/clusters/east")["nodes"]] == ["n1"]


def _security(ca: Authority, issued: Issued) -> ChannelSecurity:
    return ChannelSecurity(
        ca_file=str(ca.cert), cert_file=str(issued.cert), key_file=str(issued.key)
    )


def _outcome(
    loop: LoopThread, hub: Hub, token: str, security: ChannelSecurity
) -> tuple[grpc.StatusCode | None, str]:
    agent = start_agent(loop, hub, cluster_id="east", token=token, security=security)
    try:
        stats = agent.agent.client.stats
        wait_until(lambda: stats.sessions or stats.last_code, what="an outcome")
        return (None, "") if stats.sessions else (stats.last_code, stats.last_error)
    finally:
        agent.stop()


def _keep(issued: Issued, directory: Path, name: str) -> Issued:
    """A copy of the files: issuing again for the same cluster overwrites them."""
    kept = Issued(directory / f"{name}.pem", directory / f"{name}.key")
    shutil.copy(issued.cert, kept.cert)
    shutil.copy(issued.key, kept.key)
    return kept


def test_a_certificate_of_a_deleted_or_rekeyed_cluster_is_refused(tmp_path: Path) -> None:
    ca = Authority(tmp_path, "wingsmith")
    server = ca.server()
    config = tls.TlsConfig(str(server.cert), str(server.key), str(ca.cert))
    with running_hub(tmp_path, tls=config, ca_file=str(ca.cert)) as (loop, hub):
        token = hub.register_cluster("east")
        first = _keep(ca.agent("east"), tmp_path, "first")
        assert _outcome(loop, hub, token, _security(ca, first)) == (None, "")

        # Deleted and registered again: the certificate bound to the old cluster is refused
        # even with the new cluster's token; a certificate issued anew works.
        hub.rest("DELETE", "/v1/clusters/east")
        token = hub.register_cluster("east")
        code, message = _outcome(loop, hub, token, _security(ca, first))
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in message
        second = _keep(ca.agent("east"), tmp_path, "second")
        assert _outcome(loop, hub, token, _security(ca, second)) == (None, "")

        # A plain rotation keeps certificates; --revoke-certificates refuses them.
        token = hub.rest("POST", "/v1/clusters/east:rotateToken", {})[1]["token"]
        assert _outcome(loop, hub, token, _security(ca, second)) == (None, "")
        token = hub.rest("POST", "/v1/clusters/east:rotateToken", {"revoke_certificates": True})[1][
            "token"
        ]
        code, _ = _outcome(loop, hub, token, _security(ca, second))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        third = _keep(ca.agent("east"), tmp_path, "third")
        assert _outcome(loop, hub, token, _security(ca, third)) == (None, "")


# -- a refusal the agent can read -------------------------------------------------------------
#
# grpc's asyncio client fails a write to a call its peer already ended and then reports its own
# INTERNAL "Internal error from Core" instead of the status the peer sent. A hub that ended a
# refused handshake before the agent's Hello was written lost the reason about once in a
# hundred refusals on a busy machine (hub/sync/handshake.py `_refuse`).


def test_a_refused_handshake_is_ended_only_once_the_hello_is_in(
    env: tuple[LoopThread, Hub],
) -> None:
    loop, hub = env

    async def handshake() -> tuple[bool, grpc.StatusCode, str]:
        async with grpc.aio.insecure_channel(hub.grpc_target) as channel:
            call = sync_pb2_grpc.ClusterSyncStub(channel).Sync(
                metadata=(("authorization", "Bearer wsa_not-a-real-token"),)
            )
            await call.wait_for_connection()
            # Refused (a wrong token), yet not ended while the agent has not written yet.
            status = asyncio.ensure_future(call.code())
            ended, _ = await asyncio.wait({status}, timeout=1.0)
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                hello = sync_pb2.Hello(cluster_id="east", agent_version="raw")
                await call.write(sync_pb2.AgentMessage(hello=hello))
            return bool(ended), await status, await call.details() or ""

    ended_before_the_hello, code, details = loop.run(handshake())
    assert not ended_before_the_hello, "the hub ended the call before the Hello was written"
    assert (code, details) == (grpc.StatusCode.UNAUTHENTICATED, "invalid cluster token")


def test_every_refused_agent_reads_and_logs_why(
    env: tuple[LoopThread, Hub], caplog: pytest.LogCaptureFixture
) -> None:
    """Many refusals in a row, each the agent's first attempt: every one says why (the old hub
    gave INTERNAL to 5 in 1,000 on a busy machine)."""
    loop, hub = env
    hub.register_cluster("east")
    caplog.set_level(logging.ERROR, logger="agent.sync.client")
    outcomes = []
    for _ in range(40):
        agent = start_agent(loop, hub, cluster_id="east", token="wsa_not-a-real-token")
        try:
            stats = agent.agent.client.stats
            wait_until(lambda: stats.last_code, what="the first refusal")  # noqa: B023
            outcomes.append((stats.last_code, stats.last_error))
        finally:
            agent.stop()
    refused = (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED: invalid cluster token")
    assert [o for o in outcomes if o != refused] == []
    logged = [r.getMessage() for r in caplog.records if r.name == "agent.sync.client"]
    assert logged and all(m.endswith("invalid cluster token") for m in logged), logged
