"""The demo's three stories, each played through the control API's own service calls and
watched in the live view: a rollout, an adoption (discovered -> promoted -> managed, no pod
restarted) and a failover with its failback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from agent.app import Agent
from agent.cluster.port import LABEL_MANAGED_BY
from cli.demo.fleet import ADOPT_INTO, LEGACY_ARGS
from cli.demo.view import until
from hub import errors
from hub.model import FailoverRecord
from hub.service import adoption, authority, views, workloads
from hub.service import deployments as deployment_service
from hub.service.context import ServiceContext


async def rollout_story(
    ctx: ServiceContext, stop: asyncio.Event, *, lab: Agent, deadline: float | None
) -> bool:
    """llama-70b moves to engine 0.11.1: both digests live, then one."""
    del lab
    print("\n== rollout: llama-70b engine_version 0.11.0 -> 0.11.1 ==", flush=True)
    current = workloads.get(ctx, "llama-70b").workload.serving
    workloads.update(
        ctx,
        "llama-70b",
        workloads.WorkloadChange(serving=replace(current, engine_version="0.11.1")),
    )

    def east() -> views.DeploymentView:
        return deployment_service.get(ctx, "llama-70b.east")

    both = await until(ctx, stop, lambda: len(east().live_digests) == 2, deadline=deadline)
    if not both:
        return False
    view = east()
    print(f"   rolling: live_digests {view.live_digests} (surge {view.deployment.surge_replicas})")
    done = await until(
        ctx,
        stop,
        lambda: (
            (v := east()).rollout is not None
            and not v.rollout.rolling
            and list(v.live_digests) == [v.deployment.serving_digest]
        ),
        deadline=deadline,
    )
    if not done:
        return False
    view = east()
    print(
        f"   converged: generation {view.deployment.generation}, live_digests {view.live_digests}"
    )
    return True


async def failover_story(
    ctx: ServiceContext,
    stop: asyncio.Event,
    *,
    stop_agent: Callable[[str], None],
    start_agent: Callable[[str], None],
    deadline: float | None,
) -> bool:
    """west's agent stops: past the grace period and llama-70b's failover toleration, its
    replica there stands in on east (nothing deleted on west); the agent comes back: after the
    stabilization window the stand-in goes (docs/placement.md "Failover and failback")."""
    print("\n== failover: the agent of west stops (llama-70b asks for failover) ==", flush=True)
    stop_agent("west")

    def west() -> FailoverRecord | None:
        found = workloads.get(ctx, "llama-70b").failovers
        return next((r for r in found if r.cluster_id == "west"), None)

    def state(wanted: str) -> FailoverRecord | None:
        record = west()
        return record if record is not None and record.state == wanted else None

    failed_over = await until(ctx, stop, lambda: state("failed_over"), deadline=deadline)
    if not isinstance(failed_over, FailoverRecord):
        return False
    print(f"   failed over: {failed_over.message}", flush=True)
    running = await until(
        ctx,
        stop,
        lambda: workloads.get(ctx, "llama-70b").ready_replicas == 4,
        deadline=deadline,
    )
    if not running:
        return False
    print("   llama-70b runs 4/4 ready: the stand-in on east is up", flush=True)
    start_agent("west")
    print("   the agent of west is back", flush=True)
    failed_back = await until(ctx, stop, lambda: state("failed_back"), deadline=deadline)
    if not isinstance(failed_back, FailoverRecord):
        return False
    print(f"   failed back: {failed_back.message}", flush=True)
    return True


async def adoption_story(
    ctx: ServiceContext, stop: asyncio.Event, *, lab: Agent, deadline: float | None
) -> bool:
    """legacy-mistral: discovered -> promote -> observed -> review -> managed, no restart."""
    print("\n== adoption: legacy-mistral, found running on lab ==", flush=True)
    ref = "lab.research.legacy-mistral"
    found = await until(ctx, stop, lambda: _discovered(ctx, ref), deadline=deadline)
    if not found:
        return False
    print(f"   discovered: {ref} (state new, imported_args {' '.join(LEGACY_ARGS)})")
    pods_before = _worker_pods(lab)
    adoption.promote(ctx, ref, project=ADOPT_INTO)
    print(
        f"   promoted: workload legacy-mistral (project {ADOPT_INTO}),"
        " deployment legacy-mistral.lab, authority observed"
    )
    reported = await until(
        ctx,
        stop,
        lambda: deployment_service.get(ctx, "legacy-mistral.lab").status,
        deadline=deadline,
    )
    if not reported:
        return False
    review = authority.review(ctx, "legacy-mistral.lab")
    print(f"   review: {', '.join(str(d) for d in review.differences) or 'no differences'}")
    current = workloads.get(ctx, "legacy-mistral").workload.serving
    workloads.update(
        ctx,
        "legacy-mistral",
        workloads.WorkloadChange(serving=replace(current, engine_args=tuple(LEGACY_ARGS))),
    )
    matched = await until(
        ctx,
        stop,
        lambda: not authority.review(ctx, "legacy-mistral.lab").differences,
        deadline=deadline,
    )
    if not matched:
        return False
    summary = authority.review(ctx, "legacy-mistral.lab").summary
    print(f"   engine_args set to the imported args; review: {summary}")
    authority.set_authority(ctx, "legacy-mistral.lab", authority="managed")
    taken = await until(
        ctx,
        stop,
        lambda: any(d.labels.get(LABEL_MANAGED_BY) for d in lab.cluster.list_dgds()),
        deadline=deadline,
    )
    if not taken:
        return False
    same = _worker_pods(lab) == pods_before
    print(
        "   managed: the agent took control; pods "
        + ("unchanged, nothing restarted" if same else "CHANGED")
        + f" ({', '.join(sorted(pods_before))})"
    )
    return same


def _discovered(ctx: ServiceContext, ref: str) -> bool:
    try:
        return bool(adoption.get(ctx, ref).observation.device_class)
    except errors.NotFound:
        return False


def _worker_pods(agent: Agent) -> dict[str, float]:
    return {p.name: p.created_unix for p in agent.cluster.list_pods() if "worker" in p.name}
