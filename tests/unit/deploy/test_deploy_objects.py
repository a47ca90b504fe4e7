"""Every YAML under deploy/: well-formed objects, valid by the official client's models,
consistent with each other, wired into a kustomization (or a template, never applied), and
built by our renderer exactly as kubectl kustomize builds them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.unit.deploy import manifests
from tests.unit.deploy.manifests import DEPLOY, one

BUILDS = {
    "hub": DEPLOY / "hub",
    "agent": DEPLOY / "agent",
    "agent read-only": DEPLOY / "agent" / "read-only",
    "hub on postgres": DEPLOY / "hub-postgres",
    "monitoring": DEPLOY / "monitoring",
}
# Custom resources of the Prometheus Operator: no client model; checked by their own tests
# (tests/unit/deploy/test_monitoring.py: promtool, the ports they name).
OPERATOR_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
# Filled in per cluster, so kept out of every kustomization (docs/deploy.md).
TEMPLATES = {DEPLOY / "hub" / "secrets.template.yaml", DEPLOY / "agent" / "config.template.yaml"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
PLACEHOLDER = "REPLACE_ME"

OBJECTS = manifests.objects()


def test_deploy_holds_yaml() -> None:
    assert len(OBJECTS) >= 10


@pytest.mark.parametrize("doc", manifests.documents(), ids=lambda d: d.where)
def test_every_document_has_api_version_kind_and_a_name(doc: manifests.Document) -> None:
    body = doc.body
    assert isinstance(body.get("apiVersion"), str) and body["apiVersion"]
    assert isinstance(body.get("kind"), str) and body["kind"]
    if doc.path.name == manifests.KUSTOMIZATION:
        assert body["kind"] == "Kustomization"
        return
    assert isinstance(body.get("metadata", {}).get("name"), str)
    assert body["metadata"]["name"]


@pytest.mark.parametrize(
    "doc",
    [d for d in OBJECTS if (d.body["apiVersion"], d.body["kind"]) not in OPERATOR_KINDS],
    ids=lambda d: d.where,
)
def test_every_object_is_valid_by_its_client_model(api: Any, doc: manifests.Document) -> None:
    # Every object but the operator's resources has a V1 model in the official client.
    assert manifests.model_name(doc.body) is not None, "no client model: a CRD needs its own check"
    assert manifests.check_schema(api, doc.body) == []


# The schema check itself, on objects that are wrong in the ways a manifest goes wrong.
GOOD_SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "x"},
    "spec": {"ports": [{"name": "grpc", "port": 50051, "targetPort": "grpc"}]},
}


def _service(**spec: Any) -> dict[str, Any]:
    return {**GOOD_SERVICE, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        (_service(ports=[{"port": 1, "targetPrt": 1}]), "ports[0].targetPrt: not a field"),
        (_service(type="LoadBalancer", sessionAffinityy="None"), "sessionAffinityy: not a field"),
        (_service(ports=[{"port": 1, "protocol": 6}]), "ValidationError"),
        (_service(ports=[{"port": "50051"}]), "ValidationError"),
        (_service(ports=[{"name": "no-port"}]), "ValidationError"),
    ],
    ids=[
        "misspelt field",
        "misspelt top field",
        "int for a string",
        "string for an int",
        "missing required port",
    ],
)
def test_the_schema_check_catches_what_a_manifest_gets_wrong(
    api: Any, obj: dict[str, Any], problem: str
) -> None:
    try:
        found = manifests.check_schema(api, obj)
    except ValueError as e:
        found = [type(e).__name__]
    assert any(problem in f for f in found), found


def test_the_schema_check_passes_a_good_object(api: Any) -> None:
    assert manifests.check_schema(api, GOOD_SERVICE) == []


@pytest.mark.parametrize("name", BUILDS)
def test_no_two_objects_of_a_build_share_kind_namespace_and_name(name: str) -> None:
    idents = [manifests.ident(o) for o in manifests.build(BUILDS[name])]
    assert len(idents) == len(set(idents))


def test_every_yaml_file_is_in_a_kustomization_or_is_a_template() -> None:
    used = set().union(*(manifests.referenced_files(d) for d in BUILDS.values()))
    assert set(manifests.yaml_files()) - used - TEMPLATES == set()
    assert used & TEMPLATES == set(), "a template with placeholders would be applied"


def test_every_secret_in_deploy_holds_placeholders_only() -> None:
    secrets = [d for d in OBJECTS if d.body["kind"] == "Secret"]
    assert secrets
    for doc in secrets:
        values = {**doc.body.get("data", {}), **doc.body.get("stringData", {})}
        assert values, doc.where
        for key, value in values.items():
            assert PLACEHOLDER in value, f"{doc.where} {key}: not a placeholder"


def test_templates_define_what_the_workloads_read(hub_build: Any, agent_build: Any) -> None:
    """Every key a pod takes from a ConfigMap or Secret is a key of the template for it."""
    provided = {
        (d.body["kind"], d.body["metadata"]["name"], key)
        for d in OBJECTS
        if d.path in TEMPLATES
        for key in {**d.body.get("data", {}), **d.body.get("stringData", {})}
    }
    wanted = set()
    for workload in (one(hub_build, "Deployment"), one(agent_build, "DaemonSet")):
        wanted |= _references(manifests.pod_spec(workload))
    assert wanted - provided == set()


def _references(pod: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(kind, name, key) of every env reference, and of every file the args name inside a
    ConfigMap or Secret volume."""
    out = set()
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for c in pod["containers"]:
        for e in c.get("env", []):
            source = e.get("valueFrom", {})
            for ref_kind, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                if ref_kind in source:
                    out.add((kind, source[ref_kind]["name"], source[ref_kind]["key"]))
        for mount in c.get("volumeMounts", []):
            source = _config_source(volumes[mount["name"]])
            if source is None:
                continue
            kind, name, items = source
            prefix = mount["mountPath"].rstrip("/") + "/"
            for arg in c.get("args", []):
                if arg.startswith(prefix):
                    file = arg[len(prefix) :]
                    keys = [i["key"] for i in items if i["path"] == file] if items else [file]
                    assert keys, f"{arg}: no item of {kind} {name} is mounted there"
                    out.add((kind, name, keys[0]))
    return out


def _config_source(volume: dict[str, Any]) -> tuple[str, str, list[dict[str, str]]] | None:
    if "configMap" in volume:
        return "ConfigMap", volume["configMap"]["name"], volume["configMap"].get("items", [])
    if "secret" in volume:
        return "Secret", volume["secret"]["secretName"], volume["secret"].get("items", [])
    return None


def test_namespaced_objects_say_their_namespace_and_cluster_scoped_ones_do_not() -> None:
    for doc in OBJECTS:
        namespace = doc.body["metadata"].get("namespace")
        if doc.body["kind"] in CLUSTER_SCOPED:
            assert namespace is None, doc.where
        else:
            assert namespace == "wingsmith", doc.where


def test_the_hub_and_the_agent_ship_the_same_namespace(hub_build: Any, agent_build: Any) -> None:
    assert one(hub_build, "Namespace") == one(agent_build, "Namespace")


@pytest.mark.parametrize("name", BUILDS)
def test_selectors_select_their_own_pods(name: str) -> None:
    build = manifests.build(BUILDS[name])
    for obj in build:
        if obj["kind"] in ("Deployment", "DaemonSet"):
            labels = obj["spec"]["template"]["metadata"]["labels"]
            assert obj["spec"]["selector"]["matchLabels"].items() <= labels.items()
        if obj["kind"] == "Service":
            pods = [
                o["spec"]["template"]["metadata"]["labels"]
                for o in build
                if o["kind"] in ("Deployment", "DaemonSet")
            ]
            assert any(obj["spec"]["selector"].items() <= p.items() for p in pods)


@pytest.mark.parametrize("name", BUILDS)
def test_bindings_bind_roles_and_service_accounts_of_the_same_build(name: str) -> None:
    build = manifests.build(BUILDS[name])
    have = {(o["kind"], o["metadata"]["name"]) for o in build}
    for binding in (o for o in build if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in have
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert ("ServiceAccount", subject["name"]) in have
    for workload in (o for o in build if o["kind"] in ("Deployment", "DaemonSet")):
        assert ("ServiceAccount", manifests.pod_spec(workload)["serviceAccountName"]) in have


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (with its built-in kustomize) not installed")
@pytest.mark.parametrize("name", BUILDS)
def test_our_renderer_builds_what_kubectl_kustomize_builds(name: str) -> None:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", str(BUILDS[name])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    theirs = list(yaml.safe_load_all(done.stdout))

    def keyed(objs: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
        return {manifests.ident(o): json.dumps(o, sort_keys=True) for o in objs}

    assert keyed(manifests.build(BUILDS[name])) == keyed(theirs)


@pytest.mark.parametrize("name", BUILDS)
def test_every_container_serving_a_port_has_readiness_and_liveness_probes(name: str) -> None:
    for obj in manifests.build(BUILDS[name]):
        if obj["kind"] not in ("Deployment", "DaemonSet"):
            continue
        for c in manifests.pod_spec(obj)["containers"]:
            if c.get("ports"):
                assert "readinessProbe" in c and "livenessProbe" in c, (name, c["name"])


@pytest.mark.parametrize("name", BUILDS)
def test_network_policies_select_pods_of_their_build_and_name_their_ports(name: str) -> None:
    build = manifests.build(BUILDS[name])
    pods = [o for o in build if o["kind"] in ("Deployment", "DaemonSet")]
    for policy in (o for o in build if o["kind"] == "NetworkPolicy"):
        wanted = policy["spec"]["podSelector"]["matchLabels"].items()
        selected = [
            p for p in pods if wanted <= p["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert selected, policy["metadata"]["name"]
        for rule in policy["spec"].get("ingress", []):
            for port in rule["ports"]:
                names = {
                    p["name"]
                    for workload in selected
                    for c in manifests.pod_spec(workload)["containers"]
                    for p in c.get("ports", [])
                }
                assert port["port"] in names, (policy["metadata"]["name"], port)


def test_deploy_cites_only_documents_in_the_repository() -> None:
    """Comments point readers at docs/, deploy/ and other files: each must exist here."""
    root = DEPLOY.parent
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        for cited in re.findall(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b", path.read_text()):
            assert (root / cited).exists(), f"{path.relative_to(root)} cites {cited}: not here"
