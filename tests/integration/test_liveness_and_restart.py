"""Staleness after the grace period, and hub restarts (in-process and kill -9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli import output
from tests.harness import (
    ADMIN_TOKEN,
    SHORT_GRACE,
    Hub,
    SimAgent,
    running_hub,
    start_agent,
    wait_until,
    workload,
)


def ready(deployment: dict[str, Any]) -> int:
    return int((deployment["status"] or {}).get("ready_replicas", 0))


def test_a_silent_cluster_becomes_stale_keeps_its_data_and_shows_nothing_ready(
    tmp_path: Path,
) -> None:
    with running_hub(tmp_path, SHORT_GRACE) as (
        loop,
        hub,
    ):
        token = hub.register_cluster("east")
        hub.create_project("search", H100_80GB=16)
        agent = start_agent(loop, hub, cluster_id="east", token=token)
        hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
        wait_until(lambda: ready(hub.get("/v1/deployments/chat.east")) == 2, what="running")
        assert hub.get("/v1/clusters/east")["stale"] is False

        agent.stop()  # the cluster goes quiet
        stale = wait_until(lambda: (c := hub.get("/v1/clusters/east"))["stale"] and c, what="stale")
        assert stale["last_seen"] is not None
        assert stale["devices"]["H100-80GB"]["total"] == 16, "its data is kept"
        deployment = hub.get("/v1/deployments/chat.east")
        assert deployment["status"]["stale"] is True
        assert deployment["status"]["ready_replicas"] == 0, "never shown as ready"
        # The last report (successful, all ready) is kept in the message, never as the phase.
        assert deployment["status"]["phase"] == "unknown"
        assert deployment["status"]["reason"] == "cluster_stale"
        assert "cluster east has not reported" in deployment["status"]["message"]
        assert "successful" in deployment["status"]["message"]
        assert deployment["live_digests"] == {}
        assert deployment["degraded"] is True
        replicas = hub.get("/v1/replicas?deployment_id=chat.east")["replicas"]
        assert len(replicas) == 2, "replicas are kept"
        assert all(r["stale"] and not r["ready"] for r in replicas)
        # The CLI reads the hub's JSON as docs/cli.md says: readiness unknown, marked stale.
        table = output.render(replicas, fmt="table", kind="replica").splitlines()
        assert [row.split()[3:5] for row in table[1:]] == [["unknown", "(stale)"]] * 2, table
        assert deployment["admitted_replicas"] == 2, "nothing destructive happens"

        again = start_agent(loop, hub, cluster_id="east", token=token)
        try:
            wait_until(lambda: not hub.get("/v1/clusters/east")["stale"], what="fresh again")
            # The old report counts again at once (2 ready); the new agent's own reports then
            # replace it (its pods start afresh): wait for the cluster's word, all ready.
            wait_until(
                lambda: (
                    (
                        (s := hub.get("/v1/deployments/chat.east")["status"])["phase"],
                        s["stale"],
                        s["ready_replicas"],
                    )
                    == ("successful", False, 2)
                ),
                what="running again, fresh",
            )
        finally:
            again.stop()


def test_after_a_hub_restart_agents_resume_and_nothing_unchanged_is_resent(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token)
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(lambda: ready(hub.get("/v1/deployments/chat.east")) == 2, what="running")
    stats = agent.agent.client.stats
    before = (stats.sessions, stats.snapshots, stats.desired_specs)
    pods_before = sorted(p.name for p in agent.cluster.list_pods())

    hub.restart()

    wait_until(lambda: stats.sessions == before[0] + 1, what="the agent resumed")
    wait_until(lambda: hub.get("/v1/clusters/east")["connected"], what="connected")
    assert (stats.snapshots, stats.desired_specs) == before[1:], "no desired state resent"
    assert hub.metric("wingsmith_desired_deployments_sent_total", kind="snapshot") == 0
    assert hub.metric("wingsmith_desired_deployments_sent_total", kind="delta") == 0
    assert hub.get("/v1/workloads/chat")["phase"] == "running", "data kept"
    assert sorted(p.name for p in agent.cluster.list_pods()) == pods_before, "nothing restarted"
    # Nor are observations: the Welcome told the agent what the hub holds, all of it current.
    wait_until(
        lambda: hub.metric("wingsmith_stream_messages_total", direction="in", type="observations"),
        what="the agent's first report after the restart (the complete discovered set)",
    )
    assert hub.metric("wingsmith_observation_records_total") == 0, "no observation resent"

    # A change after the restart arrives as a delta of exactly that deployment.
    hub.patch("/v1/workloads/chat", {"replicas": 3})
    wait_until(lambda: ready(hub.get("/v1/deployments/chat.east")) == 3, what="scaled")
    assert stats.snapshots == before[1]
    assert stats.desired_specs == before[2] + 1
    assert hub.metric("wingsmith_desired_deployments_sent_total", kind="delta") == 1


def test_what_changed_while_the_hub_was_down_is_reported_after_the_restart_and_only_that(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token)
    hub.post("/v1/workloads", workload("chat", replicas=2, clusters=("east",)))
    wait_until(lambda: ready(hub.get("/v1/deployments/chat.east")) == 2, what="running")
    deployment_id = hub.get("/v1/deployments/chat.east")["deployment_id"]
    nodes_before = {n["node_id"]: n for n in hub.get("/v1/clusters/east")["nodes"]}

    hub.stop()
    victim = sorted(p.name for p in agent.cluster.list_pods() if p.gpu_request)[0]
    agent.cluster.delete_pod("wingsmith", victim)  # Dynamo replaces it: a new pod name
    hub.start()

    def replica_names() -> set[str]:
        found = hub.get(f"/v1/replicas?deployment_id={deployment_id}")["replicas"]
        return {r["name"] for r in found}

    wait_until(lambda: victim not in replica_names(), what="the replacement reported")
    wait_until(lambda: ready(hub.get("/v1/deployments/chat.east")) == 2, what="running again")
    records = hub.metric("wingsmith_observation_records_total")
    # The deployment and the nodes whose allocations moved were resent, not the whole cluster.
    resent_nodes = {
        n["node_id"]
        for n in hub.get("/v1/clusters/east")["nodes"]
        if n != nodes_before.get(n["node_id"])
    }
    assert 0 < len(resent_nodes) < len(nodes_before)
    assert records > 0


def test_a_reconnecting_agent_gets_only_what_changed_while_it_was_away(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(cluster_id="east", token=token)
    hub.post("/v1/workloads", workload("one", replicas=1, clusters=("east",)))
    hub.post("/v1/workloads", workload("two", replicas=1, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/two")["phase"] == "running")
    stats = agent.agent.client.stats
    specs_before = stats.desired_specs

    hub.stop()
    hub.start()
    wait_until(lambda: hub.get("/v1/clusters/east")["connected"], what="reconnected")
    hub.rest("DELETE", "/v1/workloads/one")
    wait_until(lambda: [d.name for d in agent.cluster.list_dgds()] == ["two"], what="deleted")
    assert stats.desired_specs == specs_before + 1, "only the tombstone was sent"


def _start_hub_process(db: Path, ready_file: Path) -> subprocess.Popen[bytes]:
    ready_file.unlink(missing_ok=True)
    env = {**os.environ, "WINGSMITH_ADMIN_TOKEN": ADMIN_TOKEN}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hub",
            "--db",
            str(db),
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--ready-file",
            str(ready_file),
            "--log-level",
            "WARNING",
        ],
        env=env,
    )
    wait_until(lambda: ready_file.exists() and ready_file.read_text(), timeout=30, what="hub up")
    return process


def _rest(address: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://{address}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {ADMIN_TOKEN}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


@pytest.mark.slow
def test_kill_9_loses_nothing_that_was_acknowledged(tmp_path: Path) -> None:
    db, ready_file = tmp_path / "hub.db", tmp_path / "ready.json"
    process = _start_hub_process(db, ready_file)
    try:
        http = json.loads(ready_file.read_text())["http"]
        _rest(http, "POST", "/v1/projects", {"name": "search", "quotas": {"H100-80GB": 16}})
        _rest(http, "POST", "/v1/clusters", {"cluster_id": "east"})
        for i in range(20):
            _rest(http, "POST", "/v1/workloads", workload(f"w{i}", clusters=("east",)))
        _rest(http, "PATCH", "/v1/workloads/w7", {"replicas": 3})
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    process = _start_hub_process(db, ready_file)
    try:
        http = json.loads(ready_file.read_text())["http"]
        names = [w["name"] for w in _rest(http, "GET", "/v1/workloads?page_size=100")["workloads"]]
        assert sorted(names) == sorted(f"w{i}" for i in range(20))
        assert _rest(http, "GET", "/v1/workloads/w7")["replicas"] == 3
        assert _rest(http, "GET", "/v1/projects/search")["quotas"] == {"H100-80GB": 16}
    finally:
        process.terminate()
        process.wait(timeout=10)
        time.sleep(0)
