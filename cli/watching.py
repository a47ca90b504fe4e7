"""`get --watch`: print a list, then each object again when it changes.

Workloads, deployments and clusters follow the hub's watch stream (Server-Sent Events,
`GET /v1/watch`, resumed from the last revision after a cut: `stream_watch`); the other kinds
are polled (`watch`). Over the same REST client and output as cli/commands.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from cli import kinds, output
from cli.client import JsonObject
from cli.commands import Context
from cli.errors import ApiError, HubUnreachable

# Liveness stamps move on every heartbeat: a change of these alone is not news.
_WATCH_NOISE = frozenset({"last_seen", "observe_time"})


def watch(
    ctx: Context,
    *,
    fetch: Callable[[], list[JsonObject]],
    kind: kinds.Kind,
    interval_s: float,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Print the list, then each object again whenever it changes (tables: its row alone, as
    kubectl's --watch), polling every `interval_s`; until `timeout_s` (0: until Ctrl-C).

    The hub has no watch API, so this polls the same GET a `get` makes."""
    deadline = clock() + timeout_s if timeout_s else None
    seen: dict[str, str] = {}
    widths: list[int] = []
    first = True
    while True:
        items = fetch()
        changed = []
        now_keys: dict[str, str] = {}
        for item in items:
            key = str(item.get(kind.name_field))
            now_keys[key] = json.dumps(_without_noise(item), sort_keys=True)
            if seen.get(key) != now_keys[key]:
                changed.append(item)
        for gone in seen.keys() - now_keys.keys():
            ctx.note(f"{kind.name}/{gone} deleted")
        if first or changed:
            widths = _show_watched(
                ctx, changed, kind=kind, headers=first and ctx.headers, widths=widths
            )
        first = False
        seen = now_keys
        ctx.out.flush()
        if deadline is not None and clock() + interval_s > deadline:
            return
        sleep(interval_s)


# Kinds the hub's watch stream carries (GET /v1/watch); `get -w` of others polls.
STREAMED = frozenset({"workload", "deployment", "cluster"})


# Errors after which a watch resumes (from its last revision): the hub went away, or cut the
# stream off because this client read too slowly.
_RESUMABLE = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED"})


# With no deadline: how long the stream may stay quiet (the hub sends a bookmark every 15 s).
_QUIET_S = 60.0


def stream_watch(
    ctx: Context,
    *,
    kind: kinds.Kind,
    matches: Callable[[JsonObject], bool],
    project: str,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """`get -w` from the hub's watch stream (docs/cli.md): the current objects (those
    `matches` keeps), then each change as it happens; until `timeout_s` (0: until Ctrl-C).
    A lost connection resumes from the last revision seen, so nothing is missed or shown
    twice; a revision the hub no longer keeps starts over with the current list."""
    deadline = clock() + timeout_s if timeout_s else None
    revision, started = 0, False
    initial: list[JsonObject] = []
    widths: list[int] = []
    while deadline is None or clock() < deadline:
        query: dict[str, str] = {"kinds": kind.plural}
        if project:
            query["project"] = project
        if revision:
            query["since_revision"] = str(revision)
        quiet_s = _QUIET_S if deadline is None else max(0.05, min(_QUIET_S, deadline - clock()))
        try:
            for event in ctx.client.events("/v1/watch", query, read_timeout_s=quiet_s):
                revision = max(revision, int(event.get("revision") or 0))
                obj = event.get(kind.name)
                if event.get("type") == "bookmark" and not started:
                    widths = _show_watched(
                        ctx, initial, kind=kind, headers=ctx.headers, widths=widths
                    )
                    started, initial = True, []
                elif isinstance(obj, dict) and matches(obj):
                    if not started:
                        initial.append(obj)
                    elif event.get("type") == "deleted":
                        ctx.note(f"{kind.name}/{obj.get(kind.name_field)} deleted")
                    else:
                        widths = _show_watched(ctx, [obj], kind=kind, headers=False, widths=widths)
                ctx.out.flush()
                if deadline is not None and clock() >= deadline:
                    return
        except HubUnreachable:
            sleep(1.0)  # reconnect (through the balancer, maybe to another hub) and resume
        except ApiError as e:
            if e.code == "OUT_OF_RANGE" and revision:
                revision, started, initial = 0, False, []  # too far behind: list again
            elif e.code not in _RESUMABLE:
                raise
            else:
                sleep(1.0)


def _without_noise(item: Mapping[str, Any]) -> Any:
    return {
        k: _without_noise(v) if isinstance(v, dict) else v
        for k, v in item.items()
        if k not in _WATCH_NOISE
    }


def _show_watched(
    ctx: Context, items: list[JsonObject], *, kind: kinds.Kind, headers: bool, widths: list[int]
) -> list[int]:
    """Print what changed; a table keeps the column widths it had (returned, grown)."""
    if ctx.human:
        rows = output.table_rows(kind.name, items, wide=ctx.output == "wide", headers=headers)
        if rows:
            print(output.format_rows(rows, min_widths=widths), file=ctx.out)
            grown = output.column_widths(rows)
            widths = [max(w, widths[i] if i < len(widths) else 0) for i, w in enumerate(grown)]
        return widths
    for item in items:
        text = output.render(item, fmt=ctx.output, kind=kind.name, name_field=kind.name_field)
        print(text, file=ctx.out)
        if ctx.output == "yaml":
            print("---", file=ctx.out)
    return widths
