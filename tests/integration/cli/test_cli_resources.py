"""`wingsmith` create, get, scale, set-quota, enable/disable and delete against a real hub.

No agent is connected, so the cluster has no devices: the deployment stays pending with
insufficient_capacity and there are no replicas or allocations. The tests assert on what the
hub really returns, read back through the REST client.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from cli import client as client_module
from cli import kinds
from tests.integration.cli import manifests
from tests.integration.cli.conftest import Runner


@pytest.fixture
def fleet(cli: Runner, tmp_path: pathlib.Path) -> str:
    """The project, cluster and workload of manifests.FLEET, created; the create output."""
    return cli.ok("create", "-f", manifests.write(tmp_path, manifests.FLEET))


def rows(table: str) -> list[list[str]]:
    """A table's rows (header first), cells split on the two-space column gap."""
    return [[cell.strip() for cell in line.split("  ") if cell] for line in table.splitlines()]


# -- create -----------------------------------------------------------------------------------


def test_create_from_a_multi_document_yaml_creates_project_cluster_and_workload(
    cli: Runner, fleet: str
) -> None:
    assert "project/team-a created" in fleet
    assert "cluster/east created" in fleet
    assert "workload/llama created" in fleet
    assert "shown once" in fleet
    assert "WINGSMITH_AGENT_TOKEN=wsa_" in fleet
    client = cli.hub.client()
    assert [p["name"] for p in client.list_all("/v1/projects", "projects")] == ["team-a"]
    assert [c["cluster_id"] for c in client.list_all("/v1/clusters", "clusters")] == ["east"]
    (workload,) = client.list_all("/v1/workloads", "workloads")
    assert (workload["name"], workload["project"], workload["replicas"]) == ("llama", "team-a", 2)


def test_create_prints_the_agent_token_the_hub_issued(cli: Runner, tmp_path: pathlib.Path) -> None:
    out = cli.ok("create", "-f", manifests.write(tmp_path, manifests.CLUSTER), "-o", "json")
    (answer,) = json.loads(out)["items"]
    assert answer["cluster"]["cluster_id"] == "east"
    assert answer["token"].startswith("wsa_")


def test_create_applies_projects_and_clusters_before_workloads_whatever_the_file_order(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    reversed_file = "---\n".join([manifests.WORKLOAD, manifests.CLUSTER, manifests.PROJECT])
    out = cli.ok("create", "-f", manifests.write(tmp_path, reversed_file))
    assert out.index("project/team-a") < out.index("cluster/east") < out.index("workload/llama")


def test_create_reads_a_json_list_from_stdin(
    cli: Runner, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    docs = [{"kind": "project", "name": f"p{i}", "quotas": {}} for i in range(2)]
    stdin = tmp_path / "stdin.json"
    stdin.write_text(json.dumps(docs))
    with stdin.open() as handle:
        monkeypatch.setattr("sys.stdin", handle)
        out = cli.ok("create", "-f", "-")
    assert out.splitlines() == ["project/p0 created", "project/p1 created"]


def test_create_stops_at_the_hubs_refusal_and_says_what_was_created(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    bad = manifests.WORKLOAD.replace("engine: vllm", "engine: vlm")
    path = manifests.write(tmp_path, "---\n".join([manifests.PROJECT, manifests.CLUSTER, bad]))
    result = cli("create", "-f", path)
    assert result.code == 1
    assert "error: 400 INVALID_ARGUMENT: workload.serving.engine: unknown value 'vlm'" in result.err
    assert "2 of 3 documents were created before the error" in result.err
    assert "cluster/east created" in result.out


def test_create_as_json_still_prints_the_agent_token_when_a_later_document_fails(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    bad = manifests.WORKLOAD.replace("project: team-a", "project: nope")
    path = manifests.write(tmp_path, "---\n".join([manifests.CLUSTER, bad]))
    result = cli("create", "-f", path, "-o", "json")
    assert result.code == 1
    (answer,) = json.loads(result.out)["items"]
    assert answer["token"].startswith("wsa_")
    assert "project 'nope' not found" in result.err


def test_create_refuses_a_file_with_an_unknown_kind_before_creating_anything(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    path = manifests.write(tmp_path, manifests.PROJECT + "---\nkind: Pod\nname: x\n")
    result = cli("create", "-f", path)
    assert result.code == 1
    assert "document 2: unknown kind 'Pod'" in result.err
    assert cli.hub.client().list_all("/v1/projects", "projects") == []


# -- get --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("fleet")
def test_get_lists_each_kind_as_a_table(cli: Runner) -> None:
    assert rows(cli.ok("get", "projects")) == [
        ["NAME", "QUOTA (USED+RESERVED/LIMIT)"],
        ["team-a", "H100-80GB 0+0/16"],
    ]
    # No agent ever connected: it reported nothing, so neither "not stale" nor "0/0 free".
    assert rows(cli.ok("get", "clusters")) == [
        [
            *["CLUSTER", "MODE", "CONNECTED", "STALE", "LAST-SEEN", "NODES", "DEVICES", "DGD"],
            "SCHEDULING",
        ],
        ["east", "-", "never", "-", "-", "0", "-", "-", "open"],
    ]
    assert rows(cli.ok("get", "workloads")) == [
        ["NAME", "PROJECT", "PHASE", "READY/DESIRED", "DEVICE-CLASS", "DEPLOYMENTS", "PRIORITY"],
        ["llama", "team-a", "pending", "0/2", "H100-80GB", "east", "normal"],
    ]
    header, row = rows(cli.ok("get", "deployments"))
    assert header[:5] == ["NAME", "CLUSTER", "PHASE", "REASON", "READY/DESIRED"]
    digest = cli.hub.client().get("/v1/deployments/llama.east")["serving_digest"]
    # status is null until the cluster reports: ready, rollout and stale are unknown, not
    # 0/false, and there is no drift to count.
    assert row == [
        "llama.east", "east", "pending", "insufficient_capacity", "-/2", "0", "-", "1", digest,
        "managed", "-", "true", "-",
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["replicas", "allocations"])
@pytest.mark.usefixtures("fleet")
def test_get_of_an_empty_list_prints_nothing_and_says_so_on_stderr(cli: Runner, kind: str) -> None:
    result = cli("get", kind)
    assert (result.code, result.out, result.err) == (0, "", f"no {kind} found\n")


@pytest.mark.parametrize(
    "kind", ["projects", "clusters", "workloads", "deployments", "replicas", "allocations"]
)
@pytest.mark.usefixtures("fleet")
def test_get_as_json_is_every_item_the_hub_lists(cli: Runner, kind: str) -> None:
    listed = json.loads(cli.ok("get", kind, "-o", "json"))["items"]
    assert listed == cli.hub.client().list_all(f"/v1/{kind}", kind)


ONE_RESOURCE = pytest.mark.parametrize(
    ("argv", "path"),
    [
        (("project", "team-a"), "/v1/projects/team-a"),
        (("cluster", "east"), "/v1/clusters/east"),
        (("workload", "llama"), "/v1/workloads/llama"),
        (("workloads", "llama"), "/v1/workloads/llama"),
        (("deployment", "llama.east"), "/v1/deployments/llama.east"),
    ],
)


@ONE_RESOURCE
@pytest.mark.usefixtures("fleet")
def test_get_one_resource_shows_the_hubs_json(
    cli: Runner, argv: tuple[str, str], path: str
) -> None:
    shown = json.loads(cli.ok("get", *argv, "-o", "json"))
    assert shown == cli.hub.client().get(path)


@ONE_RESOURCE
@pytest.mark.usefixtures("fleet")
def test_get_one_resource_as_yaml_is_a_manifest_holding_the_hubs_json(
    cli: Runner, argv: tuple[str, str], path: str
) -> None:
    shown = yaml.safe_load(cli.ok("get", *argv, "-o", "yaml"))
    kind = kinds.lookup(argv[0])
    assert shown["apiVersion"] == "wingsmith.dev/v1" and shown["kind"] == kind.title
    hub = cli.hub.client().get(path)
    # The name, and a workload's or project's labels, as kubectl's metadata holds them.
    assert shown["metadata"] == {
        "name": hub[kind.name_field],
        **{key: hub[key] for key in kind.metadata},
    }
    fields = {**shown.get("spec", {}), **shown["status"], **shown["metadata"]}
    fields[kind.name_field] = fields.pop("name")
    assert fields == hub


@pytest.mark.usefixtures("fleet")
def test_get_one_resource_as_a_table_prints_its_row(cli: Runner) -> None:
    assert rows(cli.ok("get", "workload", "llama"))[1:] == [
        ["llama", "team-a", "pending", "0/2", "H100-80GB", "east", "normal"]
    ]


@pytest.mark.usefixtures("fleet")
def test_get_filters_reach_the_hub(cli: Runner) -> None:
    workload_id = cli.hub.client().get("/v1/workloads/llama")["workload_id"]

    def names(*argv: str) -> list[str]:
        return [item["name"] for item in json.loads(cli.ok("get", *argv, "-o", "json"))["items"]]

    assert names("deployments", "--workload", "llama") == ["llama.east"]
    assert names("deployments", "--workload", workload_id) == ["llama.east"]
    assert names("deployments", "--cluster", "east") == ["llama.east"]
    assert names("workloads", "--project", "team-a") == ["llama"]
    # A filter naming what does not exist is the hub's 404, not an empty list (docs/rest.md).
    unknown = cli("get", "deployments", "--cluster", "west")
    assert (unknown.code, unknown.out) == (1, "")
    assert "404 NOT_FOUND: cluster 'west' not found" in unknown.err
    unknown = cli("get", "workloads", "--project", "team-b")
    assert "404 NOT_FOUND: project 'team-b' not found" in unknown.err
    assert names("replicas", "--deployment", "llama.east", "--cluster", "east") == []
    filters = ["--deployment", "llama.east", "--project", "team-a", "--cluster", "east"]
    assert json.loads(cli.ok("get", "allocations", *filters, "-o", "json"))["items"] == []


@pytest.mark.usefixtures("fleet")
def test_get_with_a_filter_on_an_unknown_workload_is_not_found(cli: Runner) -> None:
    result = cli("get", "deployments", "--workload", "nope")
    assert (result.code, result.err) == (1, "error: 404 NOT_FOUND: workload 'nope' not found\n")


def test_get_follows_next_page_token_to_the_end(
    cli: Runner, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = [{"kind": "Project", "name": f"p{i}"} for i in range(3)]
    cli.ok("create", "-f", manifests.write(tmp_path, json.dumps(docs), name="p.json"))
    monkeypatch.setattr(client_module, "DEFAULT_PAGE_SIZE", 1)
    listed = json.loads(cli.ok("get", "projects", "-o", "json"))["items"]
    assert [p["name"] for p in listed] == ["p0", "p1", "p2"]


# -- changes ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("fleet")
def test_scale_sets_the_workloads_replicas(cli: Runner) -> None:
    assert rows(cli.ok("scale", "workload", "llama", "--replicas", "3"))[1][3] == "0/3"
    client = cli.hub.client()
    assert client.get("/v1/workloads/llama")["replicas"] == 3
    assert client.get("/v1/deployments/llama.east")["desired_replicas"] == 3


@pytest.mark.usefixtures("fleet")
def test_set_priority_sets_the_workloads_priority_class(cli: Runner) -> None:
    table = rows(cli.ok("set-priority", "workload", "llama", "high"))
    assert table[0][-1] == "PRIORITY" and table[1][-1] == "high"
    client = cli.hub.client()
    assert client.get("/v1/workloads/llama")["priority"] == "high"
    assert client.get("/v1/deployments/llama.east")["priority"] == "high"
    assert "Priority:" in cli.ok("describe", "workload", "llama")


@pytest.mark.usefixtures("fleet")
def test_set_quota_merges_into_the_current_quotas_and_keeps_a_zero(cli: Runner) -> None:
    def quotas(*argv: str) -> dict[str, int]:
        shown = json.loads(cli.ok("set-quota", "team-a", *argv, "-o", "json"))
        stored = cli.hub.client().get("/v1/projects/team-a")
        assert shown == stored
        return dict(stored["quotas"])

    assert quotas("A100-40GB=4") == {"A100-40GB": 4, "H100-80GB": 16}
    assert quotas("H100-80GB=0") == {"A100-40GB": 4, "H100-80GB": 0}
    assert quotas("--replace", "A100-40GB=1") == {"A100-40GB": 1}


@pytest.mark.usefixtures("fleet")
def test_set_quota_prints_the_projects_row(cli: Runner) -> None:
    assert rows(cli.ok("set-quota", "team-a", "H100-80GB=8"))[1] == [
        "team-a",
        "H100-80GB 0+0/8",
    ]


@pytest.mark.usefixtures("fleet")
def test_disable_and_enable_a_deployment(cli: Runner) -> None:
    client = cli.hub.client()
    header, row = rows(cli.ok("disable", "deployment", "llama.east"))
    assert dict(zip(header, row, strict=True))["ENABLED"] == "false"
    assert client.get("/v1/deployments/llama.east")["enabled"] is False
    cli.ok("enable", "deployment", "llama.east")
    assert client.get("/v1/deployments/llama.east")["enabled"] is True


@pytest.mark.usefixtures("fleet")
def test_delete_removes_workload_project_and_cluster(cli: Runner) -> None:
    in_use = cli("delete", "project", "team-a")
    assert in_use.code == 1
    assert in_use.err.startswith("error: 409 FAILED_PRECONDITION: ")

    assert cli.ok("delete", "workload", "llama") == "workload/llama deleted\n"
    gone = cli("get", "workload", "llama")
    assert (gone.code, gone.err) == (1, "error: 404 NOT_FOUND: workload 'llama' not found\n")

    assert cli.ok("delete", "project", "team-a") == "project/team-a deleted\n"
    assert json.loads(cli.ok("delete", "cluster", "east", "-o", "json"))["items"] == [
        {"kind": "cluster", "ref": "east", "deleted": True}
    ]
    assert json.loads(cli.ok("get", "clusters", "-o", "json"))["items"] == []
