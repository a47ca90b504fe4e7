"""Carry out a reconcile plan against the cluster: apply, scale through the scaling adapters,
delete, in that order, each write on its own so that one failing leaves the others done. A
write refused for good fails its deployment (the agent rejects it on the stream); one that
may pass later is only logged, and the next pass tries again. `agent.app.Agent.reconcile`
decides when (never in read-only mode)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent import reconcile, tracing
from agent.cluster import port

log = logging.getLogger("wingsmith.agent")

# Runs a blocking cluster call off the loop (the agent's `_io`).
Io = Callable[..., Awaitable[Any]]


@dataclass
class Outcome:
    failures: list[reconcile.Failure]
    applied: int = 0
    deleted: int = 0


async def execute(
    plan: reconcile.Plan, cluster: port.ClusterPort, io: Io, recreating: dict[str, str]
) -> Outcome:
    """`recreating` (deployment -> why its DGD is deleted to be created again) is kept as the
    writes go: an applied deployment leaves it, one whose DGD is deleted to be recreated joins
    it."""
    outcome = Outcome(failures=list(plan.failures))
    for apply in plan.applies:
        try:
            with tracing.child("apply", **{"wingsmith.deployment": apply.deployment_id}):
                await io(cluster.apply_dgd, apply.manifest, take_over=apply.take_over)
            outcome.applied += 1
            recreating.pop(apply.deployment_id, None)
        except port.ClusterError as e:
            log.warning("applying deployment %s failed: %s", apply.deployment_id, e)
            if not e.retryable and not apply.letting_go:
                outcome.failures.append(
                    reconcile.Failure(apply.deployment_id, apply.generation, str(e))
                )
    for scale in plan.scales:
        try:
            await io(cluster.scale_adapter, scale.namespace, scale.name, scale.replicas)
        except port.ClusterError as e:
            log.warning("scaling %s/%s failed: %s", scale.namespace, scale.name, e)
            if not e.retryable:
                outcome.failures.append(
                    reconcile.Failure(
                        scale.deployment_id, scale.generation, f"scaling adapter: {e}"
                    )
                )
    for delete in plan.deletes:
        try:
            await io(cluster.delete_dgd, delete.namespace, delete.name)
            outcome.deleted += 1
        except port.ClusterError as e:
            log.warning("deleting %s/%s failed: %s", delete.namespace, delete.name, e)
        if delete.recreate:
            log.info("deployment %s: %s", delete.deployment_id, delete.recreate)
            recreating[delete.deployment_id] = delete.recreate
    return outcome


def log_only(plan: reconcile.Plan) -> None:
    """Read-only mode: what the plan would have written, logged."""
    for apply in plan.applies:
        log.info("read-only: would apply deployment %s", apply.deployment_id)
    for delete in plan.deletes:
        log.info("read-only: would delete %s/%s", delete.namespace, delete.name)
    for scale in plan.scales:
        log.info("read-only: would scale %s/%s", scale.namespace, scale.name)
