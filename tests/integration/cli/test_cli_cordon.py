"""`wingsmith cordon|uncordon cluster X [--node N | --device-class C]` against a real hub."""

from __future__ import annotations

import json

import pytest

from tests.integration.cli.conftest import Runner


def test_cordon_and_uncordon_print_the_cluster_with_its_scheduling(cli: Runner) -> None:
    cli.hub.client().post("/v1/clusters", {"cluster_id": "east"})

    out = cli.ok("cordon", "cluster", "east")
    assert out.splitlines()[0].split()[-1] == "SCHEDULING"
    assert out.splitlines()[1].split()[-1] == "cordoned"

    answer = json.loads(
        cli.ok("cordon", "cluster", "east", "--device-class", "A100-40GB", "-o", "json")
    )
    assert (answer["cordoned"], answer["cordoned_device_classes"]) == (True, ["A100-40GB"])

    cli.ok("uncordon", "cluster", "east", "--device-class", "A100-40GB")
    dry = cli.ok("drain", "cluster", "east", "--dry-run")
    assert dry.startswith("cluster/east drain (dry run): no change"), dry
    assert cli.hub.client().get("/v1/clusters/east").get("draining", False) is False
    out = cli.ok("drain", "cluster", "east")
    assert out.splitlines()[1].split()[-1] == "draining"
    out = cli.ok("uncordon", "cluster", "east")
    assert out.splitlines()[1].split()[-1] == "open"
    assert cli.hub.client().get("/v1/clusters/east").get("cordoned", False) is False


def test_cordon_refuses_what_it_cannot_do(cli: Runner) -> None:
    cli.hub.client().post("/v1/clusters", {"cluster_id": "east"})
    unknown = cli("cordon", "cluster", "east", "--node", "gpu-7")
    assert unknown.code == 1
    assert "404 NOT_FOUND" in unknown.err and "node 'gpu-7' not found" in unknown.err
    missing = cli("uncordon", "cluster", "nowhere")
    assert missing.err == "error: 404 NOT_FOUND: cluster 'nowhere' not found\n"
    with pytest.raises(SystemExit) as usage:
        cli("cordon", "cluster", "east", "--node", "n1", "--device-class", "A100-40GB")
    assert usage.value.code == 2


def test_describe_a_workload_shows_its_failovers(cli: Runner) -> None:
    client = cli.hub.client()
    client.post("/v1/clusters", {"cluster_id": "east"})
    client.post("/v1/projects", {"name": "team-a", "quotas": {"H100-80GB": 8}})
    client.post(
        "/v1/workloads",
        {
            "name": "llama",
            "project": "team-a",
            "replicas": 1,
            "device_class": "H100-80GB",
            "serving": {"engine": "vllm", "engine_version": "0.11.0", "model": "m"},
            "placement": {"clusters": ["east"], "failover": {"toleration_seconds": 60}},
        },
    )
    assert "Failovers: <none>" in cli.ok("describe", "workload", "llama")

    cli.ok("cordon", "cluster", "east")
    lines = cli.ok("describe", "workload", "llama").splitlines()
    at = lines.index("Failovers:")
    assert lines[at + 1].split()[:3] == ["CLUSTER", "CAUSE", "STATE"]
    row = lines[at + 2].split()
    assert row[:3] == ["east", "cordoned", "stays"]
    # Pinned to east: nowhere else to go, and it says so; nothing deleted there.
    assert "no other eligible cluster is open" in lines[at + 2]
