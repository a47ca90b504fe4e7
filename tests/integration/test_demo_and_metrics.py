"""The demo reaches its three outcomes, and /metrics carries the documented series."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness import Hub, SimAgent, wait_until, workload


@pytest.mark.slow
def test_the_demo_settles_with_one_running_one_quota_one_capacity(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "demo",
            "--once",
            "--dir",
            str(tmp_path / "demo"),
            "--ready-after",
            "0.3s",
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    before_stories = result.stdout.split("== rollout")[0].strip().split("\n\n")[-2]
    _assert_three_outcomes(before_stories)
    # The view the demo keeps running with: the last one printed, after both stories.
    last = result.stdout.split("== settled ==")[1].split("The demo settled (--once)")[0]
    last = last.strip().split("\n\n")[-2]
    _assert_three_outcomes(last)
    assert "legacy-mistral  research   running    1/1" in last
    # --once exits: it must not claim to keep running, nor offer commands for a hub that stops.
    assert "The demo settled (--once): it stops now." in result.stdout
    for claim in ("The demo is running", "Ctrl-C", "curl -s", "grpcurl -plaintext"):
        assert claim not in result.stdout, claim
    rollout = result.stdout.split("== rollout")[1]
    assert "rolling: live_digests" in rollout and "converged: generation 2" in rollout
    adoption = result.stdout.split("== adoption")[1]
    assert "promoted: workload legacy-mistral" in adoption
    assert "pods unchanged, nothing restarted" in adoption
    failover = result.stdout.split("== failover")[1].split("== settled ==")[0]
    assert "failed over: cluster west was silent" in failover
    assert "stand in on east (1) (nothing was deleted on west)" in failover
    assert "llama-70b runs 4/4 ready" in failover
    assert "failed back: cluster west was back with its replicas ready for 5s" in failover
    assert "stopped: hub and agents shut down cleanly." in result.stdout


def _assert_three_outcomes(view: str) -> None:
    """One workload running, one pending on quota, one pending on capacity."""
    rows = {line.split()[0]: line for line in view.splitlines() if line[:1].isalpha()}
    assert "llama-70b       search     running    4/4" in rows["llama-70b"], view
    assert "pending" in rows["mixtral-8x22b"] and "insufficient_quota" in rows["mixtral-8x22b"]
    assert "pending" in rows["qwen-72b"] and "insufficient_capacity" in rows["qwen-72b"], view


def test_metrics_show_agents_messages_admissions_and_phases(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=4)
    agents(cluster_id="east", token=token)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    hub.post("/v1/workloads", workload("fits", replicas=1, clusters=("east",)))
    hub.post("/v1/workloads", workload("too-big", replicas=2, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/workloads/fits")["phase"] == "running")

    assert hub.metric("wingsmith_agents_connected") == 1
    assert hub.metric("wingsmith_stream_messages_total", direction="in", type="hello") == 1
    assert hub.metric("wingsmith_stream_messages_total", direction="in", type="observations") >= 1
    assert hub.metric("wingsmith_stream_messages_total", direction="out", type="desired") >= 1
    assert hub.metric("wingsmith_admission_decisions_total", result="admitted", reason="none") >= 1
    assert (
        hub.metric(
            "wingsmith_admission_decisions_total", result="waiting", reason="insufficient_quota"
        )
        >= 1
    )
    assert hub.metric("wingsmith_deployments", phase="running") == 1
    assert hub.metric("wingsmith_deployments", phase="pending") == 1


def test_a_deployment_that_keeps_waiting_is_one_decision_however_often_it_is_reevaluated(
    hub: Hub, agents: Callable[..., SimAgent]
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=4)
    agents(cluster_id="east", token=token)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
    hub.post("/v1/workloads", workload("too-big", replicas=2, clusters=("east",)))
    waiting = {"result": "waiting", "reason": "insufficient_quota"}
    evaluated = hub.metric("wingsmith_admission_evaluations_total", **waiting)
    for limit in (5, 6, 7):  # each quota change re-evaluates it; none lets it in
        hub.patch("/v1/projects/search", {"quotas": {"H100-80GB": limit}})
    assert hub.metric("wingsmith_admission_decisions_total", **waiting) == 1
    assert hub.metric("wingsmith_admission_evaluations_total", **waiting) >= evaluated + 3
    hub.patch("/v1/projects/search", {"quotas": {"H100-80GB": 8}})
    admitted = {"result": "admitted", "reason": "none"}
    assert hub.metric("wingsmith_admission_decisions_total", **admitted) == 1


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_cleanly(tmp_path: Path) -> None:
    import signal

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "demo",
            "--dir",
            str(tmp_path / "demo"),
            "--ready-after",
            "0.3s",
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    shown = []
    for line in process.stdout:
        shown.append(line)
        if line.startswith("Ctrl-C stops the demo"):
            break
    poke = "".join(shown).split("The demo is running.")[1]
    assert "grpcurl -plaintext" in poke and "curl -s" in poke and "wingsmith get" in poke
    # The dashboard's address, and it shows the demo's fleet once logged in.
    dashboard = re.search(r"Dashboard: (http://127\.0\.0\.1:\d+/ui/)", poke)
    token = re.search(r"admin token: (\S+)\)", poke)
    assert dashboard and token, poke
    _pasted_into_a_new_shell_they_work(poke, tmp_path)
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor()
    )
    login = urllib.parse.urlencode({"token": token.group(1), "next": "/ui/workloads"}).encode()
    with opener.open(dashboard.group(1) + "login", data=login, timeout=10) as page:
        assert "llama-70b" in page.read().decode()
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "stopped: hub and agents shut down cleanly." in rest


def _pasted_into_a_new_shell_they_work(poke: str, home: Path) -> None:
    """The printed commands, pasted into a shell that never activated the virtual
    environment (PATH of a fresh login, no WINGSMITH_ variables): wingsmith and grpcurl are
    found, and answer."""
    lines = [line.strip() for line in poke.splitlines()]
    setup = [line for line in lines if line.startswith("source ")]
    export = next(line for line in lines if line.startswith("export WINGSMITH_HUB_URL="))
    get = next(line for line in lines if line.endswith(" get workloads"))
    listing = next(line for line in lines if " -plaintext " in line and line.endswith(" list"))
    pasted = subprocess.run(
        ["bash", "-c", "\n".join(["set -e", *setup, export, get, listing])],
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert pasted.returncode == 0, pasted.stderr
    assert "llama-70b" in pasted.stdout and "wingsmith.v1.ControlService" in pasted.stdout
