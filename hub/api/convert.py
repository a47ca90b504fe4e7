"""Control API conversions: service views -> resource messages, request messages -> specs.

The REST JSON and the gRPC responses are the same messages, so this is the one place that
decides what a resource shows.
"""

from __future__ import annotations

from hub import adoption, wire
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


def project(view: views.ProjectView) -> pb.Project:
    """The project's fields by the one converter's rule (wire.message_from); the usage per
    device class, which the view computes, given."""
    message: pb.Project = wire.message_from(
        pb.Project,
        view.project,
        usage={c: wire.message_from(pb.QuotaUsage, u) for c, u in view.usage.items()},
    )
    return message


def cluster(view: views.ClusterView) -> pb.Cluster:
    """The cluster's fields (labels, agents, times) by the converter's rule; what the view and
    the maintenance marks say given."""
    c = view.cluster
    message: pb.Cluster = wire.message_from(
        pb.Cluster,
        c,
        connected=c.connected,
        stale=view.stale,
        nodes=[
            wire.message_from(
                pb.Node,
                n,
                observe_time=wire.timestamp_ns(n.observe_ns),
                cordoned=n.node_id in c.maintenance.nodes,
            )
            for n in view.nodes
        ],
        devices={
            device_class: wire.message_from(pb.DeviceCapacity, cap, free=cap.free)
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
    return message


def deployment(view: views.DeploymentView) -> pb.Deployment:
    d = view.deployment
    # The deployment's fields of the same name are copied (wire.message_from); what the view
    # says (phase, reason and message as of now, live state) and the messages are given here.
    message: pb.Deployment = wire.message_from(
        pb.Deployment,
        d,
        name=d.name,
        admission_phase=wire.enum_value(pb.AdmissionPhase, view.phase),
        admission_reason=wire.enum_value(pb.AdmissionReason, view.admission_reason),
        admission_message=view.admission_message,
        live_digests=view.live_digests,
        degraded=view.degraded,
        sync=pb.SyncState(
            revision=d.revision,
            applied=view.applied,
            rejected_error=view.rejection.error if view.rejection else "",
            rejected_generation=view.rejection.generation if view.rejection else 0,
        ),
        drift=[difference(x) for x in view.drift],
        topology_violations=[
            pb.TopologyViolation(replica_id=v.replica_id, name=v.name, reason=v.reason)
            for v in view.topology_violations
        ],
        failover_replicas=view.failover_replicas,
        failover_for=list(view.failover_for),
        # A word on the record, a message here: set below.
        adopted_from=None,
    )
    if view.rollout is not None:
        message.rollout.CopyFrom(rollout(view.rollout))
    if view.applied_object is not None:
        message.applied.CopyFrom(applied_object(view.applied_object))
    if d.adopted:
        message.adopted_from.CopyFrom(
            pb.AdoptedFrom(discovered_id=d.adopted_from, namespace=d.dgd_namespace, name=d.dgd_name)
        )
    if view.status is not None:
        message.status.CopyFrom(status(view.status, deployment=d))
    return message


def applied_object(a: AppliedObject) -> pb.AppliedObject:
    """With its body when it was read with one (GetAppliedObject), else coordinates only."""
    message: pb.AppliedObject = wire.message_from(
        pb.AppliedObject, a, observe_time=wire.timestamp_ns(a.observe_ns)
    )
    return message


# A stale cluster's last report is kept but never shown as its present state (docs/phases.md).
STALE_PHASE = "unknown"
STALE_REASON = "cluster_stale"


def status(view: views.StatusView, *, deployment: Deployment) -> pb.DeploymentStatus:
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
    return pb.DeploymentStatus(
        phase=phase,
        reason=reason,
        message=text,
        ready_replicas=view.ready_replicas,
        desired_replicas=deployment.desired_replicas,
        applied_replicas=report.applied_replicas,
        replicas_owner=report.replicas_owner,
        stale=view.stale,
        observe_time=wire.timestamp_ns(report.observe_ns),
    )


def rollout(r: views.RolloutView) -> pb.RolloutStatus:
    # `state` is a property of the view (derived from `rolling`), so given.
    message: pb.RolloutStatus = wire.message_from(
        pb.RolloutStatus, r, state=wire.enum_value(pb.RolloutState, r.state)
    )
    return message


def difference(x: views.Difference) -> pb.Difference:
    message: pb.Difference = wire.message_from(pb.Difference, x)
    return message


def deployment_summary(view: views.DeploymentView) -> pb.DeploymentSummary:
    d = view.deployment
    return pb.DeploymentSummary(
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
    """The workload's fields by the converter's rule (serving, placement and times among
    them); what the view says given, and `rollout`, which is the rollout's state on the record
    and its policy on the wire."""
    w = view.workload
    message: pb.Workload = wire.message_from(
        pb.Workload,
        w,
        phase=wire.enum_value(pb.AdmissionPhase, view.phase),
        degraded=view.degraded,
        ready_replicas=view.ready_replicas,
        deployments=[deployment_summary(d) for d in view.deployments],
        devices_per_replica=w.serving.devices_per_replica,
        rollout=wire.message_from(pb.RolloutPolicy, w.rollout_policy),
        rollout_status=workload_rollout(view) if w.rollout.state else None,
        failovers=[failover_status(r, w.placement) for r in view.failovers],
    )
    return message


def workload_rollout(view: views.WorkloadView) -> pb.WorkloadRollout:
    r = view.workload.rollout
    return pb.WorkloadRollout(
        state=wire.enum_value(pb.RolloutState, r.state),
        target_serving_digest=r.target_digest,
        previous_serving_digest=r.previous_digest,
        reason=r.reason,
        message=r.message,
        clusters=[
            pb.WaveStatus(
                cluster_id=c.cluster_id,
                state=wire.enum_value(pb.RolloutState, c.state),
                change_time=wire.timestamp(c.changed_at),
            )
            for c in view.waves
        ],
        start_time=wire.timestamp(r.start_time),
        update_time=wire.timestamp(r.update_time),
    )


def rollout_policy(message: pb.RolloutPolicy) -> RolloutPolicy:
    policy: RolloutPolicy = wire.record_from(RolloutPolicy, message)
    return policy


def failover_status(r: FailoverRecord, placement: Placement) -> pb.FailoverStatus:
    """The record's fields by the converter's rule; the failback time derived."""
    stabilization = placement.failover.stabilization_s if placement.failover else 0
    message: pb.FailoverStatus = wire.message_from(
        pb.FailoverStatus,
        r,
        failback_time=wire.timestamp(
            None if r.recovered_since is None else r.recovered_since + stabilization
        ),
    )
    return message


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
    r = view.replica
    return pb.Replica(
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
        observe_time=wire.timestamp_ns(r.observe_ns),
    )


def allocation(a: Allocation) -> pb.Allocation:
    message: pb.Allocation = wire.message_from(pb.Allocation, a)
    return message


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
    """Replicas and devices per replica as hub/adoption.py reads them off the services (the
    way a rendered DGD is counted, whatever an older agent computed)."""
    o = d.observation
    shape = adoption.shape(o)
    return pb.Discovered(
        discovered_id=d.discovered_id,
        name=d.ref,
        cluster_id=d.cluster_id,
        namespace=d.namespace,
        dgd_name=d.name,
        state=wire.enum_value(pb.DiscoveredState, d.state),
        gone=d.gone,
        backend_framework=o.backend_framework,
        services=[wire.message_from(pb.DiscoveredService, s) for s in o.services],
        replicas=shape.replicas,
        ready_replicas=shape.ready_replicas,
        imported_args=list(o.imported_args),
        engine_version=o.engine_version,
        device_class=o.device_class,
        devices_per_replica=shape.devices_per_replica,
        workload_id=d.workload_id,
        first_seen=wire.timestamp(d.first_seen),
        last_seen=wire.timestamp(d.last_seen),
        gone_time=wire.timestamp(d.gone_time),
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
    message: pb.ApiToken = wire.message_from(pb.ApiToken, token)
    return message


def audit_record(record: AuditRecord) -> pb.AuditRecord:
    message: pb.AuditRecord = wire.message_from(pb.AuditRecord, record)
    return message
