"""The dashboard's live updates: its pages follow the hub's Watch feed instead of polling.

Each page's `#live` block carries what it shows in the feed's terms (`data-watch`: tokens
`kind` or `kind:field=value`, e.g. `deployment:workload_id=wl_1`) and the feed's revision
read just before the page's own reads (`data-revision`). hub/ui/static/live.js opens an
`EventSource` on `/ui/watch` from that revision, and when an event for an object the page
shows arrives it refreshes the block (debounced, one htmx request for a burst of events).
Nothing is missed between the page's reads and the stream's start: a change made after the
revision was read is recorded later, with a higher revision. A lost connection is resumed by
the browser itself from the last event's id (`Last-Event-ID`, taken before the URL's
revision); a refused stream (410 when the revision is no longer kept, a lost session) makes
the page refresh its block and try again, slowly (docs/dashboard.md "Live updates").

`/ui/watch` is the Watch RPC served to the session's principal, through the same
authorization and feed as `GET /v1/watch` (hub/api/control.py `principal_watch`), as SSE
(hub/api/sse.py): a project-scoped token gets only its projects' workloads and deployments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from hub import access, errors
from hub.api import sse
from hub.api.control import PrincipalWatch
from wingsmith.v1 import control_pb2 as cpb

PATH = "/watch"
# The feed's kinds (a page's tokens) -> the WatchRequest's words.
KINDS = {"workload": "workloads", "deployment": "deployments", "cluster": "clusters"}
_METHOD = cpb.DESCRIPTOR.services_by_name["ControlService"].methods_by_name["Watch"]


def watching(*tokens: str) -> str:
    """A page's `data-watch`: `kind` (every object of that kind) or `kind:field=value` (the
    ones whose field has that value, as the API names fields)."""
    for token in tokens:
        kind = token.partition(":")[0]
        if kind not in KINDS:
            raise ValueError(f"not a watched kind: {token!r}")
    return " ".join(tokens)


class Live:
    def __init__(
        self,
        watch: PrincipalWatch | None,
        caller: Callable[[], access.Principal | None],
    ) -> None:
        """`watch`: the hub's feed (None: no feed, the pages poll slowly); `caller`: the
        principal of the request being served (the dashboard's session guard sets it)."""
        self._watch = watch
        self._caller = caller

    async def revision(self) -> int:
        """Where a page read now resumes from (0 when there is no feed)."""
        if self._watch is None:
            return 0
        return await self._watch.head()

    async def stream(self, request: web.Request) -> web.StreamResponse:
        principal = self._caller()
        if self._watch is None or principal is None:
            return _refused(errors.Unavailable("this hub serves no watch feed: reload the page"))
        try:
            message = cpb.WatchRequest(
                kinds=_kinds(request.query.getall("kinds", [])),
                project=request.query.get("project", ""),
                since_revision=_since(request),
            )
        except errors.WingsmithError as e:
            return _refused(e)
        watch, who = self._watch, principal

        async def serve(
            method: MethodDescriptor,
            request_message: Message,
            metadata: Mapping[str, str],
            write: sse.Write,
        ) -> None:
            assert isinstance(request_message, cpb.WatchRequest)
            await watch.drive(request_message, who, write)

        try:
            return await sse.serve(request, _METHOD, message, {}, serve)
        except errors.WingsmithError as e:
            # Before the first event: an ordinary error answer (EventSource gives up on it).
            return _refused(e)


def _kinds(words: list[str]) -> list[str]:
    chosen = []
    for word in words:
        for part in word.split(","):
            if part not in KINDS.values():
                raise errors.InvalidArgument(
                    "kinds", f"unknown kind {part!r}; expected one of {', '.join(KINDS.values())}"
                )
            chosen.append(part)
    return chosen


def _since(request: web.Request) -> int:
    """The browser's reconnect names the last event it read (`Last-Event-ID`): that comes
    before the revision in the URL, which is the page's, from before the first connect."""
    text = request.headers.get("Last-Event-ID") or request.query.get("since_revision", "0")
    if not text.isdigit():
        raise errors.InvalidArgument("since_revision", f"must be a revision number, not {text!r}")
    return int(text)


def _refused(error: errors.WingsmithError) -> web.StreamResponse:
    document = {
        "error": {
            "code": error.http_status,
            "status": error.grpc_code.name,
            "message": error.message,
        }
    }
    return web.json_response(document, status=error.http_status)
