"""`wingsmith rollout status|pause|resume|abort workload X` against a real hub (the waves
themselves, with agents, are tests/integration/test_rollouts.py)."""

from __future__ import annotations

import json
import pathlib

from tests.harness import wait_until
from tests.integration.cli.conftest import Runner


def _fleet(cli: Runner) -> None:
    client = cli.hub.client()
    client.post("/v1/projects", {"name": "search", "quotas": {"H100-80GB": 16}})
    for cluster_id in ("east", "west"):
        client.post("/v1/clusters", {"cluster_id": cluster_id})
    client.post(
        "/v1/workloads",
        {
            "name": "chat",
            "project": "search",
            "replicas": 2,
            "device_class": "H100-80GB",
            "serving": {"engine": "vllm", "engine_version": "0.11.0", "model": "m"},
            "placement": {"clusters": ["east", "west"]},
            "rollout": {"max_clusters_in_flight": 1},
        },
    )


def test_rollout_status_shows_each_cluster_wave(cli: Runner) -> None:
    _fleet(cli)
    assert cli.ok("rollout", "status", "workload", "chat") == (
        "workload chat: no rollout in waves (waves of 1 cluster(s))\n"
    )
    cli.hub.client().patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    # Nothing is admitted (no agent reported devices): each wave is done as soon as it is
    # handed out, and the periodic pass hands out the next.
    wait_until(
        lambda: "Rollout:   converged" in cli.ok("rollout", "status", "workload", "chat"),
        what="converged",
    )
    lines = cli.ok("rollout", "status", "workload", "chat").splitlines()
    assert lines[3].split() == ["CLUSTER", "WAVE", "CHANGED"]
    assert [line.split()[:2] for line in lines[4:]] == [
        ["east", "converged"],
        ["west", "converged"],
    ]
    status = json.loads(cli.ok("rollout", "status", "workload", "chat", "-o", "json"))
    assert status["state"] == "converged"
    assert status["target_serving_digest"] != status["previous_serving_digest"]


def test_resume_or_abort_without_a_rollout_says_why(cli: Runner) -> None:
    _fleet(cli)
    refused = cli("rollout", "resume", "workload", "chat")
    assert refused.code == 1
    assert "409 FAILED_PRECONDITION: workload chat has no paused rollout" in refused.err
    refused = cli("rollout", "abort", "workload", "chat")
    assert refused.code == 1
    assert "has no rollout to abort (rollout: none)" in refused.err


def test_pause_without_a_rolling_rollout_says_why_and_its_dry_run_too(cli: Runner) -> None:
    _fleet(cli)
    for extra in ((), ("--dry-run",)):
        refused = cli("rollout", "pause", "workload", "chat", *extra)
        assert refused.code == 1
        assert (
            "409 FAILED_PRECONDITION: workload chat has no rolling rollout to pause"
            " (rollout: none)" in refused.err
        )
    wrong = cli("rollout", "pause", "deployment", "chat.east")
    assert wrong.code == 2
    assert "rollout pause applies to workloads" in wrong.err


def test_rollout_applies_to_workloads_only(cli: Runner) -> None:
    wrong = cli("rollout", "resume", "deployment", "chat.east")
    assert wrong.code == 2
    assert "rollout resume applies to workloads" in wrong.err


def test_describe_shows_the_rollout_and_apply_changes_the_policy(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    _fleet(cli)
    cli.hub.client().patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})
    page = cli.ok("describe", "workload", "chat")
    assert "Rollout:\n  Max Clusters In Flight: 1\n" in page
    # Its state moves on by itself here (nothing is admitted: each wave is done at once).
    assert "Rollout Status:\n  State:  " in page
    assert "  Target Serving Digest:   svg_" in page
    assert "    - Cluster ID:  west\n      State:       " in page

    manifest = tmp_path / "chat.yaml"
    manifest.write_text(
        "kind: Workload\nname: chat\nproject: search\nreplicas: 2\ndevice_class: H100-80GB\n"
        'serving: {engine: vllm, engine_version: "0.11.1", model: m}\n'
        "placement: {clusters: [east, west]}\n"
        "rollout: {max_clusters_in_flight: 2, wave_deadline_seconds: 120}\n"
    )
    assert cli.ok("apply", "-f", str(manifest)) == "workload/chat configured (rollout)\n"
    policy = cli.hub.client().get("/v1/workloads/chat")["rollout"]
    assert policy == {"max_clusters_in_flight": 2, "wave_deadline_seconds": 120}
    assert cli.ok("apply", "-f", str(manifest)) == "workload/chat unchanged\n"
