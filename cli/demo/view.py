"""The demo's live view: a table of each workload's and deployment's state, reprinted as it
changes (only the changed lines once settled), and the waits on it (`until`, `settled`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from cli.demo.fleet import EXPECTED
from hub.service import clusters, workloads
from hub.service.context import ServiceContext


async def watch(
    ctx: ServiceContext,
    stop: asyncio.Event,
    *,
    until: Callable[[ServiceContext], bool],
    deadline: float | None,
    shown: str = "",
    changes_only: bool = False,
) -> str | None:
    """Print the live view whenever it differs from the last one shown, until `until` holds
    (returns the view last shown), Ctrl-C or the deadline (None). `changes_only`: print only
    the lines that are new in it (`view_changes`), not the whole view."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        view = render_view(ctx)
        if view != shown:
            print(view_changes(shown, view) if changes_only else view, flush=True)
            shown = view
        if until(ctx):
            return shown
        if deadline is not None and loop.time() > deadline:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
    return None


async def until(
    ctx: ServiceContext,
    stop: asyncio.Event,
    check: Callable[[], object],
    *,
    deadline: float | None,
) -> object:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        value = check()
        if value:
            return value
        if deadline is not None and loop.time() > deadline:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.2)
    return None


def _outcomes(ctx: ServiceContext) -> dict[str, tuple[str, str, bool]]:
    """Workload name -> (phase, reason of a pending deployment or "", all replicas ready)."""
    found, _ = workloads.list_page(ctx, project="", page_size=100, page_token="")
    return {
        w.workload.name: (
            w.phase,
            next((d.admission_reason for d in w.deployments if d.phase == "pending"), ""),
            w.ready_replicas == w.workload.replicas,
        )
        for w in found
    }


def settled(ctx: ServiceContext) -> bool:
    outcome = _outcomes(ctx)
    return (
        all(outcome.get(n, ("", "", False))[:2] == e for n, e in EXPECTED.items())
        and outcome["llama-70b"][2]
    )


def settled_after_stories(ctx: ServiceContext) -> bool:
    outcome = _outcomes(ctx)
    return settled(ctx) and outcome.get("legacy-mistral", ("", "", False)) == ("running", "", True)


def render_view(ctx: ServiceContext) -> str:
    """The live view: one line per deployment, grouped by workload, plus cluster capacity."""
    found, _ = workloads.list_page(ctx, project="", page_size=100, page_token="")
    lines = ["", "WORKLOAD        PROJECT    PHASE      READY  CLUSTER  ADMISSION  REASON"]
    for w in found:
        for i, d in enumerate(w.deployments or ()):
            head = (
                f"{w.workload.name:<15} {w.workload.project:<10} {w.phase:<10} "
                f"{w.ready_replicas}/{w.workload.replicas:<4}"
                if i == 0
                else " " * 44
            )
            reason = d.admission_reason or "-"
            lines.append(
                f"{head} {d.deployment.cluster_id:<8} {d.phase:<10} {reason}"
                f" ({d.ready_replicas}/{d.deployment.desired_replicas} ready)"
            )
    capacity, _ = clusters.list_page(ctx, page_size=100, page_token="")
    lines.append("")
    lines.append(
        "clusters: "
        + "  ".join(
            f"{c.cluster.cluster_id}{'' if c.cluster.connected else ' (offline)'} "
            + ", ".join(f"{cls} {cap.free}/{cap.total} free" for cls, cap in c.capacity.items())
            for c in capacity
        )
    )
    return "\n".join(lines)


def view_changes(before: str, after: str) -> str:
    """The lines of `after` that `before` did not have, each marked "~ ", under a one-line
    header: what changed, without reprinting the rest."""
    old = set(before.splitlines())
    new = [line for line in after.splitlines() if line.strip() and line not in old]
    return "\n".join(["-- changed --", *(f"~ {line.strip()}" for line in new)])
