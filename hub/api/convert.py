"""Control API conversions: service views -> resource messages, request messages -> specs.

The REST JSON and the gRPC responses show the same messages, so this is the one place that
decides what a resource shows. A list item's conversion is written once against an `Output`:
`MESSAGES` builds protobuf messages (gRPC, and every REST answer but the lists), `JSON` the
REST JSON straight from the views (hub/api/jsonview.py), the same document to_json of the
message would be, without the message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common import convert as rule
from hub import adoption, wire
from hub.api import jsonview
from hub.model import (
    Allocation,
    ApiToken,
    AppliedObject,
    AuditRecord,
    Deployment,
    Discovered,
    FailoverRecord,
    Placement,
    RolloutPolicy,
)
from hub.service import dryrun, views
from hub.service.authority import Review
from hub.service.workloads import WorkloadSpec
from wingsmith.v1 import control_pb2 as cpb
from wingsmith.v1 import resources_pb2 as pb


@dataclass(frozen=True)
class Output:
    """Where a conversion goes: `message(message_type, record or None, **given)` (the record's
    fields by the converter's rule, `given` as given, None unset), and a timestamp from float
    seconds (None: unset) or from nanoseconds (0: unset), in that output's form."""

    message: Callable[..., Any]
    timestamp: Callable[[float | None], Any]
    timestamp_ns: Callable[[int], Any]


def _message(message_type: Any, record: Any, **given: Any) -> Any:
    """wire.message_from, or the message of the given fields alone for no record."""
    if record is None:
        # A field given None is left unset: the constructor reads None so.
        return message_type(**given)
    record_type: Any = type(record)
    build = rule.message_builder(record_type, message_type.DESCRIPTOR, tuple(given))
    return build(message_type, record, given)


MESSAGES = Output(_message, wire.timestamp, wire.timestamp_ns)
JSON = Output(jsonview.build, jsonview.stamp_text, jsonview.stamp_ns_text)


def project(view: views.ProjectView) -> pb.Project:
    message: pb.Project = project_as(view, MESSAGES)
    return message


def project_as(view: views.ProjectView, out: Output) -> Any:
    """The project's fields by the one converter's rule (wire.message_from); the usage per
    device class, which the view computes, given."""
    return out.message(
        pb.Project,
        view.project,
        usage={c: out.message(pb.QuotaUsage, u) for c, u in view.usage.items()},
    )


def cluster(view: views.ClusterView) -> pb.Cluster:
    message: pb.Cluster = cluster_as(view, MESSAGES)
    return message


def cluster_as(view: views.ClusterView, out: Output) -> Any:
    """The cluster's fields (labels, agents, times) by the converter's rule; what the view and
    the maintenance marks say given."""
    c = view.cluster
    return out.message(
        pb.Cluster,
        c,
        connected=c.connected,
        stale=view.stale,
        nodes=[
            out.message(
                pb.Node,
                n,
                observe_time=out.timestamp_ns(n.observe_ns),
                cordoned=n.node_id in c.maintenance.nodes,
            )
            for n in view.nodes
        ],
        devices={
            device_class: out.message(pb.DeviceCapacity, cap, free=cap.free)
            for device_class, cap in view.capacity.items()
        },
        never_connected=view.never_connected,
        # A drain cordons: a draining cluster reads cordoned (also one drained before drains
        # recorded the cordon themselves).
        cordoned=c.maintenance.cordoned or c.maintenance.draining,
        cordoned_device_classes=list(c.maintenance.device_classes),
        cordoned_nodes=list(c.maintenance.nodes),
        draining=c.maintenance.draining,
    )


def deployment(view: views.DeploymentView) -> pb.Deployment:
    message: pb.Deployment = deployment_as(view, MESSAGES)
    return message


def deployment_as(view: views.DeploymentView, out: Output) -> Any:
    d = view.deployment
    # The deployment's fields of the same name are copied (the converter's rule); what the
    # view says (phase, reason and message as of now, live state) and the messages are given.
    return out.message(
        pb.Deployment,
        d,
        name=d.name,
        admission_phase=wire.enum_value(pb.AdmissionPhase, view.phase),
        admission_reason=wire.enum_value(pb.AdmissionReason, view.admission_reason),
        admission_message=view.admission_message,
        live_digests=view.live_digests,
        degraded=view.degraded,
        sync=out.message(
            pb.SyncState,
            None,
            revision=d.revision,
            applied=view.applied,
            rejected_error=view.rejection.error if view.rejection else "",
            rejected_generation=view.rejection.generation if view.rejection else 0,
        ),
        drift=[difference_as(x, out) for x in view.drift],
        topology_violations=[
            out.message(
                pb.TopologyViolation, None, replica_id=v.replica_id, name=v.name, reason=v.reason
            )
            for v in view.topology_violations
        ],
        failover_replicas=view.failover_replicas,
        failover_for=list(view.failover_for),
        rollout=None if view.rollout is None else rollout_as(view.rollout, out),
        applied=(
            None if view.applied_object is None else applied_object_as(view.applied_object, out)
        ),
        # A word on the record, a message here.
        adopted_from=(
            out.message(
                pb.AdoptedFrom,
                None,
                discovered_id=d.adopted_from,
                namespace=d.dgd_namespace,
                name=d.dgd_name,
            )
            if d.adopted
            else None
        ),
        status=None if view.status is None else status_as(view.status, deployment=d, out=out),
    )


def applied_object(a: AppliedObject) -> pb.AppliedObject:
    """With its body when it was read with one (GetAppliedObject), else coordinates only."""
    message: pb.AppliedObject = applied_object_as(a, MESSAGES)
    return message


def applied_object_as(a: AppliedObject, out: Output) -> Any:
    return out.message(pb.AppliedObject, a, observe_time=out.timestamp_ns(a.observe_ns))


# A stale cluster's last report is kept but never shown as its present state (docs/phases.md).
STALE_PHASE = "unknown"
STALE_REASON = "cluster_stale"


def status(view: views.StatusView, *, deployment: Deployment) -> pb.DeploymentStatus:
    message: pb.DeploymentStatus = status_as(view, deployment=deployment, out=MESSAGES)
    return message


def status_as(view: views.StatusView, *, deployment: Deployment, out: Output) -> Any:
    """The cluster's answer. While the cluster is stale its last report may be long false
    ("successful, all_resources_are_ready" of pods that are gone), so phase and reason say
    stale and the message carries what the last report said, as of `observe_time`.

    `desired_replicas` echoes the deployment's (the concept document's word: what the cluster
    is trying to achieve); the replicas its DGD asks for now, which lag behind while a
    scale-up waits for admission, are `applied_replicas`."""
    cluster_id = deployment.cluster_id
    report = view.report
    phase, reason, text = report.phase, report.reason, report.message
    if view.stale:
        said = ", ".join(part for part in (report.phase, report.reason) if part)
        phase, reason = STALE_PHASE, STALE_REASON
        text = (
            f"cluster {cluster_id} has not reported within the grace period; its last report"
            f" (observe_time) said: {said or 'nothing'}" + (f": {report.message}" if text else "")
        )
    return out.message(
        pb.DeploymentStatus,
        None,
        phase=phase,
        reason=reason,
        message=text,
        ready_replicas=view.ready_replicas,
        desired_replicas=deployment.desired_replicas,
        applied_replicas=report.applied_replicas,
        replicas_owner=report.replicas_owner,
        stale=view.stale,
        observe_time=out.timestamp_ns(report.observe_ns),
    )


def rollout(r: views.RolloutView) -> pb.RolloutStatus:
    message: pb.RolloutStatus = rollout_as(r, MESSAGES)
    return message


def rollout_as(r: views.RolloutView, out: Output) -> Any:
    # `state` is a property of the view (derived from `rolling`), so given.
    return out.message(pb.RolloutStatus, r, state=wire.enum_value(pb.RolloutState, r.state))


def difference(x: views.Difference) -> pb.Difference:
    message: pb.Difference = difference_as(x, MESSAGES)
    return message


def difference_as(x: views.Difference, out: Output) -> Any:
    return out.message(pb.Difference, x)


def deployment_summary(view: views.DeploymentView) -> pb.DeploymentSummary:
    message: pb.DeploymentSummary = deployment_summary_as(view, MESSAGES)
    return message


def deployment_summary_as(view: views.DeploymentView, out: Output) -> Any:
    d = view.deployment
    return out.message(
        pb.DeploymentSummary,
        None,
        deployment_id=d.deployment_id,
        name=d.name,
        cluster_id=d.cluster_id,
        desired_replicas=d.desired_replicas,
        ready_replicas=view.ready_replicas,
        admission_phase=wire.enum_value(pb.AdmissionPhase, view.phase),
        admission_reason=wire.enum_value(pb.AdmissionReason, view.admission_reason),
        generation=d.generation,
        serving_digest=d.serving_digest,
        stale=view.stale,
        live_digests=view.live_digests,
        rollout_state=(
            pb.ROLLOUT_STATE_UNSPECIFIED
            if view.rollout is None
            else wire.enum_value(pb.RolloutState, view.rollout.state)
        ),
        authority=wire.enum_value(pb.Authority, d.authority),
    )


def workload(view: views.WorkloadView) -> pb.Workload:
    message: pb.Workload = workload_as(view, MESSAGES)
    return message


def workload_as(view: views.WorkloadView, out: Output) -> Any:
    """The workload's fields by the converter's rule (serving, placement and times among
    them); what the view says given, and `rollout`, which is the rollout's state on the record
    and its policy on the wire."""
    w = view.workload
    return out.message(
        pb.Workload,
        w,
        phase=wire.enum_value(pb.AdmissionPhase, view.phase),
        degraded=view.degraded,
        ready_replicas=view.ready_replicas,
        deployments=[deployment_summary_as(d, out) for d in view.deployments],
        devices_per_replica=w.serving.devices_per_replica,
        rollout=out.message(pb.RolloutPolicy, w.rollout_policy),
        rollout_status=workload_rollout_as(view, out) if w.rollout.state else None,
        failovers=[failover_status_as(r, w.placement, out) for r in view.failovers],
    )


def workload_rollout(view: views.WorkloadView) -> pb.WorkloadRollout:
    message: pb.WorkloadRollout = workload_rollout_as(view, MESSAGES)
    return message


def workload_rollout_as(view: views.WorkloadView, out: Output) -> Any:
    r = view.workload.rollout
    return out.message(
        pb.WorkloadRollout,
        None,
        state=wire.enum_value(pb.RolloutState, r.state),
        target_serving_digest=r.target_digest,
        previous_serving_digest=r.previous_digest,
        reason=r.reason,
        message=r.message,
        clusters=[
            out.message(
                pb.WaveStatus,
                None,
                cluster_id=c.cluster_id,
                state=wire.enum_value(pb.RolloutState, c.state),
                change_time=out.timestamp(c.changed_at),
            )
            for c in view.waves
        ],
        start_time=out.timestamp(r.start_time),
        update_time=out.timestamp(r.update_time),
    )


def rollout_policy(message: pb.RolloutPolicy) -> RolloutPolicy:
    policy: RolloutPolicy = wire.record_from(RolloutPolicy, message)
    return policy


def failover_status(r: FailoverRecord, placement: Placement) -> pb.FailoverStatus:
    message: pb.FailoverStatus = failover_status_as(r, placement, MESSAGES)
    return message


def failover_status_as(r: FailoverRecord, placement: Placement, out: Output) -> Any:
    """The record's fields by the converter's rule; the failback time derived."""
    stabilization = placement.failover.stabilization_s if placement.failover else 0
    return out.message(
        pb.FailoverStatus,
        r,
        failback_time=out.timestamp(
            None if r.recovered_since is None else r.recovered_since + stabilization
        ),
    )


def dry_run_workload(preview: dryrun.DryRun) -> pb.Workload:
    """The answer to a validate_only create or update: the workload as it would be, with
    what the call would change."""
    assert preview.workload is not None
    message = workload(preview.workload)
    message.dry_run.CopyFrom(dry_run(preview))
    return message


def dry_run(preview: dryrun.DryRun) -> pb.DryRunResult:
    return pb.DryRunResult(
        summary=preview.summary, changes=[deployment_change(c) for c in preview.changes]
    )


def deployment_change(change: dryrun.Change) -> pb.DeploymentChange:
    d = change.current.deployment
    b, a = change.before, change.after
    message = pb.DeploymentChange(
        deployment_id=d.deployment_id,
        name=d.name,
        workload_name=d.workload_name,
        project=d.project,
        cluster_id=d.cluster_id,
        effects=list(change.effects),
        ready_replicas=b.ready_replicas if b else 0,
    )
    if b is not None:
        message.desired_replicas_before = b.deployment.desired_replicas
        message.admitted_replicas_before = b.deployment.admitted_replicas
        message.admission_phase_before = wire.enum_value(pb.AdmissionPhase, b.phase)
        message.serving_digest_before = b.deployment.serving_digest
        message.generation_before = b.deployment.generation
    if a is not None:
        message.desired_replicas = a.deployment.desired_replicas
        message.admitted_replicas = a.deployment.admitted_replicas
        message.admission_phase = wire.enum_value(pb.AdmissionPhase, a.phase)
        message.admission_reason = wire.enum_value(pb.AdmissionReason, a.admission_reason)
        message.admission_message = a.admission_message
        message.serving_digest = a.deployment.serving_digest
        message.generation = a.deployment.generation
    return message


def replica(view: views.ReplicaView) -> pb.Replica:
    message: pb.Replica = replica_as(view, MESSAGES)
    return message


def replica_as(view: views.ReplicaView, out: Output) -> Any:
    r = view.replica
    return out.message(
        pb.Replica,
        None,
        replica_id=r.replica_id,
        deployment_id=r.deployment_id,
        cluster_id=r.cluster_id,
        name=r.name,
        namespace=r.namespace,
        node_id=r.node_id,
        device_ids=list(r.device_ids),
        ready=r.ready and not view.stale,
        serving_digest=r.serving_digest,
        engine_version=r.engine_version,
        role=r.role,
        stale=view.stale,
        observe_time=out.timestamp_ns(r.observe_ns),
    )


def allocation(a: Allocation) -> pb.Allocation:
    message: pb.Allocation = allocation_as(a, MESSAGES)
    return message


def allocation_as(a: Allocation, out: Output) -> Any:
    return out.message(pb.Allocation, a)


def placement_to_proto(p: Placement) -> pb.Placement:
    """Maps, preferences and the failover policy by the converter's rule (hub/wire.py
    registers the policy's two functions)."""
    message: pb.Placement = wire.message_from(pb.Placement, p)
    return message


def placement_from_proto(message: pb.Placement) -> Placement:
    """Raw values, by the same rule: hub/service/workloads.py checks them."""
    placement: Placement = wire.record_from(Placement, message)
    return placement


def workload_spec(message: pb.Workload) -> WorkloadSpec:
    """Raw values by the converter's rule (hub/service/workloads.py checks them); the wire's
    `rollout` is the spec's rollout policy."""
    spec: WorkloadSpec = wire.record_from(
        WorkloadSpec, message, rollout_policy=rollout_policy(message.rollout)
    )
    return spec


def discovered(d: Discovered) -> pb.Discovered:
    message: pb.Discovered = discovered_as(d, MESSAGES)
    return message


def discovered_as(d: Discovered, out: Output) -> Any:
    """Replicas and devices per replica as hub/adoption.py reads them off the services (the
    way a rendered DGD is counted, whatever an older agent computed)."""
    o = d.observation
    shape = adoption.shape(o)
    return out.message(
        pb.Discovered,
        None,
        discovered_id=d.discovered_id,
        name=d.ref,
        cluster_id=d.cluster_id,
        namespace=d.namespace,
        dgd_name=d.name,
        state=wire.enum_value(pb.DiscoveredState, d.state),
        gone=d.gone,
        backend_framework=o.backend_framework,
        services=[out.message(pb.DiscoveredService, s) for s in o.services],
        replicas=shape.replicas,
        ready_replicas=shape.ready_replicas,
        imported_args=list(o.imported_args),
        engine_version=o.engine_version,
        device_class=o.device_class,
        devices_per_replica=shape.devices_per_replica,
        workload_id=d.workload_id,
        first_seen=out.timestamp(d.first_seen),
        last_seen=out.timestamp(d.last_seen),
        gone_time=out.timestamp(d.gone_time),
    )


def review(r: Review) -> cpb.DeploymentReview:
    view = r.view
    d = view.deployment
    report = view.status.report if view.status else None
    return cpb.DeploymentReview(
        deployment_id=d.deployment_id,
        name=d.name,
        authority=wire.enum_value(pb.Authority, d.authority),
        adopted=d.adopted,
        differences=[difference(x) for x in r.differences],
        restarts_pods=r.restarts_pods,
        summary=r.summary,
        engine_args=list(d.engine_args),
        imported_args=list(d.imported_args),
        live_args=list(view.live_args),
        # As drift compares them: for a managed deployment, the replicas the agent was told.
        declared_replicas=d.admitted_replicas if d.authority == "managed" else d.desired_replicas,
        live_replicas=report.applied_replicas if report else 0,
        ready_replicas=view.ready_replicas,
        declared_engine_version=d.serving.engine_version,
        live_engine_versions=list(view.engine_versions),
        declared_serving_digest=d.serving_digest,
        live_digests=view.live_digests,
        reported=report is not None,
    )


def api_token(token: ApiToken) -> pb.ApiToken:
    message: pb.ApiToken = api_token_as(token, MESSAGES)
    return message


def api_token_as(token: ApiToken, out: Output) -> Any:
    return out.message(pb.ApiToken, token)


def audit_record(record: AuditRecord) -> pb.AuditRecord:
    message: pb.AuditRecord = audit_record_as(record, MESSAGES)
    return message


def audit_record_as(record: AuditRecord, out: Output) -> Any:
    return out.message(pb.AuditRecord, record)
