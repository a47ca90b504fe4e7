"""Kill loop: SIGKILL the hub and the agent, round after round, and check convergence each time.

Both run as real processes (`python -m hub`, `python -m agent --simulate`) talking gRPC on
127.0.0.1; the hub keeps its ports across restarts (bound at first on port 0) so the agent
finds it again on its own. Every round makes an acknowledged write, kills one side, and waits
for the cluster to converge: the agent connected, its applied revision equal to the hub's
desired revision (issue 13 item 4: the Hello re-acknowledges what the agent applied, so an ack
the hub took just before it died is not lost), every acknowledged write present, and the
cluster running what was last written. Waits are on conditions, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness import ADMIN_TOKEN, wait_until, workload

SPEC = "nodes=2,gpus=8,class=H100-80GB,ready_after=0.2s"


class Processes:
    """A hub process on fixed ports after its first start, and one agent process."""

    def __init__(self, tmp_path: Path) -> None:
        self.db = tmp_path / "hub.db"
        self.ready_file = tmp_path / "ready.json"
        self.grpc = "127.0.0.1:0"
        self.http = "127.0.0.1:0"
        self.hub: subprocess.Popen[bytes] | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.log = (tmp_path / "processes.log").open("wb")

    def start_hub(self) -> None:
        self.ready_file.unlink(missing_ok=True)
        self.hub = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hub",
                "--db",
                str(self.db),
                "--grpc-listen",
                self.grpc,
                "--http-listen",
                self.http,
                "--ready-file",
                str(self.ready_file),
                "--log-level",
                "WARNING",
            ],
            env={**os.environ, "WINGSMITH_ADMIN_TOKEN": ADMIN_TOKEN},
            stdout=self.log,
            stderr=self.log,
        )
        wait_until(
            lambda: self.ready_file.exists() and self.ready_file.read_text(),
            timeout=30,
            what="hub up",
        )
        bound = json.loads(self.ready_file.read_text())
        # Keep the ports: the agent reconnects to the same address after a kill.
        self.grpc, self.http = bound["grpc"], bound["http"]

    def start_agent(self) -> None:
        self.agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent",
                "--hub",
                self.grpc,
                "--cluster-id",
                "east",
                "--simulate",
                SPEC,
                "--log-level",
                "WARNING",
            ],
            env={**os.environ, "WINGSMITH_AGENT_TOKEN": self.token},
            stdout=self.log,
            stderr=self.log,
        )

    @staticmethod
    def kill(process: subprocess.Popen[bytes] | None) -> None:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)

    def stop(self) -> None:
        for process in (self.agent, self.hub):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.kill(process)
        self.log.close()

    def rest(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://{self.http}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "authorization": f"Bearer {ADMIN_TOKEN}",
                "content-type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(json.loads(response.read()))


def _converged(p: Processes, expected: dict[str, int]) -> str:
    """'' once the cluster converged on `expected` (workload -> replicas); else what is not."""
    cluster = p.rest("GET", "/v1/clusters/east")
    if not cluster["connected"]:
        return "agent not connected"
    if cluster["applied_revision"] != cluster["desired_revision"]:
        return f"applied {cluster['applied_revision']} of {cluster['desired_revision']}"
    listed = p.rest("GET", "/v1/workloads?page_size=100")["workloads"]
    names = sorted(w["name"] for w in listed)
    if names != sorted(expected):
        return f"workloads {names}"
    for name, replicas in expected.items():
        deployment = p.rest("GET", f"/v1/deployments/{name}.east")
        status = deployment["status"] or {}
        if deployment["desired_replicas"] != replicas:
            return f"{name}: desired {deployment['desired_replicas']} != written {replicas}"
        if status.get("ready_replicas") != replicas or not deployment["sync"]["applied"]:
            return f"{name}: status {status}"
    return ""


def _wait_converged(p: Processes, expected: dict[str, int], round_: int) -> None:
    last: list[str] = []

    def check() -> bool:
        try:
            last[:] = [_converged(p, expected)]
        except (urllib.error.URLError, ConnectionError) as e:
            last[:] = [f"hub unreachable: {e}"]
        return last[0] == ""

    try:
        wait_until(check, timeout=30, interval=0.1)
    except AssertionError:
        raise AssertionError(f"round {round_}: did not converge: {last[0]}") from None


def _wait_applied_and_observed(p: Processes, name: str, replicas: int) -> None:
    """The agent applied the write and reported it: its ack reached the hub before its report
    (one stream, in order), so the hub now holds the ack, perhaps only in memory."""
    wait_until(
        lambda: (
            (p.rest("GET", f"/v1/deployments/{name}.east")["status"] or {}).get("desired_replicas")
            == replicas
        ),
        timeout=30,
        what=f"{name} applied with {replicas} replicas",
    )


@pytest.mark.slow
def test_kill_loop_converges_every_round_and_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    p = Processes(tmp_path)
    try:
        p.start_hub()
        p.rest("POST", "/v1/projects", {"name": "search", "quotas": {"H100-80GB": 16}})
        p.token = p.rest("POST", "/v1/clusters", {"cluster_id": "east"})["token"]
        expected = {"base": 1}
        p.rest("POST", "/v1/workloads", workload("base", tp=1, clusters=("east",)))
        p.start_agent()
        _wait_converged(p, expected, 0)
        # Which side dies each round: the hub right after the agent acked a write (the ack
        # may exist only in the hub's memory), the agent with a write waiting for it, both.
        plan = ["hub", "agent", "hub", "both", "hub"]
        for round_, victim in enumerate(plan, start=1):
            name = f"w{round_}"
            replicas = 1 + round_ % 3
            p.rest("POST", "/v1/workloads", workload(name, tp=1, clusters=("east",)))
            p.rest("PATCH", "/v1/workloads/base", {"replicas": replicas})
            expected[name], expected["base"] = 1, replicas
            if victim in ("hub", "both"):
                _wait_applied_and_observed(p, "base", replicas)
                Processes.kill(p.hub)
            if victim in ("agent", "both"):
                Processes.kill(p.agent)
            if victim in ("hub", "both"):
                p.start_hub()
            if victim in ("agent", "both"):
                p.start_agent()
            _wait_converged(p, expected, round_)
        assert p.hub is not None and p.hub.poll() is None
        assert p.agent is not None and p.agent.poll() is None
    finally:
        p.stop()
