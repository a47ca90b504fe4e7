"""The README's step-by-step, as a new user runs it: separate hub and agent processes started
with the documented commands, REST calls with the documented bodies, and grpcurl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness import grpcurl_path, wait_until

TOKEN = "readme-admin-token-0123456789"
pytestmark = pytest.mark.slow


def _call(http: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://{http}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        # As curl -d sends it: no JSON content type.
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


def test_the_readme_walkthrough_reaches_running(tmp_path: Path) -> None:
    env = {**os.environ, "WINGSMITH_ADMIN_TOKEN": TOKEN}
    ready = tmp_path / "ready.json"
    hub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hub",
            "--db",
            str(tmp_path / "wingsmith.db"),
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--ready-file",
            str(ready),
            "--heartbeat-interval",
            "0.5",
        ],
        env=env,
    )
    agent = None
    try:
        wait_until(lambda: ready.exists() and ready.read_text(), timeout=30, what="hub up")
        addresses = json.loads(ready.read_text())
        http, grpc_address = addresses["http"], addresses["grpc"]

        created = _call(
            http, "POST", "/v1/clusters", {"cluster_id": "east", "labels": {"region": "us-east"}}
        )
        assert created["token"].startswith("wsa_")
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent",
                "--hub",
                grpc_address,
                "--cluster-id",
                "east",
                "--simulate",
                "nodes=2,gpus=8,class=H100-80GB,ready_after=1s",
            ],
            env={**env, "WINGSMITH_AGENT_TOKEN": created["token"]},
        )
        _call(http, "POST", "/v1/projects", {"name": "search", "quotas": {"H100-80GB": 16}})
        wait_until(lambda: _call(http, "GET", "/v1/clusters/east")["connected"], what="agent")
        workload = _call(
            http,
            "POST",
            "/v1/workloads",
            {
                "name": "llama-70b",
                "project": "search",
                "replicas": 2,
                "device_class": "H100-80GB",
                "serving": {
                    "engine": "vllm",
                    "engine_version": "0.11.0",
                    "model": "meta-llama/Llama-3.3-70B-Instruct",
                    "tensor_parallel": 4,
                    "pipeline_parallel": 1,
                    "context_length": 8192,
                    "quantization": "fp8",
                },
                "placement": {"clusters": ["east"]},
            },
        )
        assert workload["phase"] in ("pending", "admitted")
        wait_until(
            lambda: _call(http, "GET", "/v1/workloads/llama-70b")["phase"] == "running",
            timeout=60,
            what="running",
        )
        replicas = _call(http, "GET", "/v1/replicas?deployment_id=llama-70b.east")["replicas"]
        assert len(replicas) == 2

        grpcurl = grpcurl_path()
        listed = subprocess.run(
            [grpcurl, "-plaintext", grpc_address, "list"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "wingsmith.v1.ControlService" in listed.stdout
        got = subprocess.run(
            [
                grpcurl,
                "-plaintext",
                "-H",
                f"authorization: Bearer {TOKEN}",
                "-d",
                json.dumps(
                    {
                        "ref": "llama-70b",
                        "workload": {"replicas": 3},
                        "update_mask": {"paths": ["replicas"]},
                    }
                ),
                grpc_address,
                "wingsmith.v1.ControlService/UpdateWorkload",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["replicas"] == 3
    finally:
        for process in (agent, hub):
            if process is not None:
                process.terminate()
                process.wait(timeout=15)
