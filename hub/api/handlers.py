"""The control API's handlers: one method per ControlService RPC, request message in,
response message out, hub.errors out on failure.

The gRPC server and the REST gateway call these through hub/api/control.py's dispatcher
(authenticate, authorize, handle, audit), so every behaviour exists once. Handlers convert
at the edge (hub/api/convert.py) and call hub/service; they hold no state of their own. The
fields an update may change are the contract's (hub/api/contract.py `MUTABLE`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf import empty_pb2
from google.protobuf.message import Message

from hub import access, errors, wire
from hub.api import contract, convert, jsonview, listings, rehearsal, scopes, updates
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
    views,
    workloads,
)
from hub.service.context import ServiceContext
from wingsmith.v1 import control_pb2 as cpb
from wingsmith.v1 import resources_pb2 as pb

MessageT = TypeVar("MessageT", bound=Message)
RequestT = TypeVar("RequestT", bound=Message)
ResponseT = TypeVar("ResponseT", bound=Message)

# A handler's answer: a message, or for a list asked for as JSON (the REST edge) the
# response's REST JSON made straight from the views (hub/api/jsonview.py).
Answer = Message | jsonview.Document

WORKLOAD_MUTABLE = contract.MUTABLE["UpdateWorkload"]
PROJECT_MUTABLE = contract.MUTABLE["UpdateProject"]
DEPLOYMENT_MUTABLE = contract.MUTABLE["UpdateDeployment"]
CLUSTER_MUTABLE = contract.MUTABLE["UpdateCluster"]


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

    @property
    def output(self) -> convert.Output:
        """What the list handlers answer in for this call: messages, or REST JSON."""
        output: convert.Output = getattr(self._caller, "output", convert.MESSAGES)
        return output

    def run_as(
        self,
        principal: access.Principal,
        handler: Callable[[Any], Answer],
        request: Message,
        *,
        output: convert.Output = convert.MESSAGES,
    ) -> Answer:
        """Run `handler` as `principal`; the list handlers answer in `output` (convert.JSON:
        a jsonview.Document; every other handler answers a message whatever is asked)."""
        self._caller.principal = principal
        self._caller.output = output
        try:
            return handler(request)
        finally:
            self._caller.principal = access.ADMIN
            self._caller.output = convert.MESSAGES

    def _shown(self, preview: dryrun.DryRun) -> dryrun.DryRun:
        """A dry run's answer as the caller may read it: a project-scoped token sees the
        changes to its own projects' deployments, and only how many of others' would change
        (preempted, admitted into freed room), not which."""
        return dryrun.visible(preview, self.principal.reads)

    def _list(self, listing: listings.Listing[RequestT, ResponseT], request: RequestT) -> Answer:
        """A List call: one description per list (hub/api/listings.py), run alike, answered
        in this call's output."""
        return listings.answer(listing, self._ctx, request, self.principal, self.output)

    def _rehearsed(self, method: str, request: Message, kind: type[MessageT]) -> MessageT:
        """A validate_only call with no preview of its own: the very handler, run as the
        caller by a twin over the rehearsal's context (hub/api/rehearsal.py)."""

        def call(ctx: ServiceContext, real: Message) -> Message:
            twin = ControlHandlers(ctx)
            answer = twin.run_as(self.principal, getattr(twin, method), real)
            assert isinstance(answer, Message)  # messages: the default output
            return answer

        return rehearsal.rehearse(self._ctx, call, request, kind, shown=self._shown)

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

    def ListProjects(self, request: cpb.ListProjectsRequest) -> Answer:
        return self._list(listings.PROJECTS, request)

    def UpdateProject(self, request: cpb.UpdateProjectRequest) -> pb.Project:
        if request.validate_only:
            return self._rehearsed("UpdateProject", request, pb.Project)
        paths = updates.mask_paths(
            request, request.update_mask, request.project, allowed=PROJECT_MUTABLE
        )
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

    def ListClusters(self, request: cpb.ListClustersRequest) -> Answer:
        return self._list(listings.CLUSTERS, request)

    def UpdateCluster(self, request: cpb.UpdateClusterRequest) -> pb.Cluster:
        if request.validate_only:
            return self._rehearsed("UpdateCluster", request, pb.Cluster)
        paths = updates.mask_paths(
            request, request.update_mask, request.cluster, allowed=CLUSTER_MUTABLE
        )
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
        scopes.reads(self.principal, "workload", request.ref, view.workload.project)
        return convert.workload(view)

    def ListWorkloads(self, request: cpb.ListWorkloadsRequest) -> Answer:
        return self._list(listings.WORKLOADS, request)

    def UpdateWorkload(self, request: cpb.UpdateWorkloadRequest) -> pb.Workload:
        paths = updates.mask_paths(
            request, request.update_mask, request.workload, allowed=WORKLOAD_MUTABLE
        )
        # Only the fields a mask can name: the stored workload, not its deployments' views
        # (those cost O(deployments): seconds for a fleet-wide workload).
        current = convert.workload(views.workload_view(workloads.spec(self._ctx, request.ref), []))
        change = updates.workload_change(current, request.workload, paths)
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

    def ListDeployments(self, request: cpb.ListDeploymentsRequest) -> Answer:
        return self._list(listings.DEPLOYMENTS, request)

    def GetDeployment(self, request: cpb.GetDeploymentRequest) -> pb.Deployment:
        view = deployments.get(self._ctx, request.ref)
        scopes.reads(self.principal, "deployment", request.ref, view.deployment.project)
        return convert.deployment(view)

    def UpdateDeployment(self, request: cpb.UpdateDeploymentRequest) -> pb.Deployment:
        paths = updates.mask_paths(
            request, request.update_mask, request.deployment, allowed=DEPLOYMENT_MUTABLE
        )
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
        scopes.reads(self.principal, "deployment", request.ref, review.view.deployment.project)
        return convert.review(review)

    def GetAppliedObject(self, request: cpb.GetAppliedObjectRequest) -> pb.AppliedObject:
        if self.principal.readable is not None:
            project = deployments.get(self._ctx, request.ref).deployment.project
            scopes.reads(self.principal, "deployment", request.ref, project)
        return convert.applied_object(deployments.applied_object(self._ctx, request.ref))

    # -- discovered ---------------------------------------------------------------------------

    def ListDiscovered(self, request: cpb.ListDiscoveredRequest) -> Answer:
        return self._list(listings.DISCOVERED, request)

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

    def ListReplicas(self, request: cpb.ListReplicasRequest) -> Answer:
        return self._list(listings.REPLICAS, request)

    def GetReplica(self, request: cpb.GetReplicaRequest) -> pb.Replica:
        replica = inventory.get_replica(self._ctx, request.ref)
        if self.principal.readable is not None:
            project = deployments.project_of(self._ctx, replica.replica.deployment_id)
            scopes.reads(self.principal, "replica", request.ref, project)
        return convert.replica(replica)

    def ListAllocations(self, request: cpb.ListAllocationsRequest) -> Answer:
        return self._list(listings.ALLOCATIONS, request)

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

    def ListApiTokens(self, request: cpb.ListApiTokensRequest) -> Answer:
        return self._list(listings.API_TOKENS, request)

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

    def ListAuditRecords(self, request: cpb.ListAuditRecordsRequest) -> Answer:
        return self._list(listings.AUDIT_RECORDS, request)


def _dry_cluster(view: views.ClusterView, preview: dryrun.DryRun) -> pb.Cluster:
    answer = convert.cluster(view)
    answer.dry_run.CopyFrom(convert.dry_run(preview))
    return answer
