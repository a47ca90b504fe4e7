"""deploy/hub: what matters about how the hub runs (one SQLite writer, non-root, its data on a
volume, TLS, probes, a load balancer in front), and that its args are flags the hub has."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.deploy import manifests
from tests.unit.deploy.manifests import one

HUB_ARGS = [
    "hub",
    "--db",
    "/var/lib/wingsmith/wingsmith.db",
    "--grpc-listen",
    "0.0.0.0:50051",
    "--http-listen",
    "0.0.0.0:8080",
    "--tls-cert",
    "/etc/wingsmith/tls/tls.crt",
    "--tls-key",
    "/etc/wingsmith/tls/tls.key",
    "--max-connection-age",
    "30m",
    "--max-connection-age-grace",
    "5m",
]
DATA = "/var/lib/wingsmith"
TLS = "/etc/wingsmith/tls"
HUB_UID = 10001


@pytest.fixture
def deployment(hub_build: Any) -> dict[str, Any]:
    return one(hub_build, "Deployment", "wingsmith-hub")


@pytest.fixture
def hub(deployment: dict[str, Any]) -> dict[str, Any]:
    return manifests.container(deployment, "hub")


def _mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container["volumeMounts"]}


def _volume(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [v for v in manifests.pod_spec(deployment)["volumes"] if v["name"] == name]
    return found


def test_one_replica_recreated_never_rolled(deployment: dict[str, Any]) -> None:
    # SQLite has one writer: two hub pods must never run at once, not even during a rollout.
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("runAsNonRoot", True),
        ("runAsUser", HUB_UID),
        ("runAsGroup", HUB_UID),
        ("fsGroup", HUB_UID),
        ("seccompProfile", {"type": "RuntimeDefault"}),
    ],
)
def test_the_pod_runs_as_the_hub_user(deployment: dict[str, Any], field: str, value: Any) -> None:
    assert manifests.pod_spec(deployment)["securityContext"][field] == value


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("runAsNonRoot", True),
        ("allowPrivilegeEscalation", False),
        ("readOnlyRootFilesystem", True),
        ("capabilities", {"drop": ["ALL"]}),
    ],
)
def test_the_container_is_locked_down(hub: dict[str, Any], field: str, value: Any) -> None:
    assert hub["securityContext"][field] == value
    assert hub["securityContext"].get("privileged") in (None, False)


def test_the_database_lives_on_the_claim_at_var_lib_wingsmith(
    hub_build: Any, deployment: dict[str, Any], hub: dict[str, Any]
) -> None:
    mount = _mounts(hub)[DATA]
    assert not mount.get("readOnly", False)
    claim = _volume(deployment, mount["name"])["persistentVolumeClaim"]["claimName"]
    pvc = one(hub_build, "PersistentVolumeClaim", claim)
    assert pvc["spec"]["accessModes"] in (["ReadWriteOnce"], ["ReadWriteOncePod"])
    assert hub["args"][hub["args"].index("--db") + 1].startswith(DATA + "/")


def test_only_the_data_volume_and_tmp_are_writable(hub: dict[str, Any]) -> None:
    writable = {path for path, m in _mounts(hub).items() if not m.get("readOnly", False)}
    assert writable == {DATA, "/tmp"}


def test_tls_comes_read_only_from_a_secret(deployment: dict[str, Any], hub: dict[str, Any]) -> None:
    mount = _mounts(hub)[TLS]
    assert mount["readOnly"] is True
    assert _volume(deployment, mount["name"])["secret"]["secretName"] == "wingsmith-hub-tls"


def test_the_admin_token_comes_from_a_secret(hub: dict[str, Any]) -> None:
    token = manifests.env(hub)["WINGSMITH_ADMIN_TOKEN"]
    assert token == {"secretKeyRef": {"name": "wingsmith-hub-admin", "key": "token"}}


def test_the_hub_runs_with_exactly_these_args(hub: dict[str, Any]) -> None:
    assert hub["args"] == HUB_ARGS
    assert "command" not in hub, "the image's entry point is `wingsmith`; args pick `hub`"


@pytest.mark.parametrize("probe", ["startupProbe", "readinessProbe", "livenessProbe"])
def test_probes_ask_healthz_over_https(hub: dict[str, Any], probe: str) -> None:
    # Not the native grpc probe: it speaks plaintext and the gRPC port serves TLS.
    assert hub[probe]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTPS"}


@pytest.mark.parametrize("kind", ["requests", "limits"])
def test_cpu_and_memory_are_requested_and_limited(hub: dict[str, Any], kind: str) -> None:
    assert set(hub["resources"][kind]) == {"cpu", "memory"}


def test_the_container_declares_both_ports(hub: dict[str, Any]) -> None:
    ports = {p["name"]: p["containerPort"] for p in hub["ports"]}
    assert ports == {"grpc": 50051, "http": 8080}


def test_the_service_is_a_load_balancer_for_grpc_and_http(hub_build: Any) -> None:
    service = one(hub_build, "Service", "wingsmith-hub")
    assert service["spec"]["type"] == "LoadBalancer"
    ports = {
        (p["name"], p["port"], p["targetPort"], p["protocol"]) for p in service["spec"]["ports"]
    }
    assert ports == {("grpc", 50051, "grpc", "TCP"), ("http", 8080, "http", "TCP")}
    notes = service["metadata"]["annotations"]
    assert "--max-connection-age 30m" in notes["wingsmith.dev/grpc-rebalancing"]


def test_the_hub_needs_no_kubernetes_api(hub_build: Any, deployment: dict[str, Any]) -> None:
    assert manifests.pod_spec(deployment)["automountServiceAccountToken"] is False
    assert not [o for o in hub_build if o["kind"] in ("Role", "ClusterRole")]


def test_the_hub_parser_takes_these_args(capsys: pytest.CaptureFixture[str]) -> None:
    from hub.app import command as app

    try:
        args = app.parse_args(HUB_ARGS[1:])
    except SystemExit:
        pytest.fail(f"wingsmith hub refuses the manifest's args: {capsys.readouterr().err}")
    assert (args.tls_cert, args.tls_key) == (f"{TLS}/tls.crt", f"{TLS}/tls.key")
    assert (args.max_connection_age, args.max_connection_age_grace) == ("30m", "5m")


def test_the_postgres_variant_runs_three_hubs_rolled_with_the_url_from_a_secret() -> None:
    build = manifests.build(manifests.DEPLOY / "hub-postgres")
    deployment = one(build, "Deployment", "wingsmith-hub")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    hub = manifests.container(deployment, "hub")
    db = hub["args"][hub["args"].index("--db") + 1]
    assert db == "$(WINGSMITH_DATABASE_URL)"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in hub["env"]}
    assert env["WINGSMITH_DATABASE_URL"] == {"name": "wingsmith-hub-database", "key": "url"}
    assert "WINGSMITH_ADMIN_TOKEN" in env, "every hub shares the admin token"
    assert not [o for o in build if o["kind"] == "PersistentVolumeClaim"], "no local data"
    assert DATA not in _mounts(hub)
    # The flags parse with a PostgreSQL URL where Kubernetes puts it.
    from hub.app import command as app

    args = [a if a != db else "postgresql://u@db/wingsmith" for a in hub["args"][1:]]
    parsed = app.parse_args(args)
    assert parsed.db == "postgresql://u@db/wingsmith"


def test_the_postgres_variant_loses_at_most_one_hub_to_a_drain_and_spreads_over_nodes() -> None:
    build = manifests.build(manifests.DEPLOY / "hub-postgres")
    deployment = one(build, "Deployment", "wingsmith-hub")
    pods = deployment["spec"]["template"]["metadata"]["labels"]
    budget = one(build, "PodDisruptionBudget", "wingsmith-hub")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= pods.items()
    spread = {
        c["topologyKey"]: c for c in manifests.pod_spec(deployment)["topologySpreadConstraints"]
    }
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"
    for constraint in spread.values():
        assert constraint["maxSkew"] == 1
        assert constraint["labelSelector"]["matchLabels"].items() <= pods.items()


def test_the_hub_reaches_dns_only_and_the_postgres_variant_its_database() -> None:
    def egress_ports(build: list[dict[str, Any]]) -> set[int]:
        return {
            port["port"]
            for policy in build
            if policy["kind"] == "NetworkPolicy"
            for rule in policy["spec"].get("egress", [])
            for port in rule["ports"]
        }

    assert egress_ports(manifests.build(manifests.DEPLOY / "hub")) == {53}
    assert egress_ports(manifests.build(manifests.DEPLOY / "hub-postgres")) == {53, 5432}
