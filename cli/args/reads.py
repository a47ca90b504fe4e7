"""Arguments of the commands that read: `get` (lists with their filters and -l, one by REF,
--watch), `describe`, `explain` and `audit`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cli import (
    commands,
    describing,
    explain,
    kinds,
    operations,
    output,
    watching,
)
from cli.args import (
    Action,
    all_kinds_help,
    command,
    kind_argument,
    seconds,
    sort_path,
    whole_number,
)
from cli.client import JsonObject
from cli.errors import UsageError

if TYPE_CHECKING:
    from cli.args import Subparsers


def add_get(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub, client, name="get", help_text="show resources (a list, or one by REF)", prepare=_get
    )
    kind_argument(parser, kinds.words())
    parser.add_argument("ref", metavar="REF", nargs="?", help="id or name of one resource")
    for name in kinds.FILTER_PARAMS:
        users = ", ".join(k.plural for k in kinds.KINDS if name in k.filters)
        if name == "selector":
            parser.add_argument(
                "-l",
                "--selector",
                metavar="SELECTOR",
                help="only those whose labels match, kubectl's equality-based syntax:"
                f" k=v, k==v, k!=v, k, !k, comma-separated ({users})",
            )
            continue
        parser.add_argument(
            f"--{name}",
            metavar={"cluster": "ID", "project": "NAME"}.get(name, "REF"),
            help=f"only those of this {name} ({users})",
        )
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"include ignored entries ({all_kinds_help()})",
    )
    parser.add_argument(
        "--applied",
        action="store_true",
        help="for one deployment: the object its agent applied (its DynamoGraphDeployment)",
    )
    parser.add_argument(
        "--sort-by",
        metavar="JSONPATH",
        type=sort_path,
        help="order a list by the value at this path of each item, e.g. .replicas or "
        "'{.status.ready_replicas}' (as kubectl's)",
    )
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print each object again when it changes (polls the hub)",
    )
    parser.add_argument(
        "--watch-interval",
        type=seconds,
        default=2.0,
        metavar="SECONDS",
        help="how often --watch asks the hub (default: 2)",
    )
    parser.add_argument(
        "--watch-timeout",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="stop watching after this long (default: 0, until Ctrl-C)",
    )


def _get(args: argparse.Namespace) -> Action:
    kind = kinds.lookup(args.kind)
    filters = {
        name: str(getattr(args, name))
        for name in kinds.FILTER_PARAMS
        if getattr(args, name) is not None
    }
    show_all = bool(args.all)
    if args.ref is not None and not kind.gettable:
        raise UsageError(f"{kind.plural} have no REF; use filters, e.g. --replica REF")
    if args.ref is not None and (filters or show_all):
        raise UsageError("filters apply to lists, not to one resource by REF")
    for name in filters:
        if name not in kind.filters:
            allowed = ", ".join(f"--{f}" for f in kind.filters) or "none"
            raise UsageError(f"--{name} does not filter {kind.plural} (filters: {allowed})")
    if show_all and not kind.all_param:
        raise UsageError(f"--all applies to {all_kinds_help()} only, not to {kind.plural}")
    ref = args.ref
    if args.applied:
        if kind is not kinds.DEPLOYMENT or ref is None:
            raise UsageError(
                "--applied shows one deployment's object: get deployment REF --applied"
            )
        return lambda ctx: operations.applied_object(ctx, ref=ref)
    if args.watch:
        interval, timeout = float(args.watch_interval), float(args.watch_timeout)
        if interval <= 0:
            raise UsageError("--watch-interval must be more than 0")
        if "selector" in filters and kind.name in watching.STREAMED:
            # The hub's watch stream selects by kind and project only: selecting here would
            # need each deployment's workload labels and, when an object's labels stop
            # matching, a DELETED the stream does not send. Refused rather than half right.
            raise UsageError(
                f"-l/--selector with --watch: the hub's watch of {kind.plural} does not select"
                f" by labels; list with -l (get {kind.plural} -l ...), or watch without it"
            )

        def watch(ctx: commands.Context) -> None:
            if kind.name in watching.STREAMED:
                watching.stream_watch(
                    ctx,
                    kind=kind,
                    matches=_selection(ctx, kind, ref, filters),
                    project=filters.get("project", ""),
                    timeout_s=timeout,
                )
                return
            watching.watch(
                ctx,
                fetch=lambda: commands.fetch(
                    ctx, kind=kind, ref=ref, filters=filters, show_all=show_all
                ),
                kind=kind,
                interval_s=interval,
                timeout_s=timeout,
            )

        return watch
    return lambda ctx: commands.get(ctx, kind=kind, ref=ref, filters=filters, show_all=show_all)


def _selection(
    ctx: commands.Context, kind: kinds.Kind, ref: str | None, filters: Mapping[str, str]
) -> Callable[[JsonObject], bool]:
    """Which streamed objects `get -w` shows: the one REF names (looked up once, so a name or
    an id both work and a typo is NOT_FOUND at once), those the list filters keep."""
    wanted: dict[str, str] = {}
    id_field = f"{kind.name}_id"
    if ref is not None:
        wanted[id_field] = str(ctx.client.get(commands.resource_path(kind, ref))[id_field])
    for name, value in filters.items():
        param = kinds.FILTER_PARAMS[name]
        if name == "workload":  # a name or an id; deployments carry the id
            workload = ctx.client.get(commands.resource_path(kinds.WORKLOAD, value))
            value = str(workload["workload_id"])
        wanted[param] = value
    return lambda obj: all(str(obj.get(k)) == v for k, v in wanted.items())


def add_describe(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="describe",
        help_text="show one resource for people: its fields, conditions and related objects",
        prepare=_describe,
    )
    choices = kinds.words(where="gettable")
    kind_argument(parser, choices)
    parser.add_argument("ref", metavar="REF", help="id or name")


def _describe(args: argparse.Namespace) -> Action:
    if args.output and not output.is_table(args.output):
        raise UsageError("describe prints a page for people; for data use get -o json|yaml")
    kind, ref = kinds.lookup(args.kind), str(args.ref)
    return lambda ctx: describing.describe(ctx, kind=kind, ref=ref)


AUDIT_FILTERS = ("actor", "action", "target", "outcome", "since", "until")


def add_audit(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="audit",
        help_text="show the audit log, newest first (admin only)",
        prepare=_audit,
    )
    parser.add_argument("--actor", help='"admin", "token/NAME" or "cluster/ID"')
    parser.add_argument("--action", help='an RPC name ("CreateWorkload") or "agent.connect"')
    parser.add_argument("--target", help='e.g. "project/search"')
    parser.add_argument("--outcome", help='"OK" or a status code, e.g. PERMISSION_DENIED')
    parser.add_argument("--since", metavar="RFC3339", help="e.g. 2026-12-01T00:00:00Z")
    parser.add_argument("--until", metavar="RFC3339")
    parser.add_argument(
        "--limit", type=whole_number, default=100, help="at most this many (default: %(default)s)"
    )


def _audit(args: argparse.Namespace) -> Action:
    filters = {name: str(getattr(args, name)) for name in AUDIT_FILTERS if getattr(args, name)}
    limit = int(args.limit)
    return lambda ctx: operations.audit(ctx, filters=filters, limit=limit)


def add_explain(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="explain",
        help_text="describe a kind's fields, or one field's (KIND.field.field), from the "
        "hub's API document",
        prepare=_explain,
    )
    parser.set_defaults(needs_token=False)
    parser.add_argument("target", metavar="KIND[.FIELD...]", help="e.g. workload.serving")


def _explain(args: argparse.Namespace) -> Action:
    word, *path = str(args.target).split(".")
    try:
        kind = kinds.lookup(word)
    except KeyError:
        hint = kinds.suggest(word, kinds.words())
        raise UsageError(
            f"unknown kind {word!r}{hint} (kinds: {', '.join(kinds.words())})"
        ) from None
    if args.output and not output.is_table(args.output):
        raise UsageError("explain prints a page for people; the document is GET /v1/openapi.json")

    def run(ctx: commands.Context) -> None:
        document = explain.fetch_document(ctx.client)
        print(explain.explain(document, kind=kind, path=path), file=ctx.out)

    return run
