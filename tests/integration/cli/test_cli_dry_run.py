"""`--dry-run` on the workload verbs (issue 12 item 5): `apply -f`, `scale` and `delete` ask
the hub with validate_only and print its answer as a table; nothing changes on the hub."""

from __future__ import annotations

import json
import pathlib

from tests.integration.cli import manifests
from tests.integration.cli.conftest import Runner


def test_scale_and_delete_dry_runs_print_the_hubs_answer_and_change_nothing(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    cli.ok("apply", "-f", manifests.write(tmp_path, manifests.FLEET))
    client = cli.hub.client()
    before = json.dumps(client.get("/v1/workloads"), sort_keys=True)

    scaled = cli.ok("scale", "workload", "llama", "--replicas", "5", "--dry-run").splitlines()
    assert scaled[0] == (
        "workload/llama scaled to 5 (dry run): 1 deployment: 1 scaled,"
        " 1 waits (insufficient_capacity)"
    )
    assert scaled[2].split() == [
        "llama.east", "east", "scaled,waits", "2->5", "0", "0", "pending",
        "insufficient_capacity", "1",
    ]  # fmt: skip

    deleted = cli.ok("delete", "workload", "llama", "--dry-run").splitlines()
    assert deleted[0] == "workload/llama deleted (dry run): 1 deployment: 1 removed"
    assert deleted[2].split()[:5] == ["llama.east", "east", "removed", "2->0", "0"]

    answer = json.loads(cli.ok("delete", "workload", "llama", "--dry-run", "-o", "json"))
    assert [c["effects"] for c in answer["dry_run"]["changes"]] == [["removed"]]

    assert json.dumps(client.get("/v1/workloads"), sort_keys=True) == before
    refused = cli("delete", "cluster", "east", "--dry-run")
    assert refused.code == 2 and "only workloads have a dry run" in refused.err


def test_apply_dry_run_of_a_workload_in_a_project_it_would_create_says_it_is_unchecked(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    fleet = manifests.FLEET.replace("team-a", "team-z")
    out = cli.ok("apply", "-f", manifests.write(tmp_path, fleet), "--dry-run").splitlines()
    assert out == [
        "project/team-z created (dry run)",
        "cluster/east created (dry run)",
        "workload/llama created (dry run)",
        "  not checked by the hub: its project or cluster is created first",
    ]
    assert cli.hub.client().get("/v1/workloads")["workloads"] == []


def test_create_disable_and_rollout_dry_runs_ask_the_hub_and_change_nothing(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    cli.ok("apply", "-f", manifests.write(tmp_path, manifests.FLEET))
    client = cli.hub.client()
    before = json.dumps(client.get("/v1/deployments"), sort_keys=True)

    other = manifests.WORKLOAD.replace("name: llama", "name: other")
    created = cli.ok("create", "-f", manifests.write(tmp_path, other, name="o.yaml"), "--dry-run")
    lines = created.splitlines()
    assert lines[0] == (
        "workload/other created (dry run): 1 deployment: 1 created, 1 waits (insufficient_capacity)"
    )
    assert lines[2].split()[:4] == ["other.east", "east", "created,waits", "0->2"]
    assert cli("get", "workload", "other").code == 1, "not created"

    disabled = cli.ok("disable", "deployment", "llama.east", "--dry-run").splitlines()
    assert disabled[0] == "deployment/llama.east disabled (dry run): 1 deployment: 1 disabled"

    # Refused as the real call is: there is no rollout to abort.
    refused = cli("rollout", "abort", "workload", "llama", "--dry-run")
    assert refused.code == 1 and "no rollout to abort" in refused.err

    assert json.dumps(client.get("/v1/deployments"), sort_keys=True) == before
