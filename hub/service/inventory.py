"""Replicas and allocations: what the clusters report running, and on which devices."""

from __future__ import annotations

import dataclasses

from hub import errors
from hub.filters import AllocationFilter, ReplicaFilter
from hub.model import Allocation
from hub.service import validate, views
from hub.service.context import ServiceContext, snapshot
from hub.store import deployments, inventory
from hub.store.port import Transaction


def list_replicas(
    ctx: ServiceContext, *, where: ReplicaFilter, page_size: int, page_token: str
) -> tuple[list[views.ReplicaView], str]:
    limit, after = validate.page(page_size, page_token)
    with snapshot(ctx) as conn:
        if where.deployment_id:
            where = dataclasses.replace(
                where, deployment_id=_deployment_id(conn, where.deployment_id, where.projects)
            )
        found = inventory.list_replicas(conn, where=where, after=after, limit=limit)
        result = views.replica_views(ctx, conn, found)
    return result, validate.next_token([r.replica_id for r in found], limit)


def get_replica(ctx: ServiceContext, ref: str) -> views.ReplicaView:
    """By replica id, or by pod name when only one cluster has a pod of that name."""
    with snapshot(ctx) as conn:
        replica_id = _replica_id(conn, ref)
        found = inventory.list_replicas(
            conn, where=ReplicaFilter(replica_id=replica_id), after="", limit=1
        )
        if not found:
            raise errors.NotFound("replica", ref)
        return views.replica_views(ctx, conn, found)[0]


def list_allocations(
    ctx: ServiceContext, *, where: AllocationFilter, page_size: int, page_token: str
) -> tuple[list[Allocation], str]:
    limit, after = validate.page(page_size, page_token)
    with snapshot(ctx) as conn:
        where = dataclasses.replace(
            where,
            replica_id=_replica_id(conn, where.replica_id) if where.replica_id else "",
            deployment_id=(
                _deployment_id(conn, where.deployment_id, where.projects)
                if where.deployment_id
                else ""
            ),
        )
        found = inventory.list_allocations(conn, where=where, after=after, limit=limit)
    return found, validate.next_token([a.replica_id for a in found], limit)


def _deployment_id(conn: Transaction, ref: str, projects: frozenset[str] | None = None) -> str:
    """The deployment a filter names; NotFound when there is none, or when it is of a project
    outside `projects` (a scoped token's: it reads as none, hub/access.py)."""
    found = deployments.get(conn, ref)
    if found is None or (projects is not None and found.project not in projects):
        raise errors.NotFound("deployment", ref)
    return found.deployment_id


def _replica_id(conn: Transaction, ref: str) -> str:
    if ref.startswith("rep_"):
        return ref
    matches = inventory.find_replica_ids(conn, ref)
    if not matches:
        raise errors.NotFound("replica", ref)
    if len(matches) > 1:
        raise errors.InvalidArgument(
            "ref", f"pod name {ref!r} is ambiguous ({len(matches)} clusters): use the replica id"
        )
    return matches[0]
