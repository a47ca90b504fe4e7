"""The control API's handlers: one method per ControlService RPC, request message in,
response message out, hub.errors out on failure.

Both edges call these through `Dispatcher`: the gRPC server (hub/api/grpc_control.py) and the
REST gateway (hub/api/rest.py), so every behaviour exists once. Handlers convert at the edge
(hub/api/convert.py) and call hub/service; they hold no state of their own.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import descriptor, empty_pb2, field_mask_pb2
from google.protobuf.message import Message
from opentelemetry import trace

from hub import access, errors, tracing, wire
from hub.api import convert, permissions, watch
from hub.api.auth import Authenticator
from hub.filters import AllocationFilter, AuditFilter, DeploymentFilter, ReplicaFilter
from hub.model import AuditRecord
from hub.service import access as access_service
from hub.service import (
    adoption,
    authority,
    clusters,
    deployments,
    dryrun,
    inventory,
    projects,
    rollouts,
    selectors,
    views,
    workloads,
)
from hub.service.context import ServiceContext
from hub.service.workloads import WorkloadChange
from wingsmith.v1 import control_pb2 as cpb
from wingsmith.v1 import resources_pb2 as pb

MessageT = TypeVar("MessageT", bound=Message)

WORKLOAD_MUTABLE = ("replicas", "serving", "placement", "rollout", "priority", "labels")
PROJECT_MUTABLE = ("quotas", "preemptible_by_other_projects", "labels")
CLUSTER_MUTABLE = ("labels",)


class ControlHandlers:
    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        # How many refusals are written one by one (docs/security.md "Refusals, bounded"):
        # one budget for every edge of this hub.
        self.refusals = access_service.RefusalBudget()
        # Who is calling: set by the dispatcher for one call, in the call's worker thread.
        self._caller = threading.local()

    @property
    def principal(self) -> access.Principal:
        principal: access.Principal = getattr(self._caller, "principal", access.ADMIN)
        return principal

    def run_as(
        self, principal: access.Principal, handler: Callable[[Any], Message], request: Message
    ) -> Message:
        self._caller.principal = principal
        try:
            return handler(request)
        finally:
            self._caller.principal = access.ADMIN

    def _require(self, *, project: str = "", cluster_id: str = "", replica: str = "") -> None:
        """A list filter naming a parent that does not exist is NOT_FOUND, not an empty page:
        the same for every filter (an unknown workload_id, deployment_id or replica_id already
        is), so a typo never reads as "nothing there" (docs/rest.md)."""
        if project:
            projects.get(self._ctx, project)
        if cluster_id:
            clusters.require(self._ctx, cluster_id)
        if replica:
            inventory.get_replica(self._ctx, replica)  # a gone replica's id, too

    def _readable(self) -> frozenset[str] | None:
        """The projects whose workloads, deployments, replicas and allocations the caller
        reads; None: every project (hub/access.py)."""
        return self.principal.readable

    def _reads(self, kind: str, ref: str, project: str) -> None:
        """Another project's resource is NOT_FOUND to a scoped token, exactly as one that
        does not exist: it learns nothing of other teams' workloads, not even their names."""
        if not self.principal.reads(project):
            raise errors.NotFound(kind, ref)

    def _reads_filter(self, action: str, project: str) -> None:
        """A list filtered by a project the caller may not read is refused, naming why."""
        if project and not self.principal.reads(project):
            raise errors.PermissionDenied(
                f"{action} of project {project}: {self.principal.describe()} reads only its own"
                " projects' workloads, deployments, replicas and allocations"
            )

    def _shown(self, preview: dryrun.DryRun) -> dryrun.DryRun:
        """A dry run's answer as the caller may read it: a project-scoped token sees the
        changes to its own projects' deployments, and only how many of others' would change
        (preempted, admitted into freed room), not which."""
        return dryrun.visible(preview, self.principal.reads)

    def _rehearsed(self, method: str, request: Message, kind: type[MessageT]) -> MessageT:
        """A validate_only call with no preview of its own (projects, clusters, discovered
        decisions, tokens): the very handler, run as the caller in one transaction that is
        rolled back (dryrun.whole); its answer, with what it would change, and with no
        credential in it (nothing was made: a token or secret shown would be a lie)."""
        real = type(request)()
        real.CopyFrom(request)
        real.validate_only = False  # type: ignore[attr-defined]

        def call(ctx: ServiceContext) -> Message:
            twin = ControlHandlers(ctx)
            return twin.run_as(self.principal, getattr(twin, method), real)

        answer, preview = dryrun.whole(self._ctx, call)
        assert isinstance(answer, kind)
        shown = convert.dry_run(self._shown(preview))
        fields = answer.DESCRIPTOR.fields_by_name
        if "dry_run" in fields:
            answer.dry_run.CopyFrom(shown)  # type: ignore[attr-defined]
        elif "cluster" in fields:
            answer.cluster.dry_run.CopyFrom(shown)  # type: ignore[attr-defined]
        for secret in ("token", "secret"):
            field = fields.get(secret)
            if field is not None and field.type == field.TYPE_STRING:
                answer.ClearField(secret)
        return answer

    # -- projects -----------------------------------------------------------------------------

    def CreateProject(self, request: cpb.CreateProjectRequest) -> pb.Project:
        if request.validate_only:
            return self._rehearsed("CreateProject", request, pb.Project)
        view = projects.create(
            self._ctx,
            name=request.project.name,
            quotas=dict(request.project.quotas),
            preemptible_by_other_projects=request.project.preemptible_by_other_projects,
            labels=dict(request.project.labels),
        )
        return convert.project(view)

    def GetProject(self, request: cpb.GetProjectRequest) -> pb.Project:
        return convert.project(projects.get(self._ctx, request.name))

    def ListProjects(self, request: cpb.ListProjectsRequest) -> cpb.ListProjectsResponse:
        found, token = projects.list_page(
            self._ctx,
            page_size=request.page_size,
            page_token=request.page_token,
            label_selector=request.label_selector,
        )
        return cpb.ListProjectsResponse(
            projects=[convert.project(p) for p in found], next_page_token=token
        )

    def UpdateProject(self, request: cpb.UpdateProjectRequest) -> pb.Project:
        if request.validate_only:
            return self._rehearsed("UpdateProject", request, pb.Project)
        paths = _mask_paths(request, request.update_mask, request.project, allowed=PROJECT_MUTABLE)
        name = request.name or request.project.name
        if request.project.name and request.project.name != name:
            raise errors.InvalidArgument("project.name", "cannot be changed")
        view = projects.get(self._ctx, name)
        if "quotas" in paths:
            view = projects.set_quotas(self._ctx, name=name, quotas=dict(request.project.quotas))
        if "preemptible_by_other_projects" in paths:
            view = projects.set_preemption_policy(
                self._ctx,
                name=name,
                preemptible_by_other_projects=request.project.preemptible_by_other_projects,
            )
        if "labels" in paths:
            view = projects.set_labels(self._ctx, name=name, labels=dict(request.project.labels))
        return convert.project(view)

    def DeleteProject(self, request: cpb.DeleteProjectRequest) -> empty_pb2.Empty:
        if request.validate_only:
            return self._rehearsed("DeleteProject", request, empty_pb2.Empty)
        projects.delete(self._ctx, request.name)
        return empty_pb2.Empty()

    # -- clusters -----------------------------------------------------------------------------

    def CreateCluster(self, request: cpb.CreateClusterRequest) -> cpb.CreateClusterResponse:
        if request.validate_only:
            return self._rehearsed("CreateCluster", request, cpb.CreateClusterResponse)
        view, token = clusters.create(
            self._ctx, cluster_id=request.cluster.cluster_id, labels=dict(request.cluster.labels)
        )
        return cpb.CreateClusterResponse(cluster=convert.cluster(view), token=token)

    def GetCluster(self, request: cpb.GetClusterRequest) -> pb.Cluster:
        return convert.cluster(clusters.get(self._ctx, request.cluster_id))

    def ListClusters(self, request: cpb.ListClustersRequest) -> cpb.ListClustersResponse:
        found, token = clusters.list_page(
            self._ctx,
            page_size=request.page_size,
            page_token=request.page_token,
            label_selector=request.label_selector,
        )
        return cpb.ListClustersResponse(
            clusters=[convert.cluster(c) for c in found], next_page_token=token
        )

    def UpdateCluster(self, request: cpb.UpdateClusterRequest) -> pb.Cluster:
        if request.validate_only:
            return self._rehearsed("UpdateCluster", request, pb.Cluster)
        paths = _mask_paths(request, request.update_mask, request.cluster, allowed=CLUSTER_MUTABLE)
        cluster_id = request.cluster_id or request.cluster.cluster_id
        if request.cluster.cluster_id and request.cluster.cluster_id != cluster_id:
            raise errors.InvalidArgument("cluster.cluster_id", "cannot be changed")
        if "labels" in paths:
            labels = dict(request.cluster.labels)
            return convert.cluster(
                clusters.set_labels(self._ctx, cluster_id=cluster_id, labels=labels)
            )
        return convert.cluster(clusters.get(self._ctx, cluster_id))

    def DeleteCluster(self, request: cpb.DeleteClusterRequest) -> empty_pb2.Empty:
        if request.validate_only:
            return self._rehearsed("DeleteCluster", request, empty_pb2.Empty)
        clusters.delete(self._ctx, request.cluster_id)
        return empty_pb2.Empty()

    def RotateClusterToken(
        self, request: cpb.RotateClusterTokenRequest
    ) -> cpb.RotateClusterTokenResponse:
        if request.validate_only:
            return self._rehearsed("RotateClusterToken", request, cpb.RotateClusterTokenResponse)
        view, token = clusters.rotate_token(
            self._ctx, request.cluster_id, revoke_certificates=request.revoke_certificates
        )
        return cpb.RotateClusterTokenResponse(cluster=convert.cluster(view), token=token)

    def CordonCluster(self, request: cpb.CordonClusterRequest) -> pb.Cluster:
        how = {"node": request.node, "device_class": request.device_class}
        if request.validate_only:
            return _dry_cluster(*clusters.preview_cordon(self._ctx, request.cluster_id, **how))
        return convert.cluster(clusters.cordon(self._ctx, request.cluster_id, **how))

    def UncordonCluster(self, request: cpb.UncordonClusterRequest) -> pb.Cluster:
        how = {"node": request.node, "device_class": request.device_class}
        if request.validate_only:
            return _dry_cluster(*clusters.preview_uncordon(self._ctx, request.cluster_id, **how))
        return convert.cluster(clusters.uncordon(self._ctx, request.cluster_id, **how))

    def DrainCluster(self, request: cpb.DrainClusterRequest) -> pb.Cluster:
        if request.validate_only:
            return _dry_cluster(*clusters.preview_drain(self._ctx, request.cluster_id))
        return convert.cluster(clusters.drain(self._ctx, request.cluster_id))

    # -- workloads ----------------------------------------------------------------------------

    def CreateWorkload(self, request: cpb.CreateWorkloadRequest) -> pb.Workload:
        spec = convert.workload_spec(request.workload)
        if request.validate_only:
            return convert.dry_run_workload(self._shown(workloads.preview_create(self._ctx, spec)))
        return convert.workload(workloads.create(self._ctx, spec))

    def GetWorkload(self, request: cpb.GetWorkloadRequest) -> pb.Workload:
        view = workloads.get(self._ctx, request.ref)
        self._reads("workload", request.ref, view.workload.project)
        return convert.workload(view)

    def ListWorkloads(self, request: cpb.ListWorkloadsRequest) -> cpb.ListWorkloadsResponse:
        self._require(project=request.project)
        self._reads_filter("ListWorkloads", request.project)
        found, token = workloads.list_page(
            self._ctx,
            project=request.project,
            page_size=request.page_size,
            page_token=request.page_token,
            projects=self._readable(),
            label_selector=request.label_selector,
        )
        return cpb.ListWorkloadsResponse(
            workloads=[convert.workload(w) for w in found], next_page_token=token
        )

    def UpdateWorkload(self, request: cpb.UpdateWorkloadRequest) -> pb.Workload:
        paths = _mask_paths(
            request, request.update_mask, request.workload, allowed=WORKLOAD_MUTABLE
        )
        # Only the fields a mask can name: the stored workload, not its deployments' views
        # (those cost O(deployments): seconds for a fleet-wide workload).
        current = convert.workload(views.workload_view(workloads.spec(self._ctx, request.ref), []))
        merged = pb.Workload()
        merged.CopyFrom(current)
        mask = field_mask_pb2.FieldMask(paths=paths)
        # AIP-134: a path that names a message field replaces it whole, so a message the
        # request leaves out is cleared (REST: `"kv_cache": null`, `"failover": null`). A merge
        # would keep the old one and answer 200 for a change it never made.
        mask.MergeMessage(
            _with_parents(request.workload, paths),
            merged,
            replace_message_field=True,
            replace_repeated_field=True,
        )
        touched = {path.split(".", 1)[0] for path in paths}
        change = WorkloadChange(
            replicas=merged.replicas if "replicas" in touched else None,
            serving=wire.serving_from_proto(merged.serving) if "serving" in touched else None,
            placement=(
                convert.placement_from_proto(merged.placement) if "placement" in touched else None
            ),
            rollout_policy=(
                convert.rollout_policy(merged.rollout) if "rollout" in touched else None
            ),
            priority=(
                wire.enum_word(pb.Priority, merged.priority) if "priority" in touched else None
            ),
            labels=dict(merged.labels) if "labels" in touched else None,
        )
        if request.validate_only:
            return convert.dry_run_workload(
                self._shown(workloads.preview_update(self._ctx, request.ref, change))
            )
        return convert.workload(workloads.update(self._ctx, request.ref, change))

    def DeleteWorkload(self, request: cpb.DeleteWorkloadRequest) -> cpb.DeleteWorkloadResponse:
        if request.validate_only:
            preview = self._shown(workloads.preview_delete(self._ctx, request.ref))
            return cpb.DeleteWorkloadResponse(dry_run=convert.dry_run(preview))
        workloads.delete(self._ctx, request.ref)
        return cpb.DeleteWorkloadResponse()

    def ResumeWorkloadRollout(self, request: cpb.ResumeWorkloadRolloutRequest) -> pb.Workload:
        if request.validate_only:
            preview = self._shown(rollouts.preview_resume(self._ctx, request.ref))
            return convert.dry_run_workload(preview)
        return convert.workload(rollouts.resume(self._ctx, request.ref))

    def PauseWorkloadRollout(self, request: cpb.PauseWorkloadRolloutRequest) -> pb.Workload:
        if request.validate_only:
            preview = self._shown(rollouts.preview_pause(self._ctx, request.ref))
            return convert.dry_run_workload(preview)
        return convert.workload(rollouts.pause(self._ctx, request.ref))

    def AbortWorkloadRollout(self, request: cpb.AbortWorkloadRolloutRequest) -> pb.Workload:
        if request.validate_only:
            preview = self._shown(rollouts.preview_abort(self._ctx, request.ref))
            return convert.dry_run_workload(preview)
        return convert.workload(rollouts.abort(self._ctx, request.ref))

    # -- deployments --------------------------------------------------------------------------

    def ListDeployments(self, request: cpb.ListDeploymentsRequest) -> cpb.ListDeploymentsResponse:
        self._require(cluster_id=request.cluster_id)
        found, token = deployments.list_page(
            self._ctx,
            where=DeploymentFilter(
                workload_id=request.workload_id,
                cluster_id=request.cluster_id,
                projects=self._readable(),
                labels=selectors.parse(request.label_selector),
            ),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return cpb.ListDeploymentsResponse(
            deployments=[convert.deployment(d) for d in found], next_page_token=token
        )

    def GetDeployment(self, request: cpb.GetDeploymentRequest) -> pb.Deployment:
        view = deployments.get(self._ctx, request.ref)
        self._reads("deployment", request.ref, view.deployment.project)
        return convert.deployment(view)

    def UpdateDeployment(self, request: cpb.UpdateDeploymentRequest) -> pb.Deployment:
        paths = _mask_paths(request, request.update_mask, request.deployment, allowed=("enabled",))
        if "enabled" not in paths:
            answer = convert.deployment(deployments.get(self._ctx, request.ref))
            if request.validate_only:
                answer.dry_run.summary = dryrun.NO_CHANGE
            return answer
        enabled = request.deployment.enabled
        if request.validate_only:
            view, preview = deployments.preview_set_enabled(self._ctx, request.ref, enabled=enabled)
            answer = convert.deployment(view)
            answer.dry_run.CopyFrom(convert.dry_run(self._shown(preview)))
            return answer
        return convert.deployment(deployments.set_enabled(self._ctx, request.ref, enabled=enabled))

    def SetDeploymentAuthority(self, request: cpb.SetDeploymentAuthorityRequest) -> pb.Deployment:
        word = wire.enum_word(pb.Authority, request.authority)
        accept = request.accept_differences
        if request.validate_only:
            view, preview = authority.preview_set_authority(
                self._ctx, request.ref, authority=word, accept_differences=accept
            )
            answer = convert.deployment(view)
            answer.dry_run.CopyFrom(convert.dry_run(self._shown(preview)))
            return answer
        view = authority.set_authority(
            self._ctx, request.ref, authority=word, accept_differences=accept
        )
        return convert.deployment(view)

    def ReviewDeployment(self, request: cpb.ReviewDeploymentRequest) -> cpb.DeploymentReview:
        review = authority.review(self._ctx, request.ref)
        self._reads("deployment", request.ref, review.view.deployment.project)
        return convert.review(review)

    def GetAppliedObject(self, request: cpb.GetAppliedObjectRequest) -> pb.AppliedObject:
        if self._readable() is not None:
            project = deployments.get(self._ctx, request.ref).deployment.project
            self._reads("deployment", request.ref, project)
        return convert.applied_object(deployments.applied_object(self._ctx, request.ref))

    # -- discovered ---------------------------------------------------------------------------

    def ListDiscovered(self, request: cpb.ListDiscoveredRequest) -> cpb.ListDiscoveredResponse:
        self._require(cluster_id=request.cluster_id)
        found, token = adoption.list_page(
            self._ctx,
            cluster_id=request.cluster_id,
            include_ignored=request.include_ignored,
            page_size=request.page_size,
            page_token=request.page_token,
            label_selector=request.label_selector,
        )
        return cpb.ListDiscoveredResponse(
            discovered=[convert.discovered(d) for d in found], next_page_token=token
        )

    def GetDiscovered(self, request: cpb.GetDiscoveredRequest) -> pb.Discovered:
        return convert.discovered(adoption.get(self._ctx, request.ref))

    def TrackDiscovered(self, request: cpb.TrackDiscoveredRequest) -> pb.Discovered:
        if request.validate_only:
            return self._rehearsed("TrackDiscovered", request, pb.Discovered)
        return convert.discovered(adoption.track(self._ctx, request.ref))

    def IgnoreDiscovered(self, request: cpb.IgnoreDiscoveredRequest) -> pb.Discovered:
        if request.validate_only:
            return self._rehearsed("IgnoreDiscovered", request, pb.Discovered)
        return convert.discovered(adoption.ignore(self._ctx, request.ref))

    def PromoteDiscovered(self, request: cpb.PromoteDiscoveredRequest) -> pb.Workload:
        how = {
            "project": request.project,
            "workload_name": request.workload_name,
            "device_class": request.device_class,
        }
        if request.validate_only:
            preview = adoption.preview_promote(self._ctx, request.ref, **how)
            return convert.dry_run_workload(self._shown(preview))
        return convert.workload(adoption.promote(self._ctx, request.ref, **how))

    # -- observations -------------------------------------------------------------------------

    def ListReplicas(self, request: cpb.ListReplicasRequest) -> cpb.ListReplicasResponse:
        self._require(cluster_id=request.cluster_id)
        found, token = inventory.list_replicas(
            self._ctx,
            where=ReplicaFilter(
                deployment_id=request.deployment_id,
                cluster_id=request.cluster_id,
                projects=self._readable(),
                labels=selectors.parse(request.label_selector),
            ),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return cpb.ListReplicasResponse(
            replicas=[convert.replica(r) for r in found], next_page_token=token
        )

    def GetReplica(self, request: cpb.GetReplicaRequest) -> pb.Replica:
        replica = inventory.get_replica(self._ctx, request.ref)
        if self._readable() is not None:
            project = deployments.project_of(self._ctx, replica.replica.deployment_id)
            self._reads("replica", request.ref, project)
        return convert.replica(replica)

    def ListAllocations(self, request: cpb.ListAllocationsRequest) -> cpb.ListAllocationsResponse:
        self._require(
            project=request.project, cluster_id=request.cluster_id, replica=request.replica_id
        )
        self._reads_filter("ListAllocations", request.project)
        found, token = inventory.list_allocations(
            self._ctx,
            where=AllocationFilter(
                replica_id=request.replica_id,
                deployment_id=request.deployment_id,
                project=request.project,
                cluster_id=request.cluster_id,
                projects=self._readable(),
                labels=selectors.parse(request.label_selector),
            ),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return cpb.ListAllocationsResponse(
            allocations=[convert.allocation(a) for a in found], next_page_token=token
        )

    # -- tokens and audit ---------------------------------------------------------------------

    def CreateApiToken(self, request: cpb.CreateApiTokenRequest) -> cpb.CreateApiTokenResponse:
        if request.validate_only:
            return self._rehearsed("CreateApiToken", request, cpb.CreateApiTokenResponse)
        token, secret = access_service.create_token(
            self._ctx,
            name=request.token.name,
            role=wire.enum_word(pb.ApiRole, request.token.role),
            project_names=list(request.token.projects),
            created_by=self.principal.actor,
        )
        return cpb.CreateApiTokenResponse(token=convert.api_token(token), secret=secret)

    def ListApiTokens(self, request: cpb.ListApiTokensRequest) -> cpb.ListApiTokensResponse:
        found, token = access_service.list_tokens(
            self._ctx,
            page_size=request.page_size,
            page_token=request.page_token,
            include_revoked=request.include_revoked,
        )
        return cpb.ListApiTokensResponse(
            tokens=[convert.api_token(t) for t in found], next_page_token=token
        )

    def RevokeApiToken(self, request: cpb.RevokeApiTokenRequest) -> pb.ApiToken:
        if request.validate_only:
            return self._rehearsed("RevokeApiToken", request, pb.ApiToken)
        return convert.api_token(access_service.revoke_token(self._ctx, request.name))

    def Watch(self, request: cpb.WatchRequest) -> Message:
        """Watch streams: both edges serve it through `stream_dispatcher` (hub/api/watch.py),
        never as a unary call; a caller reaching this asked for it the wrong way."""
        raise errors.InvalidArgument(
            "", "Watch is a server-streaming call: use gRPC streaming or GET /v1/watch (SSE)"
        )

    def ListAuditRecords(
        self, request: cpb.ListAuditRecordsRequest
    ) -> cpb.ListAuditRecordsResponse:
        where = AuditFilter(
            actor=request.actor,
            action=request.action,
            target=request.target,
            outcome=request.outcome,
            since=request.since.ToNanoseconds() / 1e9 if request.HasField("since") else None,
            until=request.until.ToNanoseconds() / 1e9 if request.HasField("until") else None,
        )
        found, token = access_service.list_audit(
            self._ctx, where=where, page_size=request.page_size, page_token=request.page_token
        )
        return cpb.ListAuditRecordsResponse(
            records=[convert.audit_record(r) for r in found], next_page_token=token
        )


Dispatch = Callable[[descriptor.MethodDescriptor, Message, Mapping[str, str]], Awaitable[Message]]


# The dashboard's entry: the caller is a principal its session already proved.
PrincipalDispatch = Callable[
    [descriptor.MethodDescriptor, Message, access.Principal], Awaitable[Message]
]


def dispatcher(
    handlers: ControlHandlers, auth: Authenticator, ctx: ServiceContext, *, edge: str
) -> Dispatch:
    """The one entry both edges call: authenticate, then `run` (authorize, handle, audit).
    `edge` ("grpc", "rest") is recorded in the audit log; each edge has its own dispatcher."""

    def call(
        method: descriptor.MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Message:
        # Unaudited when refused: there is no one to name.
        principal = auth.check_for_dispatch(metadata)
        return run(handlers, ctx, method, request, principal, edge=edge)

    async def dispatch(
        method: descriptor.MethodDescriptor, request: Message, metadata: Mapping[str, str]
    ) -> Message:
        # One span per call, continuing the caller's trace (W3C traceparent in its metadata or
        # headers); the worker thread runs in a copy of this context, so what the call does
        # (its admission pass, the change it publishes) belongs to it (hub/tracing.py).
        with tracing.tracer().start_as_current_span(
            f"{method.containing_service.full_name}/{method.name}",
            context=tracing.extracted(metadata),
            kind=trace.SpanKind.SERVER,
            attributes={
                "rpc.service": method.containing_service.full_name,
                "rpc.method": method.name,
                "wingsmith.edge": edge,
            },
        ):
            # In a worker thread: the event loop keeps serving the agents' streams while the
            # call looks its token up, reads, decides and commits (the store serializes
            # writers; reads never wait).
            result: Message = await asyncio.to_thread(call, method, request, metadata)
            return result

    return dispatch


# A server-streaming call: (method, request, metadata, write) -> until it ends; `write` sends
# one response message. Raises hub.errors to end with an error status.
StreamDispatch = Callable[
    [
        descriptor.MethodDescriptor,
        Message,
        Mapping[str, str],
        Callable[[Message], Awaitable[None]],
    ],
    Awaitable[None],
]


def stream_dispatcher(feed: watch.WatchFeed, auth: Authenticator) -> StreamDispatch:
    """The streaming entry of both edges: authenticate and authorize as `run` does (a read:
    not audited), then serve the stream from the watch feed."""

    async def dispatch(
        method: descriptor.MethodDescriptor,
        request: Message,
        metadata: Mapping[str, str],
        write: Callable[[Message], Awaitable[None]],
    ) -> None:
        principal = await asyncio.to_thread(auth.check_for_dispatch, metadata)
        rule = permissions.rule_for(method.name)
        _refuse_nul(request)
        access.authorize(principal, action=method.name, needs=rule.needs, projects=None)
        if method.name != "Watch" or not isinstance(request, cpb.WatchRequest):
            raise errors.WingsmithError(f"{method.full_name} is not implemented")
        await feed.drive(request, principal, write)

    return dispatch


@dataclass(frozen=True)
class PrincipalWatch:
    """Watch for an edge that authenticates its callers itself (the dashboard's session):
    `drive` authorizes as `stream_dispatcher` does, then serves the stream; `head` is the last
    revision handed out (a page read now resumes from it)."""

    drive: Callable[
        [cpb.WatchRequest, access.Principal, Callable[[Message], Awaitable[None]]],
        Awaitable[None],
    ]
    head: Callable[[], Awaitable[int]]


def principal_watch(feed: watch.WatchFeed) -> PrincipalWatch:
    async def drive(
        request: cpb.WatchRequest,
        principal: access.Principal,
        write: Callable[[Message], Awaitable[None]],
    ) -> None:
        rule = permissions.rule_for("Watch")
        _refuse_nul(request)
        access.authorize(principal, action="Watch", needs=rule.needs, projects=None)
        await feed.drive(request, principal, write)

    return PrincipalWatch(drive=drive, head=feed.head)


def principal_dispatcher(
    handlers: ControlHandlers, ctx: ServiceContext, *, edge: str
) -> PrincipalDispatch:
    """For an edge that authenticates its callers itself (the dashboard's signed session):
    the same `run` as the API edges, so it can do nothing its caller's role does not allow."""

    async def dispatch(
        method: descriptor.MethodDescriptor, request: Message, principal: access.Principal
    ) -> Message:
        result: Message = await asyncio.to_thread(
            run, handlers, ctx, method, request, principal, edge=edge
        )
        return result

    return dispatch


def run(
    handlers: ControlHandlers,
    ctx: ServiceContext,
    method: descriptor.MethodDescriptor,
    request: Message,
    principal: access.Principal,
    *,
    edge: str,
) -> Message:
    """Authorize (hub/access.py), run the method's handler, and audit the call when it
    changes something, allowed or refused."""
    rule = permissions.rule_for(method.name)
    handler: Callable[[Any], Message] | None = getattr(handlers, method.name, None)
    outcome, message = "OK", ""
    try:
        _refuse_nul(request)
        projects = None
        if rule.needs == access.NEEDS_PROJECT and principal.role != access.ROLE_ADMIN:
            assert rule.project is not None
            projects = access_service.projects_of(ctx, rule.project(request))
        access.authorize(principal, action=method.name, needs=rule.needs, projects=projects)
        if handler is None:
            raise errors.WingsmithError(f"{method.full_name} is not implemented")
        return handlers.run_as(principal, handler, request)
    except errors.WingsmithError as e:
        outcome, message = e.grpc_code.name, e.message
        raise
    except Exception:
        outcome, message = "INTERNAL", "internal error; see the hub's log"
        raise
    finally:
        # A validate_only call changes nothing: like a read, it leaves no audit record
        # (docs/security.md "Audit log").
        if rule.mutating and not _validate_only(request):
            entry = AuditRecord(
                time=ctx.clock(),
                actor=principal.actor,
                role=principal.role,
                edge=edge,
                action=method.name,
                target=_target(rule, request),
                outcome=outcome,
                message=message,
            )
            if outcome == "OK":
                access_service.record(ctx, entry)
            else:
                access_service.record_refusal(ctx, handlers.refusals, entry)


# An edge's report of a call it refused before dispatch (its request could not be read or
# parsed): the method, the request's metadata, the error it answered.
Refused = Callable[
    [descriptor.MethodDescriptor, Mapping[str, str], errors.WingsmithError], Awaitable[None]
]


def refusal_recorder(
    handlers: ControlHandlers, auth: Authenticator, ctx: ServiceContext, *, edge: str
) -> Refused:
    """For the edges: audit a mutating call refused while its request was read or parsed
    (malformed JSON, an unknown field or query parameter, a bad enum word, bytes that are not
    the method's message), like a call refused by its handler, within the same budget. The
    caller was authenticated before its body was read; one that was not is not recorded."""

    def note(
        method: descriptor.MethodDescriptor,
        metadata: Mapping[str, str],
        error: errors.WingsmithError,
    ) -> None:
        rule = permissions.rule_for(method.name)
        if not rule.mutating:
            return
        try:
            principal = auth.check_for_dispatch(metadata)
        except errors.WingsmithError:
            return  # names no one (docs/security.md)
        entry = AuditRecord(
            time=ctx.clock(),
            actor=principal.actor,
            role=principal.role,
            edge=edge,
            action=method.name,
            target=rule.kind,  # the request was not read: what it named is unknown
            outcome=error.grpc_code.name,
            message=error.message,
        )
        access_service.record_refusal(ctx, handlers.refusals, entry)

    async def record(
        method: descriptor.MethodDescriptor,
        metadata: Mapping[str, str],
        error: errors.WingsmithError,
    ) -> None:
        await asyncio.to_thread(note, method, metadata, error)

    return record


# C0 control characters and DEL. Nothing a caller names (a resource, a label, a model, a
# node) has a use for one: a CR/LF once reached the rendered DGD through serving.model.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Free text: an engine argument may be a multi-line value (a chat template), so a tab or a
# line feed is kept there; every other control character is refused there too.
_FREE_TEXT = re.compile(r"(^|\.)engine_args\[\d+\]\Z")
_FREE_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _dry_cluster(view: views.ClusterView, preview: dryrun.DryRun) -> pb.Cluster:
    answer = convert.cluster(view)
    answer.dry_run.CopyFrom(convert.dry_run(preview))
    return answer


def _refuse_nul(request: Message) -> None:
    """InvalidArgument naming the first string field (map keys included) that holds a NUL
    or another control character (docs/rest.md "String fields"). PostgreSQL cannot store a
    NUL in a text column (psycopg raises DataError), a NUL in a name would be cut short by C
    code further down (Kubernetes, the engines), and a CR/LF or tab in a name, a label or a
    model reference has no meaning but a forged line: refused here, on every backend, before
    anything is looked up or written."""
    for path, text in _strings(request, ""):
        if "\x00" in text:
            raise errors.InvalidArgument(path, "must not contain a NUL character (\\u0000)")
        pattern = _FREE_TEXT_CONTROL if _FREE_TEXT.search(path) else _CONTROL
        found = pattern.search(text)
        if found is not None:
            raise errors.InvalidArgument(
                path,
                f"must not contain a control character (found {found.group()!r} at position"
                f" {found.start()})",
            )


def _strings(message: Message, prefix: str) -> Iterator[tuple[str, str]]:
    """Every string set in `message`, map keys included, with its field path."""
    for field, value in message.ListFields():
        path = f"{prefix}.{field.name}" if prefix else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                where = f"{path}[{key!r}]"
                if isinstance(key, str):
                    yield where, key
                yield from _strings_in(item, where)
        elif field.is_repeated:
            for index, item in enumerate(value):
                yield from _strings_in(item, f"{path}[{index}]")
        else:
            yield from _strings_in(value, path)


def _strings_in(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Message):
        yield from _strings(value, path)
    elif isinstance(value, str):
        yield path, value


def _with_parents(message: MessageT, paths: Sequence[str]) -> MessageT:
    """A copy of `message` with the parents of every path present. protobuf's merge skips a
    path whose parent message the source lacks, so `serving.kv_cache` with no `serving` in
    the request would keep the old KV cache instead of clearing it (the paths are valid for
    the descriptor: every parent is a singular message)."""
    copy = type(message)()
    copy.CopyFrom(message)
    for path in paths:
        node: Message = copy
        for name in path.split(".")[:-1]:
            node = getattr(node, name)
            node.SetInParent()
    return copy


def _validate_only(request: Message) -> bool:
    """The request asks for a dry run (AIP-163 validate_only)."""
    return any(
        field.name == "validate_only" and bool(value) for field, value in request.ListFields()
    )


def _target(rule: permissions.Rule, request: Message) -> str:
    try:
        # A refused call is audited with what it named, NUL shown escaped (no text column of
        # PostgreSQL can hold one: the record would be lost with the refusal).
        return rule.target(request)[:256].replace("\x00", "\\x00")
    except (AttributeError, ValueError):
        return rule.kind


def _mask_paths(
    request: Message,
    mask: field_mask_pb2.FieldMask,
    resource: Message,
    *,
    allowed: tuple[str, ...],
) -> list[str]:
    """The update's paths: exactly the request's update_mask, which must be present.

    AIP-134 would infer a missing mask from the populated fields, but protobuf cannot tell a
    field set to its default (enabled: false, replicas: 0, quotas: {}) from one left out, so an
    inferred mask silently drops exactly those changes. REST always sends a mask (inferred from
    the JSON body, where presence is visible: hub/api/rest.py); a gRPC caller names the fields.
    A present but empty mask changes nothing and returns the resource.
    """
    if not request.HasField("update_mask"):
        example = allowed[0]
        raise errors.InvalidArgument(
            "update_mask",
            f'required: name the fields to change, e.g. "update_mask": "{example}"'
            f" (a field set to its default, such as false or 0, cannot be told from one left"
            f" out); mutable fields: {', '.join(allowed)}",
        )
    paths = list(mask.paths)
    for path in paths:
        if path.split(".", 1)[0] not in allowed:
            raise errors.InvalidArgument(
                "update_mask",
                f"{path!r} cannot be changed; mutable fields: {', '.join(allowed)}",
            )
    probe = field_mask_pb2.FieldMask(paths=paths)
    descriptor_of: Any = resource.DESCRIPTOR  # upb and pure-Python descriptors differ in type
    if not probe.IsValidForDescriptor(descriptor_of):
        raise errors.InvalidArgument("update_mask", f"unknown field path in {paths}")
    return paths
