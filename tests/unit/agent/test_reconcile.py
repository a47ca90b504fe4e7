"""What the reconciler does with DGDs whose deployments the hub no longer declares, and how it
takes control of adopted DGDs (agent/reconcile.py, agent/desired.py). Pure: specs and DGD
values in, a plan out."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from agent.cluster import port
from agent.desired import DesiredState
from agent.manifests import ANNOTATION_ADOPTED, adopted
from agent.model import DeploymentSpec
from agent.reconcile import Apply, plan
from tests.unit.render.builders import make_deployment, make_serving, with_serving

DEPLOYMENT = "dep_7f3a9c2e41d0"
OURS = {port.LABEL_MANAGED_BY: port.MANAGED_BY, port.LABEL_DEPLOYMENT_ID: DEPLOYMENT}
FLAGS = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]


def dgd(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    services: dict[str, Any] | None = None,
    resource_version: str = "",
) -> port.Dgd:
    return port.Dgd(
        namespace="ml",
        name="legacy",
        labels={"team": "search", **(labels or {})},
        annotations=annotations or {},
        spec={"backendFramework": "vllm", "services": services or disaggregated()},
        status={},
        resource_version=resource_version,
    )


def worker(sub: str, args: list[str]) -> dict[str, Any]:
    return {
        "componentType": "worker",
        "subComponentType": sub,
        "replicas": 1,
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {
            "mainContainer": {"command": ["python3", "-m", "dynamo.vllm"], "args": args}
        },
    }


def disaggregated() -> dict[str, Any]:
    return {
        "Frontend": {"componentType": "frontend", "replicas": 1},
        "VllmPrefillWorker": worker("prefill", [*FLAGS, "--disaggregation-mode", "prefill"]),
        "VllmDecodeWorker": worker("decode", FLAGS),
    }


def adopted_spec(**serving: Any) -> DeploymentSpec:
    return make_deployment(
        deployment_id=DEPLOYMENT,
        serving=make_serving(mode="disaggregated", **serving),
        replicas=1,
        dgd_namespace="ml",
        dgd_name="legacy",
        adopted=True,
    )


def letting_go(result: Apply) -> dict[str, Any]:
    assert result.letting_go
    return dict(result.manifest["metadata"])


@pytest.mark.parametrize(
    ("labels", "annotations", "released", "removed"),
    [
        (OURS, {}, {DEPLOYMENT}, set()),
        (OURS, {ANNOTATION_ADOPTED: "true"}, set(), set()),
        ({port.LABEL_DEPLOYMENT_ID: DEPLOYMENT}, {}, set(), set()),
    ],
    ids=[
        "the hub released it",
        "adopted, and the hub said nothing (a snapshot)",
        "demoted already, then gone from the hub",
    ],
)
def test_a_dgd_the_hub_no_longer_declares_is_let_go_not_deleted(
    labels: dict[str, str], annotations: dict[str, str], released: set[str], removed: set[str]
) -> None:
    live = dgd(labels, {**annotations, "wingsmith.dev/spec-hash": "abc", "keep": "me"})
    result = plan({}, [live], namespace="wingsmith", released=released, removed=removed)
    assert result.deletes == ()
    (apply,) = result.applies
    metadata = letting_go(apply)
    assert metadata["labels"] == {"team": "search"}, "only our labels come off"
    assert metadata["annotations"] == {"keep": "me"}
    assert apply.manifest["spec"] == live.spec, "the pod templates are untouched"


def test_a_managed_dgd_of_ours_removed_or_unknown_is_deleted() -> None:
    for removed in ({DEPLOYMENT}, set()):
        result = plan({}, [dgd(OURS)], namespace="wingsmith", removed=removed)
        assert [(d.namespace, d.name) for d in result.deletes] == [("ml", "legacy")]
        assert result.applies == ()


def test_an_adopted_dgd_removed_while_managed_is_deleted() -> None:
    live = dgd(OURS, {ANNOTATION_ADOPTED: "true"})
    result = plan({}, [live], namespace="wingsmith", removed={DEPLOYMENT})
    assert len(result.deletes) == 1


@pytest.mark.parametrize(
    "change", [{"enabled": False}, {"admitted": False}], ids=["disabled", "not admitted"]
)
def test_an_adopted_dgd_that_should_not_run_is_scaled_to_zero_never_deleted(
    change: dict[str, bool],
) -> None:
    spec = dataclasses.replace(adopted_spec(), **change)
    live = dgd(OURS, {ANNOTATION_ADOPTED: "true"})
    result = plan({DEPLOYMENT: spec}, [live], namespace="wingsmith")
    assert result.deletes == ()
    (apply,) = result.applies
    services = apply.manifest["spec"]["services"]
    assert [services[n]["replicas"] for n in ("VllmPrefillWorker", "VllmDecodeWorker")] == [0, 0]
    assert services["Frontend"] == live.spec["services"]["Frontend"]
    # Applied once: the scaled-down DGD carries its hash, and the next round writes nothing.
    annotations = apply.manifest["metadata"]["annotations"]
    idle = dgd(apply.manifest["metadata"]["labels"], annotations, services)
    assert plan({DEPLOYMENT: spec}, [idle], namespace="wingsmith").applies == ()


@pytest.mark.parametrize(
    ("labels", "change"),
    [
        ({"app.kubernetes.io/managed-by": "Helm"}, {}),
        (OURS, {"replicas": 2}),
        (OURS, {"enabled": False}),
    ],
    ids=["taken", "scaled", "disabled"],
)
def test_applies_to_a_managed_adopted_dgd_take_over_at_the_version_they_were_made_from(
    labels: dict[str, str], change: dict[str, Any]
) -> None:
    # Promoting to managed hands the DGD to Wingsmith: what it enforces is taken from the
    # DGD's other managers (kubectl, Helm), as of the version the manifest was made from.
    spec = dataclasses.replace(adopted_spec(), **change)
    live = dgd(labels, {ANNOTATION_ADOPTED: "true"}, resource_version="4711")
    (apply,) = plan({DEPLOYMENT: spec}, [live], namespace="wingsmith").applies
    assert apply.take_over == "4711"


def test_applies_that_take_nothing_over_do_not_force() -> None:
    rendered = make_deployment(deployment_id=DEPLOYMENT)
    (created,) = plan({DEPLOYMENT: rendered}, [], namespace="wingsmith").applies
    demoted = dataclasses.replace(adopted_spec(), authority="observed")
    live = dgd(OURS, {ANNOTATION_ADOPTED: "true"}, resource_version="4711")
    (released,) = plan({DEPLOYMENT: demoted}, [live], namespace="wingsmith").applies
    (forgotten,) = plan({}, [live], namespace="wingsmith", released={DEPLOYMENT}).applies
    assert (created.take_over, released.take_over, forgotten.take_over) == ("", "", "")


def test_letting_go_restores_the_managed_by_label_adoption_replaced() -> None:
    live = dgd({"app.kubernetes.io/managed-by": "Helm"})
    taken = adopted(adopted_spec(), live)
    assert taken["metadata"]["labels"][port.LABEL_MANAGED_BY] == port.MANAGED_BY
    held = dgd(taken["metadata"]["labels"], taken["metadata"]["annotations"])
    (apply,) = plan({}, [held], namespace="wingsmith", released={DEPLOYMENT}).applies
    assert letting_go(apply)["labels"] == {"team": "search", port.LABEL_MANAGED_BY: "Helm"}


def test_taking_control_with_no_engine_args_changes_no_pod_template() -> None:
    live = dgd()
    taken = adopted(adopted_spec(), live)
    assert taken["spec"]["services"] == live.spec["services"]
    assert taken["metadata"]["annotations"][ANNOTATION_ADOPTED] == "true"


def test_new_engine_args_label_every_worker_of_a_disaggregated_dgd() -> None:
    spec = adopted_spec(
        engine_args=("--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192")
    )
    services = adopted(spec, dgd())["spec"]["services"]
    decode, prefill = services["VllmDecodeWorker"], services["VllmPrefillWorker"]
    assert decode["extraPodSpec"]["mainContainer"]["args"] == list(spec.serving.engine_args)
    assert prefill["extraPodSpec"] == disaggregated()["VllmPrefillWorker"]["extraPodSpec"]
    for worker_service in (decode, prefill):
        labels = worker_service["extraPodMetadata"]["labels"]
        assert labels[port.LABEL_SERVING_DIGEST] == spec.serving_digest
    assert "extraPodMetadata" not in services["Frontend"]


def test_engine_args_a_shell_script_cannot_take_fail_the_deployment_and_touch_nothing() -> None:
    services = copy.deepcopy(disaggregated())
    services["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"] = {
        "command": ["sh", "-c", "cd /w && python3 -m dynamo.vllm --model m"]
    }
    spec = with_serving(adopted_spec(), engine_args=("--model", "n"))
    result = plan({DEPLOYMENT: spec}, [dgd(services=services)], namespace="wingsmith")
    assert result.applies == () and result.deletes == ()
    (failure,) = result.failures
    assert "shell script" in failure.error


def test_a_removal_of_what_the_agent_held_as_observed_becomes_a_release() -> None:
    desired = DesiredState(epoch="e", revision=1)
    observed = make_deployment(deployment_id=DEPLOYMENT, authority="observed")
    managed = make_deployment(deployment_id="dep_managed")
    desired.apply_delta(
        epoch="e", from_revision=1, revision=2, upserts=[observed, managed], removals=[]
    )
    desired.apply_delta(
        epoch="e", from_revision=2, revision=3, upserts=[], removals=[DEPLOYMENT, "dep_managed"]
    )
    assert desired.released == {DEPLOYMENT} and desired.removed == {"dep_managed"}
    desired.settle([DEPLOYMENT])
    assert desired.released == {DEPLOYMENT} and desired.removed == set()


def test_a_snapshot_carries_releases_and_what_was_held_observed_is_released() -> None:
    desired = DesiredState(epoch="e", revision=1)
    desired.apply_delta(
        epoch="e",
        from_revision=1,
        revision=2,
        upserts=[make_deployment(deployment_id="dep_a", authority="observed")],
        removals=[],
    )
    desired.replace(epoch="e", revision=9, specs=[], releases=["dep_b"])
    assert desired.released == {"dep_a", "dep_b"} and desired.deployments == {}
