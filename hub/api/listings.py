"""The control API's List calls, one description each: the response, the repeated field that
holds the page, how one item is converted, the service call reading one page, and what the
caller must be allowed first. `answer` runs any of them the same way, so every list checks its
parents, scopes and paging alike (docs/rest.md "List filters").

Called by the handlers (hub/api/handlers.py): each List method there is one line naming its
description here. Reads only; nothing here changes state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar

from google.protobuf.message import Message

from hub import access
from hub.api import convert, jsonview, scopes
from hub.filters import AllocationFilter, AuditFilter, DeploymentFilter, ReplicaFilter
from hub.service import access as access_service
from hub.service import adoption, clusters, deployments, inventory, projects, selectors, workloads
from hub.service.context import ServiceContext
from wingsmith.v1 import control_pb2 as cpb

RequestT = TypeVar("RequestT", bound=Message)
ResponseT = TypeVar("ResponseT", bound=Message)


class Page(TypedDict):
    """Which page a List request asks for, as every service's list call takes it."""

    page_size: int
    page_token: str


# (service context, request, caller, page) -> (the page's items, next_page_token)
PageCall = Callable[[ServiceContext, RequestT, access.Principal, Page], tuple[Sequence[Any], str]]


@dataclass(frozen=True)
class Listing(Generic[RequestT, ResponseT]):
    method: str
    response: type[ResponseT]
    # The response's repeated field, and the converter of one item into it, in an output
    # (hub/api/convert.py: a message, or its REST JSON straight from the view).
    items: str
    item: Callable[[Any, convert.Output], Any]
    page: PageCall[RequestT]
    # scopes.require's keywords -> the request fields naming a parent that must exist
    # (NOT_FOUND, not an empty page, for a typo).
    parents: tuple[tuple[str, str], ...] = ()
    # The request's `project` filter must be one the caller reads (PERMISSION_DENIED).
    project_filter: bool = False


def answer(
    listing: Listing[RequestT, ResponseT],
    ctx: ServiceContext,
    request: RequestT,
    principal: access.Principal,
    output: convert.Output = convert.MESSAGES,
) -> ResponseT | jsonview.Document:
    """One page of `listing` for `principal`: its parents must exist, then its project filter
    must be readable, then the service reads the page; answered in `output` (convert.JSON: a
    jsonview.Document, the REST JSON straight from the views)."""
    # Every List request has page_size and page_token (and `project` where project_filter
    # says so); the message types share no base that says it.
    fields: Any = request
    if listing.parents:
        scopes.require(ctx, **{key: getattr(fields, field) for key, field in listing.parents})
    if listing.project_filter:
        scopes.reads_filter(principal, listing.method, fields.project)
    page = Page(page_size=fields.page_size, page_token=fields.page_token)
    found, token = listing.page(ctx, request, principal, page)
    return respond(listing, found, token, output)


def respond(
    listing: Listing[RequestT, ResponseT],
    found: Sequence[Any],
    token: str,
    output: convert.Output = convert.MESSAGES,
) -> ResponseT | jsonview.Document:
    """The response of a page read: its items converted in `output`, and the next token."""
    fields = {listing.items: [listing.item(x, output) for x in found], "next_page_token": token}
    if output is convert.JSON:
        return jsonview.document(listing.response, **fields)
    return listing.response(**fields)


def _projects(
    ctx: ServiceContext, r: cpb.ListProjectsRequest, _: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    return projects.list_page(ctx, label_selector=r.label_selector, **page)


def _clusters(
    ctx: ServiceContext, r: cpb.ListClustersRequest, _: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    return clusters.list_page(ctx, label_selector=r.label_selector, **page)


def _workloads(
    ctx: ServiceContext, r: cpb.ListWorkloadsRequest, who: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    return workloads.list_page(
        ctx,
        project=r.project,
        projects=who.readable,
        label_selector=r.label_selector,
        **page,
    )


def _deployments(
    ctx: ServiceContext, r: cpb.ListDeploymentsRequest, who: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    where = DeploymentFilter(
        workload_id=r.workload_id,
        cluster_id=r.cluster_id,
        projects=who.readable,
        labels=selectors.parse(r.label_selector),
    )
    return deployments.list_page(ctx, where=where, **page)


def _discovered(
    ctx: ServiceContext, r: cpb.ListDiscoveredRequest, _: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    return adoption.list_page(
        ctx,
        cluster_id=r.cluster_id,
        include_ignored=r.include_ignored,
        label_selector=r.label_selector,
        **page,
    )


def _replicas(
    ctx: ServiceContext, r: cpb.ListReplicasRequest, who: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    where = ReplicaFilter(
        deployment_id=r.deployment_id,
        cluster_id=r.cluster_id,
        projects=who.readable,
        labels=selectors.parse(r.label_selector),
    )
    return inventory.list_replicas(ctx, where=where, **page)


def _allocations(
    ctx: ServiceContext, r: cpb.ListAllocationsRequest, who: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    where = AllocationFilter(
        replica_id=r.replica_id,
        deployment_id=r.deployment_id,
        project=r.project,
        cluster_id=r.cluster_id,
        projects=who.readable,
        labels=selectors.parse(r.label_selector),
    )
    return inventory.list_allocations(ctx, where=where, **page)


def _api_tokens(
    ctx: ServiceContext, r: cpb.ListApiTokensRequest, _: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    return access_service.list_tokens(ctx, include_revoked=r.include_revoked, **page)


def _audit_records(
    ctx: ServiceContext, r: cpb.ListAuditRecordsRequest, _: access.Principal, page: Page
) -> tuple[Sequence[Any], str]:
    where = AuditFilter(
        actor=r.actor,
        action=r.action,
        target=r.target,
        outcome=r.outcome,
        since=r.since.ToNanoseconds() / 1e9 if r.HasField("since") else None,
        until=r.until.ToNanoseconds() / 1e9 if r.HasField("until") else None,
    )
    return access_service.list_audit(ctx, where=where, **page)


PROJECTS = Listing(
    "ListProjects", cpb.ListProjectsResponse, "projects", convert.project_as, _projects
)
CLUSTERS = Listing(
    "ListClusters", cpb.ListClustersResponse, "clusters", convert.cluster_as, _clusters
)
WORKLOADS = Listing(
    "ListWorkloads",
    cpb.ListWorkloadsResponse,
    "workloads",
    convert.workload_as,
    _workloads,
    parents=(("project", "project"),),
    project_filter=True,
)
DEPLOYMENTS = Listing(
    "ListDeployments",
    cpb.ListDeploymentsResponse,
    "deployments",
    convert.deployment_as,
    _deployments,
    parents=(("cluster_id", "cluster_id"),),
)
DISCOVERED = Listing(
    "ListDiscovered",
    cpb.ListDiscoveredResponse,
    "discovered",
    convert.discovered_as,
    _discovered,
    parents=(("cluster_id", "cluster_id"),),
)
REPLICAS = Listing(
    "ListReplicas",
    cpb.ListReplicasResponse,
    "replicas",
    convert.replica_as,
    _replicas,
    parents=(("cluster_id", "cluster_id"),),
)
ALLOCATIONS = Listing(
    "ListAllocations",
    cpb.ListAllocationsResponse,
    "allocations",
    convert.allocation_as,
    _allocations,
    parents=(("project", "project"), ("cluster_id", "cluster_id"), ("replica", "replica_id")),
    project_filter=True,
)
API_TOKENS = Listing(
    "ListApiTokens", cpb.ListApiTokensResponse, "tokens", convert.api_token_as, _api_tokens
)
AUDIT_RECORDS = Listing(
    "ListAuditRecords",
    cpb.ListAuditRecordsResponse,
    "records",
    convert.audit_record_as,
    _audit_records,
)

LISTINGS: tuple[Listing[Any, Any], ...] = (
    PROJECTS,
    CLUSTERS,
    WORKLOADS,
    DEPLOYMENTS,
    DISCOVERED,
    REPLICAS,
    ALLOCATIONS,
    API_TOKENS,
    AUDIT_RECORDS,
)
