"""The hub's pure rules for a deployment's life after it first runs: drift, when a rollout is
done, what an adopted DGD's imported args say, and the phase of a workload of zero replicas
(hub/service/views.py, hub/service/ingest.py, hub/adoption.py, hub/phases.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hub import adoption
from hub.model import (
    Deployment,
    DeploymentObservation,
    DiscoveredObservation,
    DiscoveredService,
    ReplicaObservation,
    Serving,
    StatusReport,
)
from hub.phases import workload_phase
from hub.service import views
from hub.service.ingest import rollout_done

TARGET = "svg_000000000000000b"
OLDER = "svg_000000000000000a"
FLAGS = ("--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096")


def make_deployment(**overrides: Any) -> Deployment:
    base = Deployment(
        deployment_id="dep_0000000000000001",
        workload_id="wl_0000000000000001",
        workload_name="chat",
        project="search",
        cluster_id="east",
        desired_replicas=2,
        admitted_replicas=2,
        admission_reason="",
        admission_message="",
        generation=2,
        authority="managed",
        enabled=True,
        engine_args=(),
        imported_args=(),
        serving=Serving(engine="vllm", engine_version="0.11.0", model="m"),
        serving_digest=TARGET,
        device_class="H100-80GB",
        devices_per_replica=1,
        revision=1,
        create_time=0.0,
        update_time=0.0,
    )
    return dataclasses.replace(base, **overrides)


def adopted(**overrides: Any) -> Deployment:
    return make_deployment(adopted_from="dsc_0000000000000001", dgd_name="legacy", **overrides)


def report(*, ready: int = 2, live_args: tuple[str, ...] = ()) -> StatusReport:
    return StatusReport(
        phase="successful",
        reason="",
        message="",
        ready_replicas=ready,
        applied_replicas=2,
        applied_generation=2,
        observe_ns=1,
        live_args=live_args,
    )


def observation(
    *digests: str, ready: int = 2, live_args: tuple[str, ...] = ()
) -> DeploymentObservation:
    replicas = tuple(
        ReplicaObservation(f"pod-{i}", "ml", "node-1", True, digest, "0.11.0", "worker")
        for i, digest in enumerate(digests)
    )
    return DeploymentObservation(
        deployment_id="dep_0000000000000001",
        observe_ns=1,
        status=report(ready=ready, live_args=live_args),
        replicas=replicas,
        live_args=live_args,
    )


# -- when a rollout is done ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("deployment", "seen", "done"),
    [
        (make_deployment(rolling=True), observation(TARGET, TARGET), True),
        (make_deployment(rolling=True), observation(TARGET, OLDER), False),
        (make_deployment(rolling=True), observation(TARGET, TARGET, ready=1), False),
        (adopted(rolling=True), observation("", ""), True),
        (adopted(rolling=True, engine_args=FLAGS), observation("", "", live_args=FLAGS), True),
        (adopted(rolling=True, engine_args=FLAGS), observation("", TARGET), False),
        (
            adopted(rolling=True, engine_args=FLAGS),
            observation(OLDER, OLDER, live_args=FLAGS),
            True,
        ),
    ],
    ids=[
        "every replica on target",
        "an old replica left",
        "too few ready",
        "adopted, no engine_args: its template never changed",
        "adopted, engine_args as its engine runs them",
        "adopted, new flags still rolling",
        "adopted, label of an earlier change",
    ],
)
def test_a_rollout_is_done_when_every_replica_runs_the_target(
    deployment: Deployment, seen: DeploymentObservation, done: bool
) -> None:
    assert rollout_done(deployment, seen) is done


# -- drift ---------------------------------------------------------------------------------


def fields(
    d: Deployment,
    seen: StatusReport,
    digests: dict[str, int],
    versions: tuple[str, ...] = ("0.11.0",),
) -> list[str]:
    return [difference.field for difference in views.drift(d, seen, digests, versions)]


def test_empty_engine_args_of_an_adopted_deployment_enforce_nothing_and_are_no_drift() -> None:
    assert fields(adopted(authority="observed"), report(live_args=FLAGS), {"unlabeled": 2}) == []
    declared = adopted(authority="observed", engine_args=FLAGS[:2])
    assert fields(declared, report(live_args=FLAGS), {"unlabeled": 2}) == ["engine_args"]


def test_an_edit_outside_wingsmith_of_a_rendered_dgd_is_drift() -> None:
    demoted = make_deployment(authority="observed")
    assert fields(demoted, report(live_args=()), {TARGET: 2}) == []
    assert fields(demoted, report(live_args=("--enforce-eager",)), {TARGET: 2}) == ["engine_args"]


def test_a_rollout_shows_no_drift_but_replicas() -> None:
    rolling = make_deployment(rolling=True, serving=Serving("vllm", "0.12.0", "m"))
    seen = report(live_args=("--old",))
    assert fields(rolling, seen, {TARGET: 1, OLDER: 1}, ("0.11.0", "0.12.0")) == []
    assert fields(make_deployment(), seen, {TARGET: 1, OLDER: 1}) == [
        "serving_digest",
        "engine_args",
    ]


# -- imported args -------------------------------------------------------------------------


def discovered(args: tuple[str, ...]) -> DiscoveredObservation:
    worker = DiscoveredService("VllmWorker", "worker", "", 2, 2, 1, "vllm-runtime:0.9.1", args)
    return DiscoveredObservation(
        namespace="ml",
        name="legacy",
        observe_ns=1,
        backend_framework="vllm",
        services=(worker,),
        replicas=2,
        imported_args=args,
        engine_version="0.9.1",
    )


@pytest.mark.parametrize(
    "args",
    [
        FLAGS,
        ("python3 -m dynamo.vllm " + " ".join(FLAGS),),
        ("/bin/sh", "-c", "python3 -m dynamo.vllm " + " ".join(FLAGS)),
    ],
    ids=["flags", "one command line", "a whole sh -c argv"],
)
def test_the_serving_config_is_read_off_imported_args_in_any_spelling(
    args: tuple[str, ...],
) -> None:
    serving = adoption.serving_of(discovered(args))
    assert (serving.model, serving.context_length) == ("Qwen/Qwen2.5-7B-Instruct", 4096)


# -- phases ----------------------------------------------------------------------------------


def test_a_workload_of_zero_replicas_is_admitted_with_or_without_deployments() -> None:
    assert workload_phase([], replicas=0) == "admitted"
    assert workload_phase(["admitted"], replicas=0) == "admitted"
    assert workload_phase([], replicas=2) == "pending"


def test_replicas_an_autoscaler_owns_are_no_drift() -> None:
    scaled = dataclasses.replace(report(), applied_replicas=5)
    assert fields(make_deployment(), scaled, {TARGET: 5}) == ["replicas"]
    for owner, drift in (("adapter", ["replicas"]), ("autoscaler:keda-operator", [])):
        owned = dataclasses.replace(scaled, replicas_owner=owner)
        assert fields(make_deployment(), owned, {TARGET: 5}) == drift
