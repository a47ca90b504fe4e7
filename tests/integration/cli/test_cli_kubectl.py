"""The kubectl habits: `apply -f`, `delete -f`, `describe`, `-o wide|name|jsonpath=...`,
`--no-headers`, `get --watch` and shell completion, against a real hub (and, where replicas
and allocations matter, a real simulated agent). docs/cli.md quotes these tests' commands.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import threading
import time
from collections.abc import Callable

import pytest

from cli import main as cli_main
from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until
from tests.integration.cli import manifests
from tests.integration.cli.conftest import Result, Runner, RunningHub


def rows(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("  ") if cell] for line in table.splitlines()]


# -- apply -f / delete -f ---------------------------------------------------------------------


def test_apply_creates_then_changes_nothing_then_configures_what_differs(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    path = manifests.write(tmp_path, manifests.FLEET)
    first = cli.ok("apply", "-f", path)
    assert first.splitlines()[:3] == [
        "project/team-a created",
        "cluster/east created",
        "",
    ]
    assert "workload/llama created" in first and "WINGSMITH_AGENT_TOKEN=wsa_" in first

    assert cli.ok("apply", "-f", path).splitlines() == [
        "project/team-a unchanged",
        "cluster/east unchanged",
        "workload/llama unchanged",
    ]

    changed = manifests.FLEET.replace("replicas: 2", "replicas: 3").replace(
        "H100-80GB: 16", "H100-80GB: 24"
    )
    changed_path = manifests.write(tmp_path, changed, name="changed.yaml")
    # The workload's dry run is the hub's (validate_only): what it would decide, per deployment.
    dry = cli.ok("apply", "-f", changed_path, "--dry-run").splitlines()
    assert dry[:4] == [
        "project/team-a configured (quotas) (dry run)",
        "cluster/east unchanged (dry run)",
        "workload/llama configured (replicas) (dry run)",
        "  1 deployment: 1 scaled, 1 waits (insufficient_capacity)",
    ]
    header = "DEPLOYMENT CLUSTER EFFECTS REPLICAS ADMITTED READY PHASE REASON GENERATION"
    assert rows("\n".join(dry[4:6])) == [
        header.split(),
        [
            "llama.east",
            "east",
            "scaled,waits",
            "2->3",
            "0",
            "0",
            "pending",
            "insufficient_capacity",
            "1",
        ],
    ]
    client = cli.hub.client()
    assert client.get("/v1/workloads/llama")["replicas"] == 2, "a dry run writes nothing"

    assert cli.ok("apply", "-f", changed_path).splitlines() == [
        "project/team-a configured (quotas)",
        "cluster/east unchanged",
        "workload/llama configured (replicas)",
    ]
    assert client.get("/v1/workloads/llama")["replicas"] == 3
    assert client.get("/v1/projects/team-a")["quotas"] == {"H100-80GB": 24}
    assert "unchanged" in cli.ok("apply", "-f", changed_path).splitlines()[2]


def test_apply_refuses_to_change_what_the_api_cannot_and_says_how(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    cli.ok("apply", "-f", manifests.write(tmp_path, manifests.FLEET))
    moved = manifests.FLEET.replace("project: team-a", "project: team-b")
    result = cli("apply", "-f", manifests.write(tmp_path, moved, name="moved.yaml"))
    assert result.code == 1
    assert result.err.startswith(
        'error: workload/llama: project cannot be changed (the hub has "team-a"'
    )
    assert "delete it and apply again" in result.err


def test_apply_reads_stdin_and_prints_the_objects_as_json(
    cli: Runner, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(manifests.PROJECT))
    out = cli.ok("apply", "-f", "-", "-o", "json")
    (project,) = json.loads(out)["items"]
    assert project["name"] == "team-a" and project["quotas"] == {"H100-80GB": 16}


def test_delete_f_deletes_in_reverse_order_and_a_second_time_is_not_found(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    path = manifests.write(tmp_path, manifests.FLEET)
    cli.ok("apply", "-f", path)
    assert cli.ok("delete", "-f", path).splitlines() == [
        "workload/llama deleted",
        "cluster/east deleted",
        "project/team-a deleted",
    ]
    again = cli("delete", "-f", path)
    assert again.code == 1
    assert again.err == (
        "error: 404 NOT_FOUND: workload 'llama' not found\n"
        f"in {path}: document 3 (workload/llama)\n"
    )
    assert cli("delete", "-f", path, "--ignore-not-found") == Result(0, "", "")


# -- output -----------------------------------------------------------------------------------


@pytest.fixture
def fleet(cli: Runner, tmp_path: pathlib.Path) -> None:
    cli.ok("apply", "-f", manifests.write(tmp_path, manifests.FLEET))


@pytest.mark.usefixtures("fleet")
def test_output_name_wide_no_headers_and_jsonpath(cli: Runner) -> None:
    assert cli.ok("get", "workloads", "-o", "name") == "workload/llama\n"
    assert cli.ok("get", "clusters", "-o", "name") == "cluster/east\n"

    wide = rows(cli.ok("get", "workloads", "-o", "wide"))
    assert wide[0] == [
        "NAME",
        "PROJECT",
        "PHASE",
        "READY/DESIRED",
        "DEVICE-CLASS",
        "DEPLOYMENTS",
        "PRIORITY",
        "ID",
        "ENGINE",
        "VERSION",
        "MODEL",
        "LABELS",
    ]
    assert wide[1][-4:] == ["vllm", "0.12.0", "meta-llama/Llama-3.1-8B-Instruct", "-"]

    plain = cli.ok("get", "workloads", "--no-headers")
    assert plain.startswith("llama  team-a")
    assert len(plain.splitlines()) == 1

    names = cli.ok("get", "workloads", "-o", "jsonpath={.items[*].name}")
    assert names == "llama\n"
    template = 'jsonpath={range .items[*]}{.name}{"\\t"}{.replicas}{"\\n"}{end}'
    assert cli.ok("get", "workloads", "-o", template) == "llama\t2\n\n"
    one = cli.ok("get", "project", "team-a", "-o", "jsonpath={.quotas['H100-80GB']}")
    assert one == "16\n"


# -- describe ---------------------------------------------------------------------------------


@pytest.fixture
def live(hub: Hub, agents: Callable[..., SimAgent], capsys: pytest.CaptureFixture[str]) -> Runner:
    """A Runner against the harness hub, with one simulated cluster serving a workload."""
    runner = Runner(hub=_running(hub), capsys=capsys)
    agents(cluster_id="east", token=hub.register_cluster("east"))
    hub.create_project("team-a", H100_80GB=16)
    body = json.loads(json.dumps(WORKLOAD_BODY))
    hub.post("/v1/workloads", body)
    wait_until(
        lambda: (
            (hub.get("/v1/deployments/llama.east").get("status") or {}).get("ready_replicas") == 2
        ),
        what="two replicas ready",
    )
    return runner


WORKLOAD_BODY = {
    "name": "llama",
    "project": "team-a",
    "replicas": 2,
    "device_class": "H100-80GB",
    "serving": {
        "engine": "vllm",
        "engine_version": "0.12.0",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "tensor_parallel": 2,
    },
    "placement": {"clusters": ["east"]},
}


def _running(hub: Hub) -> RunningHub:
    return RunningHub(f"http://127.0.0.1:{hub.http_port}", ADMIN_TOKEN, pathlib.Path(hub.db_path))


def test_describe_a_deployment_shows_fields_conditions_replicas_and_allocations(
    live: Runner, hub: Hub
) -> None:
    page = live.ok("describe", "deployment", "llama.east")
    lines = page.splitlines()
    assert lines[0].startswith("Deployment ID:") and lines[0].split()[-1].startswith("dep_")
    assert "Admission Phase:" in page and "running" in page
    conditions = lines.index("Conditions:")
    assert rows(lines[conditions + 1])[0] == ["TYPE", "STATUS", "REASON", "MESSAGE"]
    ready = next(line for line in lines[conditions:] if line.strip().startswith("Ready"))
    assert rows(ready.strip())[0][:2] == ["Ready", "True"] and "2/2 ready" in ready
    replicas = lines.index("Replicas:")
    listed = hub.get(
        "/v1/replicas?deployment_id=" + hub.get("/v1/deployments/llama.east")["deployment_id"]
    )
    names = {r["name"] for r in listed["replicas"]}
    table = rows("\n".join(line[2:] for line in lines[replicas + 1 : replicas + 4]))
    assert table[0][0] == "NAME" and {row[0] for row in table[1:]} == names
    allocations = lines.index("Allocations:")
    assert lines[allocations + 1].split()[0] == "REPLICA"
    assert lines[-1].startswith("Events: <none>")


def test_describe_a_workload_lists_its_deployments_and_a_missing_one_is_1(live: Runner) -> None:
    page = live.ok("describe", "workload", "llama")
    lines = page.splitlines()
    assert lines[0].startswith("Workload ID:")
    serving = lines.index("Serving:")
    assert any(line.strip().startswith("Engine:") and "vllm" in line for line in lines[serving:])
    deployments = lines.index("Deployments:")
    assert rows(lines[deployments + 2].strip())[0][:2] == ["llama.east", "east"]

    missing = live("describe", "workload", "nope")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err == "error: 404 NOT_FOUND: workload 'nope' not found\n"


# -- get --watch ------------------------------------------------------------------------------


def test_get_watch_prints_the_list_then_the_row_of_what_changed(cli: Runner, fleet: None) -> None:
    def scale_soon() -> None:
        time.sleep(0.6)
        cli.hub.client().patch("/v1/workloads/llama", {"replicas": 5})

    changer = threading.Thread(target=scale_soon)
    changer.start()
    out = cli.ok("get", "workloads", "--watch", "--watch-interval", "0.2", "--watch-timeout", "2.5")
    changer.join()
    table = rows(out)
    assert table[0][:4] == ["NAME", "PROJECT", "PHASE", "READY/DESIRED"]
    assert table[1][0] == "llama" and table[1][3].endswith("/2")
    changed = [row for row in table[2:] if row[0] == "llama"]
    assert changed and changed[-1][3].endswith("/5"), out
    assert all(row[0] != "NAME" for row in table[1:]), "the header is printed once"


def test_get_watch_follows_the_hubs_watch_stream_and_notes_a_deletion(
    cli: Runner, fleet: None
) -> None:
    """Deployments of one workload, from GET /v1/watch: the current row, then the deletion
    the moment the hub records it (no polling interval is involved)."""

    def delete_soon() -> None:
        time.sleep(0.6)
        cli.hub.client().delete("/v1/workloads/llama")

    changer = threading.Thread(target=delete_soon)
    changer.start()
    result = cli("get", "deployments", "--watch", "--workload", "llama", "--watch-timeout", "4")
    changer.join()
    assert result.code == 0, result.err
    table = rows(result.out)
    assert table[0][0] == "NAME" and [row[0] for row in table[1:]] == ["llama.east"]
    assert "deployment/llama.east deleted" in result.err


# -- completion -------------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_name_every_command_and_parse(
    shell: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    assert cli_main.main(["completion", shell]) == 0  # needs no hub and no token
    script = capsys.readouterr().out
    for word in ("describe", "apply", "get", "discovered", "completion"):
        assert word in script
    path = tmp_path / f"wingsmith.{shell}"
    path.write_text(script)
    if shell == "bash":
        checked = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        # Completing `wingsmith des` in a real bash offers `describe`.
        probe = (
            f"source {path}; COMP_WORDS=(wingsmith des); COMP_CWORD=1; "
            "_shtab_wingsmith; echo ${COMPREPLY[@]}"
        )
        completed = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
        assert "describe" in completed.stdout.split(), completed.stderr


def test_apply_sets_placement_preferences_idempotently_and_describe_shows_them(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    preferred = manifests.FLEET.replace(
        "  clusters: [east]\n", "  clusters: [east]\n  preferences:\n  - weights: {east: 3}\n"
    )
    path = manifests.write(tmp_path, preferred)
    assert "workload/llama created" in cli.ok("apply", "-f", path)
    # The hub shows every field of a preference; the file names one: no difference.
    assert cli.ok("apply", "-f", path).splitlines()[2] == "workload/llama unchanged"
    reweighted = manifests.write(tmp_path, preferred.replace("east: 3", "east: 2"), name="w.yaml")
    assert cli.ok("apply", "-f", reweighted).splitlines()[2] == (
        "workload/llama configured (placement)"
    )
    client = cli.hub.client()
    assert client.get("/v1/workloads/llama")["placement"]["preferences"] == [
        {"clusters": [], "cluster_selector": {}, "weights": {"east": 2}}
    ]
    described = cli.ok("describe", "workload", "llama")
    assert "Preferences:" in described and "east:" in described.split("Preferences:")[1]


def test_apply_sets_a_workloads_priority_and_a_projects_preemption_policy(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    fleet = manifests.FLEET.replace("replicas: 2\n", "replicas: 2\npriority: high\n").replace(
        "  H100-80GB: 16\n", "  H100-80GB: 16\npreemptible_by_other_projects: false\n"
    )
    path = manifests.write(tmp_path, fleet)
    assert "workload/llama created" in cli.ok("apply", "-f", path)
    assert cli.ok("apply", "-f", path).splitlines() == [
        "project/team-a unchanged",
        "cluster/east unchanged",
        "workload/llama unchanged",
    ]
    changed = fleet.replace("priority: high", "priority: low").replace(
        "preemptible_by_other_projects: false", "preemptible_by_other_projects: true"
    )
    lines = cli.ok("apply", "-f", manifests.write(tmp_path, changed, name="c.yaml")).splitlines()
    assert lines[0] == "project/team-a configured (preemptible_by_other_projects)"
    assert lines[2] == "workload/llama configured (priority)"
    client = cli.hub.client()
    assert client.get("/v1/workloads/llama")["priority"] == "low"
    assert client.get("/v1/projects/team-a")["preemptible_by_other_projects"] is True
