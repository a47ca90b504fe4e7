"""The reconciler under each DGD version the cluster backend writes (agent/reconcile.py):
v1beta1's immutable topology planned as delete-then-create, a cluster serving no version
failing its deployments with the reason, and the observer saying a DGD is being recreated."""

from __future__ import annotations

from collections.abc import Sequence

from agent.cluster import port
from agent.manifests import rendered
from agent.model import DeploymentSpec
from agent.observe import REASON_RECREATING, Observer
from agent.reconcile import Apply, Delete
from agent.reconcile import plan as make_plan
from tests.unit.render.builders import make_deployment, make_serving, with_serving

NAMESPACE = "serving"


def live_dgd(spec: DeploymentSpec) -> port.Dgd:
    """The DGD the agent applied for `spec`, as read back."""
    manifest = rendered(spec, namespace=NAMESPACE)
    meta = manifest["metadata"]
    return port.Dgd(
        namespace=NAMESPACE,
        name=meta["name"],
        labels=meta["labels"],
        annotations=meta["annotations"],
        spec=manifest["spec"],
        status={},
    )


def plan_for(spec: DeploymentSpec, live: Sequence[port.Dgd], dgd_version: str):  # type: ignore[no-untyped-def]
    return make_plan({spec.deployment_id: spec}, live, namespace=NAMESPACE, dgd_version=dgd_version)


def test_under_v1beta1_a_new_engine_is_a_delete_with_the_reason_then_a_create() -> None:
    before = make_deployment()
    after = with_serving(before, engine="sglang", engine_version="0.5.3")
    live = [live_dgd(before)]

    first = plan_for(after, live, "v1beta1")
    assert first.applies == ()
    [delete] = first.deletes
    assert (delete.namespace, delete.name) == (NAMESPACE, before.workload_name)
    assert "components change (Frontend, VllmDecodeWorker -> Frontend, SGLangDecodeWorker)" in (
        delete.recreate
    )

    # Once the old DGD is gone, the new one is created.
    second = plan_for(after, [], "v1beta1")
    assert [a.deployment_id for a in second.applies] == [after.deployment_id]
    assert second.deletes == ()


def test_under_v1beta1_a_change_of_arguments_or_replicas_is_applied_in_place() -> None:
    before = make_deployment()
    for after in (
        with_serving(before, engine_args=("--max-num-seqs", "64")),
        make_deployment(replicas=5),
    ):
        result = plan_for(after, [live_dgd(before)], "v1beta1")
        assert [type(a) for a in result.applies] == [Apply] and result.deletes == ()


def test_under_v1alpha1_a_topology_change_is_applied_in_place_as_before() -> None:
    before = make_deployment()
    after = with_serving(before, engine="sglang", engine_version="0.5.3")
    result = plan_for(after, [live_dgd(before)], "v1alpha1")
    assert [a.deployment_id for a in result.applies] == [after.deployment_id]
    assert result.deletes == ()


def test_a_cluster_serving_no_dgd_version_fails_what_it_would_apply_with_the_reason() -> None:
    spec = make_deployment()
    result = plan_for(spec, [], port.DGD_VERSION_NONE)
    assert result.applies == () and result.deletes == ()
    [failure] = result.failures
    assert "serves no DynamoGraphDeployment version" in failure.error
    assert "install or upgrade NVIDIA Dynamo's operator" in failure.error


class _Cluster:
    """The reads the observer makes of a cluster, over fixed values."""

    dgd_version = "v1beta1"

    def __init__(self, dgds: Sequence[port.Dgd]) -> None:
        self._dgds = list(dgds)

    def list_dgds(self) -> list[port.Dgd]:
        return list(self._dgds)

    def list_pods(self) -> list[port.Pod]:
        return []

    def list_scaling_adapters(self) -> list[port.ScalingAdapter]:
        return []


def test_the_observer_reports_a_dgd_being_recreated_with_the_reason() -> None:
    spec = make_deployment()
    why = "recreating the DynamoGraphDeployment: its backendFramework changes"
    for dgds in ([], [live_dgd(spec)]):  # deleted already, or still terminating
        observer = Observer(cluster=_Cluster(dgds), nodes=lambda: [])  # type: ignore[arg-type]
        collected = observer.collect(
            {spec.deployment_id: spec}, recreating={spec.deployment_id: why}
        )
        [observation] = collected.deployments
        assert observation.status is not None
        assert (observation.status.reason, observation.status.message) == (REASON_RECREATING, why)
        assert not observation.absent
    assert Delete("a", "b", "c").recreate == ""


def test_our_dgd_named_past_dynamos_label_limits_is_made_again_under_a_fitting_name() -> None:
    """A DGD created before names were fitted (the workload's 40 characters, a TRT-LLM prefill
    worker: 69-character pod labels) is recreated under the shortened name, not left behind
    beside a second one."""
    spec = make_deployment(
        workload_name="w" * 40, serving=make_serving(engine="trtllm", mode="disaggregated")
    )
    fitted = live_dgd(spec)
    assert len(fitted.name) < 40
    old = port.Dgd(
        namespace=NAMESPACE,
        name="w" * 40,
        labels=fitted.labels,
        annotations=fitted.annotations,
        spec=fitted.spec,
        status={},
    )
    plan = plan_for(spec, [old], "v1beta1")
    assert plan.applies == ()
    [delete] = plan.deletes
    assert (delete.name, delete.recreate != "") == ("w" * 40, True)
    assert fitted.name in delete.recreate
    # Once it is gone, the fitted one is created; once it exists, nothing more happens.
    [create] = plan_for(spec, [], "v1beta1").applies
    assert create.manifest["metadata"]["name"] == fitted.name
    assert plan_for(spec, [fitted], "v1beta1").empty


def test_an_adopted_dgd_keeps_its_name_however_long() -> None:
    spec = make_deployment(
        workload_name="w" * 40,
        serving=make_serving(engine="trtllm", mode="disaggregated"),
        adopted=True,
        dgd_namespace=NAMESPACE,
        dgd_name="x" * 45,
    )
    current = live_dgd(make_deployment(workload_name="x" * 30))
    current = port.Dgd(
        namespace=NAMESPACE,
        name="x" * 45,
        labels=current.labels,
        annotations=current.annotations,
        spec=current.spec,
        status={},
    )
    plan = plan_for(spec, [current], "v1beta1")
    assert all(d.name != "x" * 45 for d in plan.deletes)
    assert all(a.manifest["metadata"]["name"] == "x" * 45 for a in plan.applies)


def test_an_untagged_agent_image_takes_the_operator_version_stamped_on_live_dgds() -> None:
    """No runtime version in the workload: the one Dynamo's webhook stamped on the cluster's
    DGDs (its own), never a constant; none seen: the deployment fails saying what to set."""
    spec = make_deployment()
    images = {"vllm": "mirror.local/vllm-runtime:latest"}
    other = live_dgd(make_deployment(deployment_id="dep_other", workload_name="other"))
    stamped = port.Dgd(
        namespace=other.namespace,
        name=other.name,
        labels=other.labels,
        annotations={**other.annotations, "nvidia.com/dynamo-operator-origin-version": "1.5.0"},
        spec=other.spec,
        status={},
    )
    desired = {spec.deployment_id: spec}
    plan = make_plan(desired, [stamped], namespace=NAMESPACE, images=images, dgd_version="v1beta1")
    [apply] = [a for a in plan.applies if a.deployment_id == spec.deployment_id]
    services = apply.manifest["spec"]["services"].values()
    assert {s["runtimeVersionOverride"] for s in services} == {"1.5.0"}
    assert (
        "1.5.0 (the cluster's Dynamo operator)"
        in apply.manifest["metadata"]["annotations"].values()
    )
    plan = make_plan(desired, [], namespace=NAMESPACE, images=images, dgd_version="v1beta1")
    [failure] = plan.failures
    assert failure.error.startswith("serving.runtime_version: required")
