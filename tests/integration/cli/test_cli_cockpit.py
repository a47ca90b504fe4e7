"""kubectl's habits, against a real hub: Kubernetes-shaped manifests (`apply`, `create`,
`delete -f`, `get -o yaml` round-tripping through `apply`), kubectl's List, `--sort-by`,
`-o custom-columns`, short names, "did you mean", `delete --ignore-not-found`, a jsonpath to
a missing field, and `explain` from the hub's API document. docs/cli.md quotes these.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from cli import main as cli_main
from tests.integration.cli import manifests
from tests.integration.cli.conftest import Runner

OBJECTS = """\
apiVersion: wingsmith.dev/v1
kind: Project
metadata:
  name: team-a
spec:
  quotas:
    H100-80GB: 16
---
apiVersion: wingsmith.dev/v1
kind: Cluster
metadata:
  name: east
spec:
  labels:
    region: us-east
---
apiVersion: wingsmith.dev/v1
kind: Workload
metadata:
  name: llama
spec:
  project: team-a
  replicas: 2
  device_class: H100-80GB
  serving:
    engine: vllm
    engine_version: "0.12.0"
    model: meta-llama/Llama-3.1-8B-Instruct
    tensor_parallel: 2
  placement:
    clusters: [east]
"""


def usage_error(cli: Runner, *argv: str) -> str:
    """What argparse says (on stderr, exit 2) to a command line it refuses."""
    cli.capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        cli_main.main([*argv, "--hub-url", cli.hub.url, "--token", cli.hub.token])
    assert exited.value.code == 2
    return cli.capsys.readouterr().err


def names(listed: str) -> list[str]:
    return [line.split()[0] for line in listed.splitlines()[1:]]


# -- manifests shaped as Kubernetes objects ---------------------------------------------------


def test_kubernetes_shaped_objects_apply_and_equal_the_flat_form(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    first = cli.ok("apply", "-f", manifests.write(tmp_path, OBJECTS))
    assert "project/team-a created" in first and "workload/llama created" in first
    # The flat form of the same objects is the same declaration: nothing to change.
    flat = cli.ok("apply", "-f", manifests.write(tmp_path, manifests.FLEET, name="flat.yaml"))
    assert flat.splitlines() == [
        "project/team-a unchanged",
        "cluster/east unchanged",
        "workload/llama unchanged",
    ]


def test_get_o_yaml_round_trips_through_apply_one_object_and_a_list(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    cli.ok("create", "-f", manifests.write(tmp_path, OBJECTS))
    one = cli.ok("get", "workload", "llama", "-o", "yaml")
    assert yaml.safe_load(one)["spec"]["replicas"] == 2
    assert cli.ok("apply", "-f", manifests.write(tmp_path, one, name="one.yaml")).splitlines() == [
        "workload/llama unchanged"
    ]
    # Edited: the change is applied, as with kubectl.
    edited = one.replace("replicas: 2", "replicas: 3", 1)
    changed = cli.ok("apply", "-f", manifests.write(tmp_path, edited, name="edited.yaml"))
    assert changed.splitlines() == ["workload/llama configured (replicas)"]
    assert json.loads(cli.ok("get", "wl", "llama", "-o", "json"))["replicas"] == 3
    # A whole list (kubectl's List) round-trips too, every kind of it.
    for word in ("projects", "clusters", "workloads"):
        listed = cli.ok("get", word, "-o", "yaml")
        assert yaml.safe_load(listed)["kind"] == "List"
        out = cli.ok("apply", "-f", manifests.write(tmp_path, listed, name=f"{word}.yaml"))
        assert out.splitlines() == [
            f"{word[:-1]}/{n} unchanged" for n in names(cli.ok("get", word))
        ]


def test_delete_f_reads_kubernetes_shaped_objects(cli: Runner, tmp_path: pathlib.Path) -> None:
    path = manifests.write(tmp_path, OBJECTS)
    cli.ok("create", "-f", path)
    assert cli.ok("delete", "-f", path).splitlines() == [
        "workload/llama deleted",
        "cluster/east deleted",
        "project/team-a deleted",
    ]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("apiVersion: wingsmith.dev/v1", "apiVersion: v1"), "document 3: apiVersion is 'v1'"),
        (("  name: llama\n", ""), "document 3: metadata.name is missing"),
        (("kind: Workload", "kind: Workloda"), "document 3: unknown kind 'Workloda'; did you mean"),
        (("spec:\n  project", "replicas: 1\nspec:\n  project"), "document 3: unknown top-level"),
    ],
)
def test_a_bad_object_names_the_file_and_the_document_and_nothing_is_created(
    cli: Runner, tmp_path: pathlib.Path, change: tuple[str, str], problem: str
) -> None:
    head, workload = OBJECTS.rsplit("---\n", 1)
    path = manifests.write(tmp_path, head + "---\n" + workload.replace(*change))
    result = cli("apply", "-f", path)
    assert result.code == 1
    assert result.err.startswith(f"error: {path}: {problem}"), result.err
    assert json.loads(cli.ok("get", "projects", "-o", "json"))["items"] == []


@pytest.mark.parametrize("verb", ["create", "apply"])
def test_a_document_the_hub_refuses_is_named_by_file_and_position(
    cli: Runner, tmp_path: pathlib.Path, verb: str
) -> None:
    path = manifests.write(tmp_path, OBJECTS.replace("engine: vllm", "engine: vlm"))
    result = cli(verb, "-f", path)
    assert result.code == 1
    assert "error: 400 INVALID_ARGUMENT: workload.serving.engine: " in result.err
    assert f"in {path}: document 3 (workload/llama)" in result.err


# -- lists: kubectl's List, --sort-by, custom columns ------------------------------------------


@pytest.fixture
def three(cli: Runner, tmp_path: pathlib.Path) -> None:
    text = "---\n".join(
        f"kind: Project\nname: {name}\nquotas: {{H100-80GB: {limit}}}\n"
        for name, limit in (("b-team", 8), ("c-team", 16), ("a-team", 24))
    )
    cli.ok("create", "-f", manifests.write(tmp_path, text))


@pytest.mark.usefixtures("three")
def test_a_list_as_json_is_kubectls_list(cli: Runner) -> None:
    shown = json.loads(cli.ok("get", "proj", "-o", "json"))
    assert list(shown) == ["apiVersion", "items", "kind", "metadata"]
    assert shown["apiVersion"] == "v1" and shown["kind"] == "List"
    assert shown["metadata"] == {"resourceVersion": ""}
    assert [p["name"] for p in shown["items"]] == ["a-team", "b-team", "c-team"]


@pytest.mark.usefixtures("three")
def test_sort_by_orders_every_format_by_a_jsonpath(cli: Runner) -> None:
    by_quota = cli.ok("get", "projects", "--sort-by", ".quotas['H100-80GB']")
    assert names(by_quota) == ["b-team", "c-team", "a-team"]
    as_json = json.loads(cli.ok("get", "projects", "--sort-by", "{.create_time}", "-o", "json"))
    assert [p["name"] for p in as_json["items"]] == ["b-team", "c-team", "a-team"]
    result = cli("get", "projects", "--sort-by", ".quota")
    assert result.code == 1 and "did you mean 'quotas'" in result.err


@pytest.mark.usefixtures("three")
def test_custom_columns_show_the_paths_asked_for(cli: Runner) -> None:
    fmt = "custom-columns=NAME:.name,LIMIT:.quotas['H100-80GB'],USED:.usage.*.used"
    assert cli.ok("get", "projects", "-o", fmt, "--sort-by", ".name").splitlines() == [
        "NAME    LIMIT  USED",
        "a-team  24     0",
        "b-team  8      0",
        "c-team  16     0",
    ]
    assert "is not NAME:PATH" in usage_error(cli, "get", "projects", "-o", "custom-columns=NAME")


@pytest.mark.usefixtures("three")
def test_a_jsonpath_to_a_field_that_does_not_exist_is_an_error(cli: Runner) -> None:
    result = cli("get", "projects", "-o", "jsonpath={.items[*].nmae}")
    assert result.code == 1 and result.out == ""
    assert "field 'nmae' is not found; did you mean 'name'?" in result.err
    # A filter that matches nothing is no error: an empty answer.
    assert cli.ok("get", "projects", "-o", 'jsonpath={.items[?(@.name=="z")].name}') == "\n"


# -- short names, did you mean, --ignore-not-found -------------------------------------------


def test_short_names_name_the_kinds(cli: Runner, tmp_path: pathlib.Path) -> None:
    cli.ok("create", "-f", manifests.write(tmp_path, OBJECTS))
    for short, plural in (("wl", "workloads"), ("dep", "deployments"), ("cl", "clusters")):
        assert cli.ok("get", short) == cli.ok("get", plural)
    assert cli.ok("describe", "proj", "team-a").startswith("Name:")
    assert cli.ok("delete", "wl", "llama") == "workload/llama deleted\n"


def test_a_mistyped_kind_or_verb_gets_did_you_mean(cli: Runner) -> None:
    kind = usage_error(cli, "get", "workoads")
    assert "invalid choice: 'workoads'; did you mean 'workloads'?" in kind
    assert "did you mean 'describe'?" in usage_error(cli, "descibe", "workload", "x")
    assert "did you mean 'status'?" in usage_error(cli, "rollout", "stauts", "wl", "x")


def test_a_mistyped_name_gets_the_closest_names(cli: Runner, tmp_path: pathlib.Path) -> None:
    cli.ok("create", "-f", manifests.write(tmp_path, OBJECTS))
    for argv in (("get", "workload", "lama"), ("describe", "wl", "lama"), ("delete", "wl", "lama")):
        result = cli(*argv)
        assert result.code == 1
        assert "404 NOT_FOUND" in result.err and "did you mean workload/llama?" in result.err


def test_delete_ignore_not_found_exits_0_and_deletes_the_rest(
    cli: Runner, tmp_path: pathlib.Path
) -> None:
    cli.ok("create", "-f", manifests.write(tmp_path, OBJECTS))
    result = cli("delete", "workload", "gone", "llama", "--ignore-not-found")
    assert (result.code, result.out) == (0, "workload/llama deleted\n")
    assert cli("delete", "workload", "gone").code == 1


# -- explain -----------------------------------------------------------------------------------


def test_explain_lists_a_kinds_fields_from_the_hubs_api_document(cli: Runner) -> None:
    page = cli.ok("explain", "workload")
    assert page.startswith("KIND:     Workload\nVERSION:  wingsmith.dev/v1\n")
    assert "   name\t<string>  (metadata.name)" in page
    # Under each field, its description: the proto's comment, served in the API document.
    assert "   replicas\t<integer>  (spec)\n     Total replicas over all clusters.\n" in page
    assert "   phase\t<string: pending|admitted|placed|running|failed>  (status)" in page


def test_explain_follows_a_dotted_path_into_nested_fields(cli: Runner) -> None:
    page = cli.ok("explain", "wl.serving")
    assert "FIELD:    serving <Object>" in page and "spec.serving" in page
    engine = cli.ok("explain", "workload.serving.engine")
    assert "FIELD:    engine <string: " in engine
    tensor_parallel = cli.ok("explain", "workload.serving.tensor_parallel")
    assert (
        "DESCRIPTION:\n   Devices per worker = tensor_parallel x pipeline_parallel"
        in tensor_parallel
    )
    assert "   engine_version\t<string>" in page
    priority = cli.ok("explain", "workload.priority")
    assert "VALUES:" in priority and "   critical" in priority


def test_explain_refuses_an_unknown_field_or_kind_with_a_suggestion(cli: Runner) -> None:
    field = cli("explain", "workload.servng")
    assert field.code == 1 and "did you mean 'serving'?" in field.err
    kind = cli("explain", "workoad")
    assert kind.code == 2 and "did you mean 'workload'?" in kind.err


def test_explain_needs_no_token(cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(cli.hub.db_path.parent)  # no .wingsmith-token here
    cli.capsys.readouterr()
    assert cli_main.main(["explain", "project", "--hub-url", cli.hub.url]) == 0
    assert "quotas" in cli.capsys.readouterr().out
