"""Reading `create -f` files: YAML documents, JSON lists, and clear errors for bad ones."""

from __future__ import annotations

import io
import json
import pathlib

import pytest
import yaml

from cli import kinds, manifests
from cli.errors import ManifestError

MULTI_DOC = """\
kind: Project
name: team-a
quotas: {H100-80GB: 16}
---
kind: cluster
cluster_id: east
---
kind: WORKLOAD
name: llama
project: team-a
replicas: 2
serving: {engine: vllm, engine_version: "0.12.0"}
"""


def parse(text: str) -> list[manifests.Document]:
    return manifests.parse(text, source="f.yaml")


def test_a_multi_document_yaml_gives_one_document_each_kind_case_insensitive() -> None:
    docs = parse(MULTI_DOC)
    assert [d.kind for d in docs] == [kinds.PROJECT, kinds.CLUSTER, kinds.WORKLOAD]
    assert [d.name for d in docs] == ["team-a", "east", "llama"]
    assert [d.index for d in docs] == [1, 2, 3]


def test_kind_is_removed_and_the_rest_is_the_body_as_written() -> None:
    workload = parse(MULTI_DOC)[2]
    assert workload.body == {
        "name": "llama",
        "project": "team-a",
        "replicas": 2,
        "serving": {"engine": "vllm", "engine_version": "0.12.0"},
    }


def test_a_json_list_gives_one_document_per_item() -> None:
    text = json.dumps([{"kind": "Project", "name": "a"}, {"kind": "Cluster", "cluster_id": "b"}])
    assert [(d.kind.name, d.name) for d in parse(text)] == [("project", "a"), ("cluster", "b")]


def test_a_single_json_object_is_one_document() -> None:
    (doc,) = parse('{"kind": "Project", "name": "a", "quotas": {"H100-80GB": 9007199254740993}}')
    assert doc.body["quotas"]["H100-80GB"] == 9007199254740993


def test_empty_yaml_documents_are_skipped() -> None:
    assert len(parse("---\nkind: Project\nname: a\n---\n---\n")) == 1


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("kind: Pod\nname: x\n", "document 1: unknown kind 'Pod': expected one of Project, "
                                 "Cluster, Workload"),
        ("kind: Deployment\nname: x\n", "document 1: unknown kind 'Deployment'"),
        ("kind: Project\nname: a\n---\nname: b\n", "document 2: missing 'kind'"),
        ("- just\n- words\n", "document 1: expected a mapping with 'kind', got 'just'"),
        ("", "f.yaml: no documents"),
        ("kind: Project\nname: [unclosed\n", "f.yaml: not valid YAML or JSON"),
        ("kind: Project\nname: a\nname: b\n", "found duplicate key 'name'"),
        ('{"kind": "Project", "name": "a", "name": "b"}', "duplicate key 'name'"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_with_a_clear_error(text: str, problem: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse(text)
    assert problem in caught.value.message
    assert caught.value.message.startswith("f.yaml")


def test_documents_are_created_projects_then_clusters_then_workloads() -> None:
    text = "kind: Workload\nname: w\n---\nkind: Cluster\ncluster_id: c\n---\nkind: Project\nname: p"
    ordered = manifests.in_creation_order(parse(text))
    assert [d.name for d in ordered] == ["p", "c", "w"]


def test_the_order_within_a_kind_is_the_files() -> None:
    text = "\n---\n".join(f"kind: Project\nname: p{i}" for i in (3, 1, 2))
    assert [d.name for d in manifests.in_creation_order(parse(text))] == ["p3", "p1", "p2"]


def test_dash_reads_stdin() -> None:
    docs = manifests.read("-", stdin=io.StringIO("kind: Project\nname: a\n"))
    assert [d.name for d in docs] == ["a"]


def test_an_unreadable_file_names_the_path(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ManifestError, match=r"nope\.yaml: cannot read"):
        manifests.read(str(missing), stdin=io.StringIO())


OBJECT = """\
apiVersion: wingsmith.dev/v1
kind: Workload
metadata: {name: llama}
spec: {project: team-a, replicas: 2}
status: {phase: running, workload_id: wl_1}
"""


def test_a_kubernetes_shaped_object_gives_its_spec_and_name_and_ignores_status() -> None:
    (doc,) = parse(OBJECT)
    assert doc.kind is kinds.WORKLOAD and doc.name == "llama"
    assert doc.body == {"name": "llama", "project": "team-a", "replicas": 2}


def test_kubectls_list_contributes_its_items_and_mixes_with_flat_documents() -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(OBJECT)]}
    text = yaml.safe_dump(listed) + "---\nkind: Project\nname: team-a\n"
    assert [(d.kind, d.name, d.index) for d in parse(text)] == [
        (kinds.WORKLOAD, "llama", 1),
        (kinds.PROJECT, "team-a", 2),
    ]


def test_labels_of_a_workload_or_project_come_from_metadata() -> None:
    text = OBJECT.replace("{name: llama}", "{name: llama, labels: {team: a, tier: ''}}")
    assert parse(text)[0].body["labels"] == {"team": "a", "tier": ""}
    project = "apiVersion: wingsmith.dev/v1\nkind: Project\nmetadata: {name: p, labels: {x: y}}\n"
    assert parse(project)[0].body == {"name": "p", "labels": {"x": "y"}}


def test_a_cluster_keeps_its_labels_in_spec_only() -> None:
    text = "apiVersion: wingsmith.dev/v1\nkind: Cluster\nmetadata: {name: e, labels: {a: b}}\n"
    with pytest.raises(ManifestError, match="holds name"):
        parse(text)


def test_a_cluster_object_names_its_cluster_id_in_metadata() -> None:
    text = "apiVersion: wingsmith.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
    assert parse(text)[0].body == {"cluster_id": "east"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (OBJECT.replace("wingsmith.dev/v1", "apps/v1"), "apiVersion is 'apps/v1': expected"),
        (OBJECT.replace("metadata: {name: llama}", "metadata: {}"), "metadata.name is missing"),
        (OBJECT.replace("{name: llama}", "{name: llama, annotations: {a: b}}"), "metadata.annot"),
        (OBJECT.replace("{name: llama}", "{name: llama, labels: [a]}"), "metadata.labels must"),
        (
            OBJECT.replace("project:", "labels: {a: b}, project:").replace(
                "{name: llama}", "{name: llama, labels: {a: b}}"
            ),
            "labels is in both",
        ),
        (OBJECT.replace("spec: {", "spec: [").replace("2}", "2]"), "spec must be a mapping"),
        (OBJECT + "replicas: 3\n", "unknown top-level field(s) 'replicas'"),
        (OBJECT.replace("project:", "name: other, project:"), "differs from metadata.name"),
    ],
)
def test_a_bad_object_is_refused_naming_the_document_and_what_to_fix(
    text: str, problem: str
) -> None:
    with pytest.raises(ManifestError) as raised:
        parse("kind: Project\nname: p\n---\n" + text)
    assert raised.value.index == 2
    assert problem in raised.value.problem
