"""deploy/agent: the DaemonSet on GPU nodes (the pod-resources directory, NVML without a GPU,
root with nothing else), least-privilege RBAC, and the read-only variant."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.deploy import manifests
from tests.unit.deploy.manifests import one

POD_RESOURCES = "/var/lib/kubelet/pod-resources"
AGENT_ARGS = [
    "agent",
    "--kubernetes",
    "--hub",
    "$(WINGSMITH_HUB)",
    "--cluster-id",
    "$(WINGSMITH_CLUSTER_ID)",
    "--node-name",
    "$(NODE_NAME)",
    "--pod-resources-socket",
    f"{POD_RESOURCES}/kubelet.sock",
    "--lease-namespace",
    "$(POD_NAMESPACE)",
    "--hub-ca",
    "/etc/wingsmith/hub-ca/ca.crt",
    "--metrics-listen",
    "0.0.0.0:9402",
]
DGD = ("nvidia.com", "dynamographdeployments")
READ = {"get", "list", "watch"}
# (apiGroup, resource) -> the verbs the agent uses, and all it may have.
SCALE = ("nvidia.com", "dynamographdeploymentscalingadapters/scale")
CLUSTER_GRANTS = {
    DGD: READ | {"create", "patch", "delete"},
    SCALE: {"get", "patch"},
    ("nvidia.com", "dynamographdeploymentscalingadapters"): READ,
    ("", "pods"): READ,
    ("", "nodes"): READ,
}
LEASE_GRANTS = {("coordination.k8s.io", "leases"): READ | {"create", "update", "patch"}}


def _daemonset(build: Any) -> dict[str, Any]:
    return one(build, "DaemonSet", "wingsmith-hangar")


@pytest.fixture
def daemonset(agent_build: Any) -> dict[str, Any]:
    return _daemonset(agent_build)


@pytest.fixture
def pod(daemonset: dict[str, Any]) -> dict[str, Any]:
    return manifests.pod_spec(daemonset)


@pytest.fixture
def hangar(daemonset: dict[str, Any]) -> dict[str, Any]:
    return manifests.container(daemonset, "hangar")


def grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


# -- the DaemonSet ---------------------------------------------------------------------------


def test_the_pod_resources_directory_is_a_read_only_host_path(
    pod: dict[str, Any], hangar: dict[str, Any]
) -> None:
    (mount,) = [m for m in hangar["volumeMounts"] if m["mountPath"].startswith("/var/lib/kubelet")]
    # The directory at the same path, not the socket file: the kubelet recreates the socket.
    assert mount["mountPath"] == POD_RESOURCES
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["hostPath"] == {"path": POD_RESOURCES, "type": "Directory"}


def test_no_other_host_path_and_no_host_namespaces(pod: dict[str, Any]) -> None:
    host_paths = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v]
    assert host_paths == [POD_RESOURCES]
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(field, False)


@pytest.mark.parametrize("kind", ["requests", "limits"])
def test_the_agent_takes_no_gpu(hangar: dict[str, Any], kind: str) -> None:
    # A GPU requested here would be taken from the workloads (and hide the rest of the node).
    assert set(hangar["resources"][kind]) == {"cpu", "memory"}


@pytest.mark.parametrize(
    ("name", "value"),
    [("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", "utility")],
)
def test_nvml_comes_from_the_nvidia_runtime(
    pod: dict[str, Any], hangar: dict[str, Any], name: str, value: str
) -> None:
    assert pod["runtimeClassName"] == "nvidia"
    assert manifests.env(hangar)[name] == value


def test_it_runs_on_gpu_nodes_and_tolerates_their_taint(pod: dict[str, Any]) -> None:
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]


def test_it_runs_as_the_hangar_service_account(pod: dict[str, Any]) -> None:
    assert pod["serviceAccountName"] == "wingsmith-hangar"
    assert pod.get("automountServiceAccountToken", True) is True


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("runAsUser", 0),
        ("privileged", False),
        ("allowPrivilegeEscalation", False),
        ("readOnlyRootFilesystem", True),
        ("capabilities", {"drop": ["ALL"]}),
    ],
)
def test_root_for_the_socket_and_nothing_more(
    hangar: dict[str, Any], field: str, value: Any
) -> None:
    assert hangar["securityContext"][field] == value


def test_the_agent_runs_with_exactly_these_args(hangar: dict[str, Any]) -> None:
    assert hangar["args"] == AGENT_ARGS
    assert "command" not in hangar, "the image's entry point is `wingsmith`; args pick `agent`"


def test_every_variable_in_the_args_is_defined(hangar: dict[str, Any]) -> None:
    # Kubernetes leaves an undefined $(VAR) as it is: the agent would dial "$(WINGSMITH_HUB)".
    assert manifests.variables(hangar["args"]) <= set(manifests.env(hangar))


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("NODE_NAME", {"fieldRef": {"fieldPath": "spec.nodeName"}}),
        ("POD_NAME", {"fieldRef": {"fieldPath": "metadata.name"}}),
        ("POD_NAMESPACE", {"fieldRef": {"fieldPath": "metadata.namespace"}}),
        ("WINGSMITH_HUB", {"configMapKeyRef": {"name": "wingsmith-hangar", "key": "hub"}}),
        (
            "WINGSMITH_CLUSTER_ID",
            {"configMapKeyRef": {"name": "wingsmith-hangar", "key": "cluster-id"}},
        ),
        (
            "WINGSMITH_AGENT_TOKEN",
            {"secretKeyRef": {"name": "wingsmith-hangar-token", "key": "token"}},
        ),
    ],
)
def test_env_comes_from_the_downward_api_and_the_cluster_settings(
    hangar: dict[str, Any], name: str, source: dict[str, Any]
) -> None:
    assert manifests.env(hangar)[name] == source


def test_the_full_agent_is_not_read_only(hangar: dict[str, Any]) -> None:
    assert "HANGAR_OPERATOR_READ_ONLY" not in manifests.env(hangar)
    assert "--read-only" not in hangar["args"]


def test_the_agent_parser_takes_these_args(capsys: pytest.CaptureFixture[str]) -> None:
    from agent import main

    try:
        args = main.parse_args(AGENT_ARGS[1:])
    except SystemExit:
        pytest.fail(f"wingsmith agent refuses the manifest's args: {capsys.readouterr().err}")
    assert args.kubernetes is True
    assert args.pod_resources_socket == f"{POD_RESOURCES}/kubelet.sock"
    assert args.hub_ca == "/etc/wingsmith/hub-ca/ca.crt"


# -- RBAC ------------------------------------------------------------------------------------


def test_the_cluster_role_grants_exactly_what_the_agent_uses(agent_build: Any) -> None:
    assert grants(one(agent_build, "ClusterRole", "wingsmith-hangar")) == CLUSTER_GRANTS


def test_the_lease_role_is_namespaced_and_grants_leases_only(agent_build: Any) -> None:
    role = one(agent_build, "Role")
    assert role["metadata"]["namespace"] == "wingsmith"
    assert grants(role) == LEASE_GRANTS


@pytest.mark.parametrize("build_name", ["agent_build", "read_only_build"])
def test_no_role_touches_secrets_or_uses_wildcards(
    request: pytest.FixtureRequest, build_name: str
) -> None:
    for role in request.getfixturevalue(build_name):
        if role["kind"] not in ("Role", "ClusterRole"):
            continue
        for (group, resource), verbs in grants(role).items():
            assert "secrets" not in resource and "*" not in (group, resource, *verbs)
            assert not verbs & {"escalate", "bind", "impersonate"}


def test_the_roles_are_bound_to_the_hangar_service_account(agent_build: Any) -> None:
    bound = {
        (b["kind"], b["roleRef"]["name"])
        for b in agent_build
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and b["subjects"]
        == [{"kind": "ServiceAccount", "name": "wingsmith-hangar", "namespace": "wingsmith"}]
    }
    assert bound == {
        ("ClusterRoleBinding", "wingsmith-hangar"),
        ("RoleBinding", "wingsmith-hangar-leader-election"),
    }


# -- read-only ---------------------------------------------------------------------------------


def test_read_only_grants_no_writes_on_dgds(read_only_build: Any) -> None:
    granted = grants(one(read_only_build, "ClusterRole", "wingsmith-hangar"))
    assert granted == {**CLUSTER_GRANTS, DGD: READ, SCALE: {"get"}}


def test_read_only_grants_nothing_on_leases(read_only_build: Any) -> None:
    # A read-only agent holds no Lease: the hub grants it leadership (docs/daemonset.md).
    assert grants(one(read_only_build, "Role", "wingsmith-hangar-leader-election")) == {}


def test_read_only_grants_no_write_verb_anywhere(read_only_build: Any) -> None:
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    for role in read_only_build:
        if role["kind"] in ("Role", "ClusterRole"):
            assert all(not verbs & writes for verbs in grants(role).values()), role["kind"]


def test_read_only_tells_the_agent(read_only_build: Any) -> None:
    hangar = manifests.container(_daemonset(read_only_build), "hangar")
    assert manifests.env(hangar)["HANGAR_OPERATOR_READ_ONLY"] == "true"


def test_read_only_changes_nothing_else(agent_build: Any, read_only_build: Any) -> None:
    full = {manifests.ident(o): o for o in agent_build}
    undone = {manifests.ident(o): copy.deepcopy(o) for o in read_only_build}
    # Undo the two changes the overlay means to make; what is left must be the full agent.
    role = undone["ClusterRole", "", "wingsmith-hangar"]
    for rule in (0, 1):
        role["rules"][rule]["verbs"] = full["ClusterRole", "", "wingsmith-hangar"]["rules"][rule][
            "verbs"
        ]
    lease_role = ("Role", "wingsmith", "wingsmith-hangar-leader-election")
    undone[lease_role]["rules"] = full[lease_role]["rules"]
    hangar = manifests.container(undone["DaemonSet", "wingsmith", "wingsmith-hangar"], "hangar")
    assert hangar["env"].pop() == {"name": "HANGAR_OPERATOR_READ_ONLY", "value": "true"}
    assert undone == full


def test_the_agent_takes_in_metrics_only_and_reaches_the_hub_the_api_server_and_dns(
    agent_build: Any,
) -> None:
    policy = one(agent_build, "NetworkPolicy", "wingsmith-hangar")
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    ingress = [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert ingress == ["metrics"]
    ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert ports == {50051, 443, 6443, 53}


def test_the_metrics_port_is_declared_probed_and_annotated(agent_build: Any) -> None:
    daemonset = one(agent_build, "DaemonSet")
    hangar = manifests.container(daemonset, "hangar")
    (port,) = hangar["ports"]
    assert (port["name"], port["containerPort"]) == ("metrics", 9402)
    assert hangar["args"][hangar["args"].index("--metrics-listen") + 1].endswith(":9402")
    for probe in ("readinessProbe", "livenessProbe"):
        assert hangar[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    annotations = daemonset["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9402"
