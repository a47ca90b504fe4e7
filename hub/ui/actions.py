"""The dashboard's cockpit: a page per workload and per cluster, and the forms that act.

Every action is a POST form carrying the session's CSRF field (checked by the dashboard's
guard before the handler runs) and calls the same RPC the API serves, through the same
dispatch, authorization and audit (docs/dashboard.md "Acting from the dashboard"). The
answer, or the hub's refusal with its status, is shown on the page the form was on.

What a form offers follows the caller's role (`may_change`): a viewer sees no form, an
operator sees the forms of its own projects' workloads, the admin sees every one, cluster
maintenance included. This only hides what would be refused: the hub still decides.

Cordon, uncordon and drain preview first: the form's first POST calls the RPC with
validate_only (nothing is written or audited) and shows what it would do, with a button
that confirms (the same call, for real). Deleting a workload shows its dry run the same way.
"""

from __future__ import annotations

import datetime
import urllib.parse
from typing import TYPE_CHECKING, Any

from aiohttp import web

from hub import access
from hub.errors import WingsmithError

if TYPE_CHECKING:
    from hub.ui.dashboard import Dashboard

PREFIX = "/ui"
# The newest audit records read for a workload's history (ListAuditRecords is newest first).
HISTORY_SCAN = 500
HISTORY_SHOWN = 50
_ROLLOUT_DONE = {
    "PauseWorkloadRollout": "rollout paused",
    "ResumeWorkloadRollout": "rollout resumed",
    "AbortWorkloadRollout": "rollout aborted",
}
_MAINTENANCE = {"cordon": "CordonCluster", "uncordon": "UncordonCluster", "drain": "DrainCluster"}


def may_change(principal: access.Principal, project: str | None) -> bool:
    """Whether `principal` may change a workload of `project` (None: admin-only things)."""
    if principal.role == access.ROLE_ADMIN:
        return True
    return (
        project is not None
        and principal.role == access.ROLE_OPERATOR
        and (project in principal.projects)
    )


_PRIORITY_RANK = {"critical": 4, "high": 3, "normal": 2, "": 2, "low": 1}


def waiting_by_project(deployments: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per project, its deployments with replicas that wait for admission, in the order the
    hub admits them (hub/admission/order.py `decide`): higher priority class first, then the
    oldest (the API's create_time stands for the admission's pending_since, which it does not
    expose), then by cluster. A disabled deployment waits for nobody: it is left out."""
    waiting: dict[str, list[dict[str, Any]]] = {}
    ordered = sorted(
        deployments,
        key=lambda d: (
            -_PRIORITY_RANK.get(str(d.get("priority") or ""), 2),
            str(d.get("create_time") or ""),
            d["cluster_id"],
            d["deployment_id"],
        ),
    )
    for d in ordered:
        short = d["desired_replicas"] - d["admitted_replicas"]
        if d["enabled"] and short > 0:
            waiting.setdefault(d["project"], []).append({**d, "waiting_replicas": short})
    return waiting


# The timeline's lanes, top to bottom (y in the SVG's 0..LANES*10 box).
LANES = ("admission", "rollout", "failover")


def _seconds(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def timeline(workload: dict[str, Any], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workload's events on one time axis, one lane per kind: admission (created, and
    the audited changes), rollout (start, each cluster's wave, its last state), failover
    (each one's start). Each: {lane, y, x (percent of the span), when, label}."""
    events: list[tuple[float, str, str, str]] = []

    def add(when: object, lane: str, label: str) -> None:
        seconds = _seconds(when)
        if seconds is not None:
            events.append((seconds, lane, label, str(when)))

    add(workload.get("create_time"), "admission", "created")
    for record in history:
        if record["outcome"] == "OK":
            add(record["time"], "admission", f"{record['action']} by {record['actor']}")
    rollout = workload.get("rollout_status") or {}
    if rollout:
        add(rollout.get("start_time"), "rollout", "rollout started")
        for wave in rollout.get("clusters") or []:
            add(wave.get("change_time"), "rollout", f"{wave['cluster_id']}: {wave['state']}")
        add(rollout.get("update_time"), "rollout", f"rollout {rollout.get('state')}")
    for failover in workload.get("failovers") or []:
        label = f"failover from {failover['cluster_id']} ({failover['cause']}, {failover['state']})"
        add(failover.get("start_time"), "failover", label)
    if not events:
        return []
    first = min(e[0] for e in events)
    span = max(e[0] for e in events) - first or 1.0
    return [
        {
            "lane": lane,
            "y": LANES.index(lane) * 10 + 5,
            "x": round(2 + 96 * (seconds - first) / span, 3),
            "when": when,
            "label": label,
        }
        for seconds, lane, label, when in sorted(events)
    ]


def routes(dash: Dashboard) -> list[web.RouteDef]:
    cockpit = Cockpit(dash)
    return [
        web.get("/workloads/{ref}", cockpit.workload),
        web.post("/workloads/{ref}/scale", cockpit.scale),
        web.get("/workloads/{ref}/delete", cockpit.delete_form),
        web.post("/workloads/{ref}/delete", cockpit.delete),
        web.post("/workloads/{ref}/pause", cockpit.rollout("PauseWorkloadRollout")),
        web.post("/workloads/{ref}/resume", cockpit.rollout("ResumeWorkloadRollout")),
        web.post("/workloads/{ref}/abort", cockpit.rollout("AbortWorkloadRollout")),
        web.post("/deployments/{ref}/enabled", cockpit.enable),
        web.get("/clusters/{cluster_id}", cockpit.cluster),
        web.post("/clusters/{cluster_id}/{verb:cordon|uncordon|drain}", cockpit.maintain),
    ]


def _quote(text: object) -> str:
    return urllib.parse.quote(str(text), safe="")


class Cockpit:
    def __init__(self, dash: Dashboard) -> None:
        self._dash = dash

    # -- a workload ---------------------------------------------------------------------------

    async def workload(self, request: web.Request) -> web.StreamResponse:
        return await self._workload_page(request)

    async def _workload_page(
        self,
        request: web.Request,
        *,
        ref: str = "",
        notice: str = "",
        error: str = "",
        status: int = 200,
    ) -> web.StreamResponse:
        ref = ref or request.match_info["ref"]
        try:
            workload = await self._dash.call("GetWorkload", ref=ref)
        except WingsmithError as e:
            # An action's refusal stays the answer shown, even where the page is not readable.
            shown, code = (error, status) if error else (e.message, e.http_status)
            return self._dash.render(request, "missing.html", {"message": shown}, status=code)
        deployments = await self._dash.list_all(
            "ListDeployments", "deployments", workload_id=workload["workload_id"]
        )
        history, history_note = await self._history(workload)
        context = {
            "timeline": timeline(workload, history),
            "workload": workload,
            "deployments": deployments,
            "history": history,
            "history_note": history_note,
            "notice": notice,
            "error": error,
            "path": f"{PREFIX}/workloads/{_quote(workload['name'])}",
        }
        return self._dash.render(request, "workload.html", context, status=status)

    async def _history(self, workload: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The audit records naming the workload or one of its deployments, newest first
        (the audit log is the admin's to read: others get a note instead)."""
        caller = request_caller()
        if caller is None or caller.role != access.ROLE_ADMIN:
            return [], "the history is read from the audit log, which only the admin reads"
        name, project = workload["name"], workload["project"]
        targets = {
            f"workload/{name}",
            f"workload/{project}/{name}",
            f"workload/{workload['workload_id']}",
        }
        page = await self._dash.call("ListAuditRecords", page_size=HISTORY_SCAN)
        records = [
            r
            for r in page["records"]
            if r["target"] in targets or r["target"].startswith(f"deployment/{name}.")
        ]
        return records[:HISTORY_SHOWN], ""

    async def scale(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        text = str(form.get("replicas", "")).strip()
        if not text.isdigit():
            error = f"replicas must be a whole number of 0 or more, not {text!r}"
            return await self._workload_page(request, error=error, status=400)
        return await self._act(
            request,
            f"scaled to {int(text)} replicas",
            "UpdateWorkload",
            ref=request.match_info["ref"],
            workload={"replicas": int(text)},
            update_mask={"paths": ["replicas"]},
        )

    def rollout(self, method_name: str) -> Any:
        done = _ROLLOUT_DONE[method_name]

        async def act(request: web.Request) -> web.StreamResponse:
            return await self._act(request, done, method_name, ref=request.match_info["ref"])

        return act

    async def enable(self, request: web.Request) -> web.StreamResponse:
        """Enable or disable one deployment; the answer shows on its workload's page."""
        form = await request.post()
        enabled = str(form.get("enabled", "")) == "true"
        ref = request.match_info["ref"]
        word = "enabled" if enabled else "disabled"
        return await self._act(
            request,
            f"{ref} {word}",
            "UpdateDeployment",
            page=str(form.get("workload", "")) or ref.partition(".")[0],
            ref=ref,
            deployment={"enabled": enabled},
            update_mask={"paths": ["enabled"]},
        )

    async def _act(
        self,
        request: web.Request,
        done: str,
        method_name: str,
        *,
        page: str = "",
        **fields: Any,
    ) -> web.StreamResponse:
        """Call, then show the workload's page (`page`, else the URL's) with the answer."""
        try:
            await self._dash.call(method_name, **fields)
        except WingsmithError as e:
            return await self._workload_page(
                request, ref=page, error=e.message, status=e.http_status
            )
        return await self._workload_page(request, ref=page, notice=done)

    async def delete_form(self, request: web.Request) -> web.StreamResponse:
        return await self._delete_page(request)

    async def _delete_page(
        self, request: web.Request, *, error: str = "", status: int = 200
    ) -> web.StreamResponse:
        ref = request.match_info["ref"]
        found = await self._dash.get_or_404(request, "GetWorkload", ref=ref)
        if isinstance(found, web.StreamResponse):
            return found
        preview: dict[str, Any] | None = None
        try:
            answer = await self._dash.call("DeleteWorkload", ref=ref, validate_only=True)
            preview = answer.get("dry_run")
        except WingsmithError as e:
            error, status = error or e.message, e.http_status if status == 200 else status
        context = {"workload": found, "preview": preview, "error": error}
        return self._dash.render(request, "delete_workload.html", context, status=status)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        ref = request.match_info["ref"]
        if form.get("confirm") != ref:
            error = f"type the workload's name ({ref}) to confirm"
            return await self._delete_page(request, error=error, status=400)
        try:
            await self._dash.call("DeleteWorkload", ref=ref)
        except WingsmithError as e:
            return await self._delete_page(request, error=e.message, status=e.http_status)
        raise web.HTTPSeeOther(f"{PREFIX}/workloads")

    # -- a cluster ----------------------------------------------------------------------------

    async def cluster(self, request: web.Request) -> web.StreamResponse:
        return await self._cluster_page(request)

    async def _cluster_page(
        self,
        request: web.Request,
        *,
        notice: str = "",
        error: str = "",
        preview: dict[str, Any] | None = None,
        status: int = 200,
    ) -> web.StreamResponse:
        cluster_id = request.match_info["cluster_id"]
        found = await self._dash.get_or_404(request, "GetCluster", cluster_id=cluster_id)
        if isinstance(found, web.StreamResponse):
            return found
        deployments = await self._dash.list_all(
            "ListDeployments", "deployments", cluster_id=cluster_id
        )
        classes = sorted({d["device_class"] for n in found["nodes"] for d in n["devices"]})
        context = {
            "cluster": found,
            "deployments": deployments,
            "device_classes": classes,
            "notice": notice,
            "error": error,
            "preview": preview,
            "path": f"{PREFIX}/clusters/{_quote(cluster_id)}",
        }
        return self._dash.render(request, "cluster.html", context, status=status)

    async def maintain(self, request: web.Request) -> web.StreamResponse:
        """Cordon, uncordon or drain: previewed (validate_only) unless the form confirms."""
        verb = request.match_info["verb"]
        form = await request.post()
        fields: dict[str, Any] = {"cluster_id": request.match_info["cluster_id"]}
        if verb != "drain":
            target = str(form.get("target", "")).strip()
            kind, _, value = target.partition(":")
            if kind in ("node", "device_class") and value:
                fields[kind] = value
        confirmed = form.get("confirm") == "yes"
        try:
            answer = await self._dash.call(
                _MAINTENANCE[verb], validate_only=not confirmed, **fields
            )
        except WingsmithError as e:
            return await self._cluster_page(request, error=e.message, status=e.http_status)
        scope = fields.get("node") or fields.get("device_class") or "the whole cluster"
        if not confirmed:
            preview = {
                "verb": verb,
                "scope": scope,
                "target": str(form.get("target", "")),
                "dry_run": answer.get("dry_run") or {},
                "cluster": answer,
            }
            return await self._cluster_page(request, preview=preview)
        return await self._cluster_page(request, notice=f"{verb}: done ({scope})")


def request_caller() -> access.Principal | None:
    from hub.ui import dashboard

    return dashboard.caller()
