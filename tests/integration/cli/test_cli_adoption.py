"""`wingsmith get discovered`, `discovered track|ignore|promote` and `authority
review|promote|demote` against a real hub and a real simulated agent.

The agent's cluster is seeded with DGDs that nobody declared (seeds.py), so it reports them as
discovered; the CLI then walks the adoption flow of tests/integration/test_adoption.py:
promote one to an observed deployment, review it, be refused while its engine_args differ,
declare them (over REST: the CLI has no serving edit command), take control, let go.

The hub and agents are the shared integration fixtures (`hub`, `agents`); the CLI runs
in-process through the same Runner as the other CLI tests.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

import pytest

from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until
from tests.integration.cli import seeds
from tests.integration.cli.conftest import Runner, RunningHub

LEGACY = seeds.ref("legacy-qwen")
SCRATCH = seeds.ref("scratch")
DEPLOYMENT = "legacy-qwen.east"


@pytest.fixture
def cli(hub: Hub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Runner:
    """The CLI pointed at the shared fixtures' hub (this module's `cli`, not the conftest's)."""
    monkeypatch.delenv("WINGSMITH_HUB_URL", raising=False)
    monkeypatch.delenv("WINGSMITH_ADMIN_TOKEN", raising=False)
    running = RunningHub(
        f"http://127.0.0.1:{hub.http_port}", ADMIN_TOKEN, pathlib.Path(hub.db_path)
    )
    return Runner(hub=running, capsys=capsys)


@pytest.fixture
def east(hub: Hub, agents: Callable[..., SimAgent], tmp_path: pathlib.Path) -> SimAgent:
    """Cluster east running two foreign DGDs, both discovered with their device class known,
    and a project with room for them."""
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    seed = seeds.write(tmp_path, seeds.dgd("legacy-qwen"), seeds.dgd("scratch", replicas=1))
    agent = agents(cluster_id="east", token=token, seed_path=seed)
    for ref in (LEGACY, SCRATCH):
        wait_until(
            lambda ref=ref: hub.rest("GET", f"/v1/discovered/{ref}", check=False)[1].get(
                "device_class"
            ),
            what=f"{ref} discovered on its devices",
        )
    return agent


def rows(table: str) -> list[list[str]]:
    """A table's rows (header first), cells split on the two-space column gap."""
    return [[cell.strip() for cell in line.split("  ") if cell] for line in table.splitlines()]


def by_name(table: str) -> dict[str, dict[str, str]]:
    """Each row of a table as {column: cell}, keyed by its first cell."""
    header, *body = rows(table)
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def deployment_cells(cli: Runner) -> dict[str, str]:
    return by_name(cli.ok("get", "deployment", DEPLOYMENT))[DEPLOYMENT]


# -- discovered -------------------------------------------------------------------------------


@pytest.mark.usefixtures("east")
def test_get_discovered_shows_what_the_agent_found_running(cli: Runner) -> None:
    header, *_ = rows(cli.ok("get", "discovered"))
    assert header == [
        "NAME", "STATE", "GONE", "ENGINE", "VERSION", "READY/DESIRED", "DEVICE-CLASS", "WORKLOAD",
    ]  # fmt: skip
    found = by_name(cli.ok("get", "discovered"))
    assert list(found[LEGACY].values()) == [
        LEGACY, "new", "false", "vllm", "0.9.1", "2/2", "H100-80GB", "-",
    ]  # fmt: skip
    assert found[SCRATCH]["READY/DESIRED"] == "1/1"
    shown = json.loads(cli.ok("get", "discovered", LEGACY, "-o", "json"))
    assert shown == cli.hub.client().get(f"/v1/discovered/{LEGACY}")
    assert shown["imported_args"] == seeds.LEGACY_ARGS


@pytest.mark.usefixtures("east")
def test_ignore_hides_an_entry_that_get_discovered_all_still_shows(cli: Runner) -> None:
    assert by_name(cli.ok("discovered", "track", SCRATCH))[SCRATCH]["STATE"] == "tracked"
    assert by_name(cli.ok("discovered", "ignore", SCRATCH))[SCRATCH]["STATE"] == "ignored"

    assert list(by_name(cli.ok("get", "discovered"))) == [LEGACY]
    every = by_name(cli.ok("get", "discovered", "--all"))
    assert sorted(every) == sorted([LEGACY, SCRATCH])
    assert every[SCRATCH]["STATE"] == "ignored"

    assert list(by_name(cli.ok("get", "discovered", "--cluster", "east"))) == [LEGACY]
    cli.hub.client().post("/v1/clusters", {"cluster_id": "west"})
    elsewhere = cli("get", "discovered", "--cluster", "west")
    assert (elsewhere.code, elsewhere.out, elsewhere.err) == (0, "", "no discovered found\n")
    assert cli.hub.client().list_all("/v1/deployments", "deployments") == [], "nothing adopted"


@pytest.mark.usefixtures("east")
def test_promote_prints_the_workload_it_made_and_refuses_twice(cli: Runner) -> None:
    workload = by_name(cli.ok("discovered", "promote", LEGACY, "--project", "search"))
    assert workload["legacy-qwen"]["PROJECT"] == "search"
    assert workload["legacy-qwen"]["DEPLOYMENTS"] == "east (observed)"
    workload_id = cli.hub.client().get("/v1/workloads/legacy-qwen")["workload_id"]
    entry = by_name(cli.ok("get", "discovered", LEGACY))[LEGACY]
    assert (entry["STATE"], entry["WORKLOAD"]) == ("promoted", workload_id)

    again = cli("discovered", "promote", LEGACY, "--project", "search")
    assert again.code == 1
    assert again.err.startswith("error: 409 FAILED_PRECONDITION: ")


# -- authority --------------------------------------------------------------------------------


@pytest.mark.usefixtures("east")
def test_review_refusal_declaration_promotion_and_demotion(cli: Runner, hub: Hub) -> None:
    cli.ok("discovered", "promote", LEGACY, "--project", "search")
    wait_until(lambda: hub.get(f"/v1/deployments/{DEPLOYMENT}")["status"], what="reported")
    assert deployment_cells(cli)["AUTHORITY"] == "observed"

    # The review says what differs: declared flags that are not the ones running (empty
    # engine_args would enforce nothing, and differ from nothing).
    declared = seeds.LEGACY_ARGS[:2]
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": declared}})
    wait_until(lambda: hub.get(f"/v1/deployments/{DEPLOYMENT}/review")["differences"])
    review = cli.ok("authority", "review", DEPLOYMENT)
    observed = " ".join(seeds.LEGACY_ARGS)
    assert f"  engine_args: declared {' '.join(declared)}, observed {observed}\n" in review
    assert "restarts pods:  yes, if promoted with --accept-differences" in review
    assert ["FLAG", "IMPORTED", "ENGINE_ARGS", "LIVE"] in rows(review)
    assert ["--max-model-len", "16384", "-", "16384"] in rows(review)
    raw = json.loads(cli.ok("authority", "review", DEPLOYMENT, "-o", "json"))
    assert raw == hub.get(f"/v1/deployments/{DEPLOYMENT}/review")

    # Promotion is refused while they differ; the hub's message lists them.
    refused = cli("authority", "promote", DEPLOYMENT)
    assert (refused.code, refused.out) == (1, "")
    first, *hint = refused.err.splitlines()
    assert first.startswith("error: 409 FAILED_PRECONDITION: ")
    assert f"engine_args: declared {' '.join(declared)}, observed {observed}" in first
    assert hint[0].startswith(f"hint: `wingsmith authority review {DEPLOYMENT}` shows what")
    assert hub.get(f"/v1/deployments/{DEPLOYMENT}")["authority"] == "observed"

    # Keep the imported flags as the declaration; then promoting changes nothing.
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": seeds.LEGACY_ARGS}})
    wait_until(lambda: not hub.get(f"/v1/deployments/{DEPLOYMENT}/review")["differences"])
    review = cli.ok("authority", "review", DEPLOYMENT)
    assert "\ndifferences: none\n" in review
    assert "restarts pods:  no\n" in review

    promoted = by_name(cli.ok("authority", "promote", DEPLOYMENT))[DEPLOYMENT]
    assert (promoted["AUTHORITY"], promoted["ROLLOUT"], promoted["DRIFT"]) == (
        "managed",
        "converged",
        "-",
    )
    assert by_name(cli.ok("get", "workloads"))["legacy-qwen"]["DEPLOYMENTS"] == "east"

    demoted = by_name(cli.ok("authority", "demote", DEPLOYMENT))[DEPLOYMENT]
    assert demoted["AUTHORITY"] == "observed"


@pytest.mark.usefixtures("east")
def test_an_observed_deployment_shows_its_drift_in_the_table(cli: Runner, hub: Hub) -> None:
    cli.ok("discovered", "promote", LEGACY, "--project", "search")
    # Declared flags other than the running ones: one difference as soon as the cluster reports.
    cli.hub.client().patch(
        "/v1/workloads/legacy-qwen", {"serving": {"engine_args": seeds.LEGACY_ARGS[:2]}}
    )
    wait_until(lambda: deployment_cells(cli)["DRIFT"] == "1", what="engine_args drift")
    cli.hub.client().patch("/v1/workloads/legacy-qwen", {"replicas": 3})
    wait_until(lambda: deployment_cells(cli)["DRIFT"] == "2", what="replica drift too")
    review = cli.ok("authority", "review", DEPLOYMENT)
    assert "  replicas: declared 3, observed 2\n" in review
    assert ["replicas", "3", "2 (2 ready)"] in rows(review)
