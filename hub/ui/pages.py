"""The dashboard's read pages and the forms that live on them: Fleet, Workloads, a
deployment (its review and authority), Projects, Discovered (track, ignore, promote).

Each page reads through the API's own dispatch as the session's principal (hub/ui/dashboard.py
`call`), so it shows exactly what the API shows that caller; each form calls the RPC the API
serves. The workload and cluster pages and their actions are hub/ui/actions.py.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aiohttp import web

from hub.errors import WingsmithError
from hub.ui import actions, templating

if TYPE_CHECKING:
    from hub.ui.dashboard import Dashboard, Handler

PREFIX = "/ui"


def routes(dash: Dashboard) -> list[web.RouteDef]:
    pages = Pages(dash)
    return [
        web.get("/fleet", pages.fleet),
        web.get("/workloads", pages.workloads),
        web.get("/deployments/{ref}", pages.deployment),
        web.get("/deployments/{ref}/promote", pages.promote_deployment_form),
        web.post("/deployments/{ref}/authority", pages.set_authority),
        web.get("/projects", pages.projects),
        web.get("/discovered", pages.discovered),
        web.post("/discovered/{ref}/track", pages.decide("TrackDiscovered")),
        web.post("/discovered/{ref}/ignore", pages.decide("IgnoreDiscovered")),
        web.get("/discovered/{ref}/promote", pages.promote_discovered_form),
        web.post("/discovered/{ref}/promote", pages.promote_discovered),
    ]


class Pages:
    def __init__(self, dash: Dashboard) -> None:
        self._dash = dash

    async def fleet(self, request: web.Request) -> web.StreamResponse:
        clusters = await self._dash.list_all("ListClusters", "clusters")
        return self._dash.render(request, "fleet.html", {"clusters": clusters, "now": time.time()})

    async def workloads(self, request: web.Request) -> web.StreamResponse:
        workloads = await self._dash.list_all("ListWorkloads", "workloads")
        deployments = await self._dash.list_all("ListDeployments", "deployments")
        by_id = {d["deployment_id"]: d for d in deployments}
        return self._dash.render(
            request, "workloads.html", {"workloads": workloads, "by_id": by_id}
        )

    async def deployment(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        deployment = await self._dash.get_or_404(request, "GetDeployment", ref=ref)
        if isinstance(deployment, web.StreamResponse):
            return deployment
        deployment_id = deployment["deployment_id"]
        replicas = await self._dash.list_all(
            "ListReplicas", "replicas", deployment_id=deployment_id
        )
        allocations = await self._dash.list_all(
            "ListAllocations", "allocations", deployment_id=deployment_id
        )
        review = None
        if deployment["authority"] == "observed":
            review = await self._dash.call("ReviewDeployment", ref=deployment_id)
        applied = None
        if deployment.get("applied"):
            applied = await self._dash.call("GetAppliedObject", ref=deployment_id)
        context = {
            "deployment": deployment,
            "replicas": replicas,
            "allocations": allocations,
            "review": review,
            "applied": applied,
            "applied_yaml": templating.manifest(applied),
        }
        return self._dash.render(request, "deployment.html", context)

    async def promote_deployment_form(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        review = await self._dash.get_or_404(request, "ReviewDeployment", ref=ref)
        if isinstance(review, web.StreamResponse):
            return review
        # A managed deployment has nothing to promote: the page says so, with no button.
        deployment = await self._dash.call("GetDeployment", ref=ref)
        context = {"review": review, "error": "", "authority": deployment["authority"]}
        return self._dash.render(request, "promote_deployment.html", context)

    async def set_authority(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        form = await request.post()
        authority = str(form.get("authority", ""))
        accept = form.get("accept_differences") == "on"
        try:
            if authority not in ("managed", "observed"):
                raise web.HTTPBadRequest(text="authority must be managed or observed")
            number = "AUTHORITY_MANAGED" if authority == "managed" else "AUTHORITY_OBSERVED"
            await self._dash.call(
                "SetDeploymentAuthority", ref=ref, authority=number, accept_differences=accept
            )
        except WingsmithError as e:
            review = await self._dash.call("ReviewDeployment", ref=ref)
            deployment = await self._dash.call("GetDeployment", ref=ref)
            context = {"review": review, "error": e.message, "authority": deployment["authority"]}
            return self._dash.render(
                request, "promote_deployment.html", context, status=e.http_status
            )
        raise web.HTTPSeeOther(f"{PREFIX}/deployments/{templating.quote(ref)}")

    async def projects(self, request: web.Request) -> web.StreamResponse:
        projects = await self._dash.list_all("ListProjects", "projects")
        deployments = await self._dash.list_all("ListDeployments", "deployments")
        context = {"projects": projects, "waiting": actions.waiting_by_project(deployments)}
        return self._dash.render(request, "projects.html", context)

    async def discovered(self, request: web.Request) -> web.StreamResponse:
        found = await self._dash.list_all("ListDiscovered", "discovered", include_ignored=True)
        return self._dash.render(request, "discovered.html", {"discovered": found, "error": ""})

    def decide(self, method_name: str) -> Handler:
        async def decide(request: web.Request) -> web.StreamResponse:
            ref = request.match_info["ref"]
            try:
                await self._dash.call(method_name, ref=ref)
            except WingsmithError as e:
                found = await self._dash.list_all(
                    "ListDiscovered", "discovered", include_ignored=True
                )
                context = {"discovered": found, "error": e.message}
                return self._dash.render(request, "discovered.html", context, status=e.http_status)
            raise web.HTTPSeeOther(f"{PREFIX}/discovered")

        return decide

    async def promote_discovered_form(self, request: web.Request) -> web.StreamResponse:
        return await self.promote_page(request, error="", status=200)

    async def promote_page(
        self, request: web.Request, *, error: str, status: int
    ) -> web.StreamResponse:
        entry = await self._dash.get_or_404(request, "GetDiscovered", ref=request.match_info["ref"])
        if isinstance(entry, web.StreamResponse):
            return entry
        projects = await self._dash.list_all("ListProjects", "projects")
        context = {"entry": entry, "projects": projects, "error": error}
        return self._dash.render(request, "promote_discovered.html", context, status=status)

    async def promote_discovered(self, request: web.Request) -> web.StreamResponse:
        ref = request.match_info["ref"]
        form = await request.post()
        try:
            workload = await self._dash.call(
                "PromoteDiscovered",
                ref=ref,
                project=str(form.get("project", "")),
                workload_name=str(form.get("workload_name", "")).strip(),
                device_class=str(form.get("device_class", "")).strip(),
            )
        except WingsmithError as e:
            return await self.promote_page(request, error=e.message, status=e.http_status)
        (deployment,) = workload["deployments"][:1] or [None]
        if deployment is not None:
            raise web.HTTPSeeOther(
                f"{PREFIX}/deployments/{templating.quote(deployment['deployment_id'])}"
            )
        raise web.HTTPSeeOther(f"{PREFIX}/workloads")
