"""An agent given --metrics-listen serves its own /metrics: its calls to the cluster's API
(apply among them) and its node's NVML and kubelet reads with their outcomes and latencies,
its stream and leadership; `promtool check metrics` accepts it. Without the flag it serves
nothing."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from agent.app import AgentConfig
from agent.backoff import Backoff
from agent.simulation import build_simulated_agent
from agent.sync.channel import open_channel
from tests.harness import Hub, LoopThread, SimAgent, start_agent, wait_until, workload


def _start(loop: LoopThread, hub: Hub, token: str) -> SimAgent:
    async def build() -> SimAgent:
        channel = open_channel(hub.grpc_target, None)
        config = AgentConfig(
            hub=hub.grpc_target,
            cluster_id="east",
            token=token,
            resync_s=1.0,
            node_poll_s=1.0,
            metrics_listen="127.0.0.1:0",
        )
        agent = build_simulated_agent(
            config,
            spec="nodes=2,gpus=8,class=H100-80GB,ready_after=0.3s",
            channel=channel,
            backoff=Backoff(base_s=0.05, cap_s=0.5),
        )
        return SimAgent(agent=agent, future=None, channel=channel, loop=loop)  # type: ignore[arg-type]

    sim = loop.run(build())
    sim.future = loop.spawn(sim.agent.run())
    return sim


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return str(response.read().decode())


def _value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def test_the_agent_measures_its_cluster_calls_and_node_reads(
    env: tuple[LoopThread, Hub],
) -> None:
    loop, hub = env
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=8)
    sim = _start(loop, hub, token)
    try:
        port = wait_until(lambda: sim.agent.metrics_port, what="the agent's metrics port")
        hub.post("/v1/workloads", workload("measured", clusters=("east",)))
        wait_until(lambda: hub.get("/v1/workloads/measured")["phase"] == "running")
        text = _scrape(port)
        assert (
            _value(text, "wingsmith_agent_cluster_calls_total", call="apply_dgd", outcome="ok") >= 1
        )
        assert _value(text, "wingsmith_agent_cluster_call_seconds_count", call="apply_dgd") >= 1
        assert (
            _value(text, "wingsmith_agent_cluster_calls_total", call="list_dgds", outcome="ok") >= 1
        )
        assert _value(text, "wingsmith_agent_node_reads_total", source="nvml", outcome="ok") >= 2
        assert _value(text, "wingsmith_agent_node_reads_total", source="kubelet", outcome="ok") >= 2
        assert _value(text, "wingsmith_agent_node_read_seconds_count", source="nvml") >= 2
        assert _value(text, "wingsmith_agent_connected") == 1
        assert _value(text, "wingsmith_agent_leading") == 1
        applied = wait_until(lambda: int(hub.get("/v1/clusters/east")["applied_revision"]))
        assert _value(_scrape(port), "wingsmith_agent_desired_revision") >= applied
        assert _value(text, "wingsmith_agent_reconciles_total") >= 1
        assert _value(text, "wingsmith_agent_build_info") == 1
        assert "_created" not in text
        if shutil.which("promtool"):
            checked = subprocess.run(
                ["promtool", "check", "metrics"],
                input=text,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        sim.stop()
    # The server stops with the agent: SimAgent.stop returns once the agent's task is cancelled,
    # which can be before its shutdown (the `finally` that closes the server) has run.
    wait_until(lambda: _refused(port), what="the agent's metrics server to stop with it")


def _refused(port: int) -> bool:
    try:
        _scrape(port)
    except OSError:
        return True
    return False


def test_without_metrics_listen_the_agent_measures_and_serves_nothing(
    env: tuple[LoopThread, Hub],
) -> None:
    loop, hub = env
    sim = start_agent(loop, hub, cluster_id="east", token=hub.register_cluster("east"))
    try:
        wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="devices")
        assert sim.agent.metrics is None and sim.agent.metrics_port == 0
    finally:
        sim.stop()
