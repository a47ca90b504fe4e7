"""The reconciler under each DGD version the cluster backend writes (agent/reconcile.py):
v1beta1's immutable topology planned as delete-then-create, a cluster serving no version
failing its deployments with the reason, and the observer saying a DGD is being recreated."""

from __future__ import annotations

from collections.abc import Sequence

from agent.cluster import port
from agent.model import DeploymentSpec
from agent.observe import REASON_RECREATING, Observer
from agent.reconcile import Apply, Delete, rendered
from agent.reconcile import plan as make_plan
from tests.unit.render.builders import make_deployment, with_serving

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
