"""`wingsmith`: argument parsing and dispatch (entry point `cli.main:main`).

`hub`, `agent` and `demo` launch other programs: everything after the word goes, unparsed, to
`hub.app.main`, `agent.main.main` or `cli.demo.main`, imported only then, so that a client
command never loads the hub or the agent. Every other command is a REST client: its
arguments are checked first (a usage error never needs a hub), then the hub URL and token
are resolved (cli/config.py), then the function in cli/commands.py runs.

Exit status: 0 done; 1 the hub refused, could not be reached, or a file was unusable;
2 a usage error (argparse's convention), a missing token included; 141 the reader of stdout
went away (`wingsmith get ... | head`), as a Unix tool killed by SIGPIPE reports it, silently.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import pathlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import shtab

from cli import commands, config, explain, jsonpath, kinds, manifests, output, verbs
from cli.client import HubClient, JsonObject
from cli.errors import CliError, UsageError
from cli.kinds import PRIORITIES

# word -> (module, help). The module's main(argv) runs the program.
LAUNCHERS = {
    "hub": ("hub.app", "run the hub (the control plane); see `wingsmith hub --help`"),
    # agent.main, not agent.app: it is what `python -m agent` runs (agent/__main__.py).
    "agent": ("agent.main", "run a cluster agent (hangar); see `wingsmith agent --help`"),
    "demo": ("cli.demo", "run a local demo: a hub and simulated clusters"),
}

Action = Callable[[commands.Context], None]
if TYPE_CHECKING:
    # Generic only in typeshed, not at runtime.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


# 128 + SIGPIPE: what a shell reports for `cat big | head` and every Unix tool in its place.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(argv)
        finally:
            # Flushed here, not at interpreter exit, so a reader that went away is seen below
            # whether the output filled the buffer or not (argparse's --help exits by SystemExit).
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader closed the pipe: nobody reads what is left, so stop without a word (a
        # traceback would land on the terminal, the only place still listening).
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered
    does not fail again ("Exception ignored ... BrokenPipeError") at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _run(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in LAUNCHERS:
        # Before argparse: the launched program parses its own options (and its own --help).
        return launch(words[0], words[1:])
    parser = build_parser()
    args = parser.parse_args(words)
    if args.command in LAUNCHERS:
        return launch(args.command, args.args)
    if args.command == "completion":
        # Needs no hub and no token: it only describes this parser.
        print(shtab.complete(parser, shell=args.shell))
        return 0
    sub: argparse.ArgumentParser = args.parser
    try:
        action: Action = args.prepare(args)
        action(_context(args))
    except UsageError as e:
        sub.print_usage(sys.stderr)
        print(f"{sub.prog}: error: {e.message}", file=sys.stderr)
        return e.exit_code
    except jsonpath.MissingField as e:
        # kubectl's rule: a path to a field that does not exist is an error, not "".
        print(f"error: {e}", file=sys.stderr)
        return 1
    except CliError as e:
        print(f"error: {e.message}", file=sys.stderr)
        if e.hint:
            print(e.hint, file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


def launch(word: str, argv: list[str]) -> int:
    module = importlib.import_module(LAUNCHERS[word][0])
    module.main(argv)
    return 0


def _context(args: argparse.Namespace) -> commands.Context:
    url = config.hub_url(args.hub_url, os.environ)
    try:
        token = config.admin_token(
            flag=args.token, token_file=args.token_file, environ=os.environ, cwd=pathlib.Path.cwd()
        )
    except UsageError:
        if getattr(args, "needs_token", True):
            raise
        token = ""  # explain reads the API document, which the hub serves to anyone
    return commands.Context(
        client=HubClient(url, token, retry_pauses_s=config.retry_pauses(os.environ)),
        output=args.output or "table",
        out=sys.stdout,
        err=sys.stderr,
        headers=not getattr(args, "no_headers", False),
        sort_by=getattr(args, "sort_by", None) or "",
    )


# -- the parser -------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, with "did you mean" on a mistyped choice: a kind (`get workoads`), a
    command (`wingsmith dscribe`), an action (`rollout stauts`)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        hint = kinds.suggest(str(value), [str(c) for c in choices])
        shown = ", ".join(map(repr, choices))
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{hint} (choose from {shown})"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="wingsmith",
        description="Wingsmith: GPU model serving across Kubernetes clusters.",
        epilog="Client options may come before or after the command. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _add_client_options(parser, default=None)
    # cast: at runtime the subparsers are _Parser too (argparse uses type(self)).
    sub = cast(
        "Subparsers", parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    )
    for word, (_, help_text) in LAUNCHERS.items():
        launcher = sub.add_parser(word, help=help_text, add_help=False)
        launcher.add_argument("args", nargs=argparse.REMAINDER)
    client = _Parser(add_help=False)
    # SUPPRESS: an option given before the command is not reset by the subcommand's default.
    _add_client_options(client, default=argparse.SUPPRESS)
    for add in (
        _add_get,
        _add_describe,
        _add_create,
        _add_apply,
        _add_scale,
        _add_set_priority,
        _add_set_quota,
        _add_enable,
        _add_delete,
        _add_rotate_token,
        _add_maintenance,
        _add_discovered,
        _add_rollout,
        _add_authority,
        _add_tokens,
        _add_audit,
        _add_explain,
    ):
        add(sub, client)
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script: `source <(wingsmith completion bash)`, or for "
        "zsh write it as _wingsmith on $fpath.",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    return parser


def _add_client_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    group = parser.add_argument_group("hub connection and output")
    group.add_argument(
        "--hub-url",
        default=default,
        metavar="URL",
        help=f"the hub's REST address (default: ${config.ENV_HUB_URL}, "
        f"else {config.DEFAULT_HUB_URL})",
    )
    group.add_argument(
        "--token",
        default=default,
        metavar="TOKEN",
        help=f"the admin token or a scoped token (default: ${config.ENV_ADMIN_TOKEN}, else "
        f"./{config.LOCAL_TOKEN_FILE})",
    )
    group.add_argument(
        "--token-file",
        default=default,
        metavar="PATH",
        help="read the admin token from a file, e.g. the hub's <db>.admin-token",
    )
    group.add_argument(
        "-o",
        "--output",
        default=default,
        type=_output_format,
        metavar="FORMAT",
        help=f"{'|'.join(output.FORMATS)}|jsonpath=TEMPLATE|custom-columns=NAME:.path,..."
        " (default: table)",
    )
    group.add_argument(
        "--no-headers",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="tables without their header row",
    )


def _command(
    sub: Subparsers,
    client: argparse.ArgumentParser,
    *,
    name: str,
    help_text: str,
    prepare: Callable[[argparse.Namespace], Action],
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, parents=[client], help=help_text, description=help_text)
    parser.set_defaults(prepare=prepare, parser=parser)
    return parser


def _group(
    sub: Subparsers, client: argparse.ArgumentParser, *, name: str, help_text: str
) -> Subparsers:
    """A command word with actions under it (`wingsmith discovered track REF`). It takes the
    client options too, so that they may come before or after the action word as well."""
    parser = sub.add_parser(name, parents=[client], help=help_text, description=help_text)
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True)


def _add_get(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub, client, name="get", help_text="show resources (a list, or one by REF)", prepare=_get
    )
    parser.add_argument(
        "kind", metavar="KIND", type=str.lower, choices=kinds.words(), help=_choices(kinds.words())
    )
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
        help=f"include ignored entries ({_all_kinds()})",
    )
    parser.add_argument(
        "--applied",
        action="store_true",
        help="for one deployment: the object its agent applied (its DynamoGraphDeployment)",
    )
    parser.add_argument(
        "--sort-by",
        metavar="JSONPATH",
        type=_sort_path,
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
        type=_seconds,
        default=2.0,
        metavar="SECONDS",
        help="how often --watch asks the hub (default: 2)",
    )
    parser.add_argument(
        "--watch-timeout",
        type=_seconds,
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
        raise UsageError(f"--all applies to {_all_kinds()} only, not to {kind.plural}")
    ref = args.ref
    if args.applied:
        if kind is not kinds.DEPLOYMENT or ref is None:
            raise UsageError(
                "--applied shows one deployment's object: get deployment REF --applied"
            )
        return lambda ctx: commands.applied_object(ctx, ref=ref)
    if args.watch:
        interval, timeout = float(args.watch_interval), float(args.watch_timeout)
        if interval <= 0:
            raise UsageError("--watch-interval must be more than 0")
        if "selector" in filters and kind.name in verbs.STREAMED:
            # The stream carries every change; the hub selects by labels on lists only.
            raise UsageError(f"-l/--selector does not apply to a watch of {kind.plural} yet")

        def watch(ctx: commands.Context) -> None:
            if kind.name in verbs.STREAMED:
                verbs.stream_watch(
                    ctx,
                    kind=kind,
                    matches=_selection(ctx, kind, ref, filters),
                    project=filters.get("project", ""),
                    timeout_s=timeout,
                )
                return
            verbs.watch(
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


def _add_describe(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="describe",
        help_text="show one resource for people: its fields, conditions and related objects",
        prepare=_describe,
    )
    choices = kinds.words(where="gettable")
    parser.add_argument(
        "kind", metavar="KIND", type=str.lower, choices=choices, help=_choices(choices)
    )
    parser.add_argument("ref", metavar="REF", help="id or name")


def _describe(args: argparse.Namespace) -> Action:
    if args.output and not output.is_table(args.output):
        raise UsageError("describe prints a page for people; for data use get -o json|yaml")
    kind, ref = kinds.lookup(args.kind), str(args.ref)
    return lambda ctx: verbs.describe(ctx, kind=kind, ref=ref)


def _add_apply(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="apply",
        help_text="create or update projects, clusters and workloads from a YAML or JSON file "
        "(running it again changes nothing)",
        prepare=_apply,
    )
    parser.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="the file, or - for stdin"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would be created or changed, writing nothing (workloads: the hub's"
        " own answer: placement, admission, restarts, preemptions)",
    )


def _apply(args: argparse.Namespace) -> Action:
    documents = manifests.read(args.filename, stdin=sys.stdin)
    dry_run = bool(args.dry_run)
    return lambda ctx: verbs.apply(ctx, documents=documents, dry_run=dry_run)


def _all_kinds() -> str:
    return ", ".join(k.plural for k in kinds.KINDS if k.all_param)


def _add_create(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="create",
        help_text="create projects, clusters and workloads from a YAML or JSON file",
        prepare=_create,
    )
    parser.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="the file, or - for stdin"
    )
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP + " (workloads)")


def _create(args: argparse.Namespace) -> Action:
    documents = manifests.read(args.filename, stdin=sys.stdin)
    dry_run = bool(args.dry_run)
    return lambda ctx: commands.create(ctx, documents=documents, dry_run=dry_run)


def _add_scale(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub, client, name="scale", help_text="set a workload's total replicas", prepare=_scale
    )
    parser.add_argument(
        "kind", metavar="KIND", type=str.lower, choices=kinds.WORKLOAD.words, help="workload"
    )
    parser.add_argument("ref", metavar="REF", help="workload id or name")
    parser.add_argument("--replicas", required=True, type=_count, metavar="N")
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)


DRY_RUN_HELP = (
    "ask the hub what it would do (placement, admission, restarts, preemptions), writing nothing"
)


def _scale(args: argparse.Namespace) -> Action:
    ref, replicas, dry_run = str(args.ref), int(args.replicas), bool(args.dry_run)
    return lambda ctx: commands.scale(ctx, ref=ref, replicas=replicas, dry_run=dry_run)


def _add_set_priority(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="set-priority",
        help_text="set a workload's priority class (admission order and preemption)",
        prepare=_set_priority,
    )
    parser.add_argument(
        "kind", metavar="KIND", type=str.lower, choices=kinds.WORKLOAD.words, help="workload"
    )
    parser.add_argument("ref", metavar="REF", help="workload id or name")
    parser.add_argument(
        "priority", metavar="PRIORITY", choices=PRIORITIES, help=" | ".join(PRIORITIES)
    )


def _set_priority(args: argparse.Namespace) -> Action:
    ref, priority = str(args.ref), str(args.priority)
    return lambda ctx: commands.set_priority(ctx, ref=ref, priority=priority)


def _add_set_quota(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="set-quota",
        help_text="set a project's device limits per device class (merged into the current ones)",
        prepare=_set_quota,
    )
    parser.add_argument("project", metavar="PROJECT")
    parser.add_argument(
        "quotas", metavar="CLASS=N", nargs="+", type=_quota, help="e.g. H100-80GB=16 (0: none)"
    )
    parser.add_argument(
        "--replace", action="store_true", help="replace the whole map: unnamed classes go away"
    )


def _set_quota(args: argparse.Namespace) -> Action:
    quotas: dict[str, int] = {}
    for device_class, limit in args.quotas:
        if device_class in quotas:
            raise UsageError(f"device class {device_class!r} given twice")
        quotas[device_class] = limit
    project, replace = str(args.project), bool(args.replace)
    return lambda ctx: commands.set_quota(ctx, project=project, quotas=quotas, replace=replace)


def _add_enable(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    for word, enabled in (("enable", True), ("disable", False)):
        parser = _command(
            sub,
            client,
            name=word,
            help_text=f"{word} deployments (a disabled one holds no devices)",
            prepare=_set_enabled(enabled),
        )
        parser.add_argument(
            "kind",
            metavar="KIND",
            type=str.lower,
            choices=kinds.DEPLOYMENT.words,
            help="deployment",
        )
        parser.add_argument(
            "refs", metavar="REF", nargs="+", help="deployment id or <workload>.<cluster>"
        )
        parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)


def _set_enabled(enabled: bool) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        refs, dry_run = [str(ref) for ref in args.refs], bool(args.dry_run)
        return lambda ctx: commands.set_enabled(ctx, refs=refs, enabled=enabled, dry_run=dry_run)

    return prepare


def _add_delete(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="delete",
        help_text="delete workloads, projects or clusters",
        prepare=_delete,
    )
    choices = kinds.words(where="deletable")
    parser.add_argument(
        "kind", metavar="KIND", nargs="?", type=str.lower, choices=choices, help=_choices(choices)
    )
    parser.add_argument("refs", metavar="REF", nargs="*")
    parser.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="delete what this file names (as `apply -f` reads it), instead of KIND REF...",
    )
    parser.add_argument(
        "--ignore-not-found",
        action="store_true",
        help="an object already gone is not an error (exit 0)",
    )
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP + " (workloads)")


def _delete(args: argparse.Namespace) -> Action:
    if args.filename is not None:
        if args.kind is not None:
            raise UsageError("give either -f FILE or KIND REF..., not both")
        if args.dry_run:
            raise UsageError("--dry-run: name the workloads (delete workload REF... --dry-run)")
        documents = manifests.read(args.filename, stdin=sys.stdin)
        ignore = bool(args.ignore_not_found)
        return lambda ctx: verbs.delete_files(ctx, documents=documents, ignore_not_found=ignore)
    if args.kind is None or not args.refs:
        raise UsageError("name what to delete: KIND REF... or -f FILE")
    kind = kinds.lookup(args.kind)
    refs = [str(ref) for ref in args.refs]
    dry_run, ignore = bool(args.dry_run), bool(args.ignore_not_found)
    if dry_run and kind is not kinds.WORKLOAD:
        raise UsageError("--dry-run: only workloads have a dry run on the hub")
    return lambda ctx: commands.delete(
        ctx, kind=kind, refs=refs, dry_run=dry_run, ignore_not_found=ignore
    )


def _add_rotate_token(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
        sub,
        client,
        name="rotate-token",
        help_text="give a cluster a new agent token (shown once); the old one stops working"
        " and the streams opened with it are closed",
        prepare=_rotate_token,
    )
    parser.add_argument("kind", metavar="KIND", type=str.lower, choices=["cluster"], help="cluster")
    parser.add_argument("ref", metavar="CLUSTER")
    parser.add_argument(
        "--revoke-certificates",
        action="store_true",
        help="also refuse every client certificate (mutual TLS) its agents have used",
    )


def _rotate_token(args: argparse.Namespace) -> Action:
    cluster_id, revoke = str(args.ref), bool(args.revoke_certificates)
    return lambda ctx: commands.rotate_token(ctx, cluster_id=cluster_id, revoke_certificates=revoke)


MAINTENANCE = {
    "cordon": "no new placements or admissions on a cluster (or one node or device class);"
    " nothing running moves",
    "uncordon": "undo a cordon (without --node or --device-class: every cordon of the cluster,"
    " and a drain)",
    "drain": "cordon a cluster and re-place its managed deployments elsewhere, removing each"
    " there once its stand-ins run",
}


def _add_maintenance(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    for verb, help_text in MAINTENANCE.items():
        parser = _command(sub, client, name=verb, help_text=help_text, prepare=_maintain(verb))
        parser.add_argument(
            "kind", metavar="KIND", type=str.lower, choices=["cluster"], help="cluster"
        )
        parser.add_argument("ref", metavar="CLUSTER")
        parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
        if verb == "drain":
            parser.set_defaults(node="", device_class="")
            continue
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--node", default="", metavar="NODE", help="only this node")
        scope.add_argument(
            "--device-class",
            default="",
            metavar="CLASS",
            help="only this device class (e.g. for its GPU driver upgrade)",
        )


def _maintain(verb: str) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        cluster_id, node, device_class = str(args.ref), str(args.node), str(args.device_class)
        dry_run = bool(args.dry_run)
        return lambda ctx: commands.maintain(
            ctx,
            verb=verb,
            cluster_id=cluster_id,
            node=node,
            device_class=device_class,
            dry_run=dry_run,
        )

    return prepare


def _add_discovered(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = _group(
        sub,
        client,
        name="discovered",
        help_text="decide about workloads found running that the hub never declared",
    )
    ref_help = "<cluster>.<namespace>.<name> (see `get discovered`) or its dsc_ id"
    for decision, help_text in (
        ("track", "keep it in the inventory, observed only (no deployment)"),
        ("ignore", "hide it from `get discovered` (`get discovered --all` still shows it)"),
    ):
        parser = _command(
            actions, client, name=decision, help_text=help_text, prepare=_decide(decision)
        )
        parser.add_argument("ref", metavar="REF", help=ref_help)
    promote = _command(
        actions,
        client,
        name="promote",
        help_text="make a workload of it, pinned to its cluster, its deployment observed",
        prepare=_promote_discovered,
    )
    promote.add_argument("ref", metavar="REF", help=ref_help)
    promote.add_argument(
        "--project", required=True, help="the project it belongs to (charged for what runs)"
    )
    promote.add_argument(
        "--name", metavar="WORKLOAD_NAME", default="", help="default: the DGD's name"
    )
    promote.add_argument(
        "--device-class",
        metavar="CLASS",
        default="",
        help="default: the class of the devices its pods run on",
    )


def _decide(decision: str) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        ref = str(args.ref)
        return lambda ctx: commands.decide_discovered(ctx, ref=ref, decision=decision)

    return prepare


def _promote_discovered(args: argparse.Namespace) -> Action:
    ref, project = str(args.ref), str(args.project)
    name, device_class = str(args.name), str(args.device_class)
    return lambda ctx: commands.promote_discovered(
        ctx, ref=ref, project=project, workload_name=name, device_class=device_class
    )


def _add_rollout(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = _group(
        sub,
        client,
        name="rollout",
        help_text="a workload's serving change rolling out in waves: status, pause, resume, abort",
    )
    for action, help_text in (
        ("status", "show the rollout: its state, why it paused, each cluster's wave"),
        ("pause", "pause a rolling rollout: no further cluster gets the change until resumed"),
        ("resume", "go on with a rollout paused at a wave deadline or by hand"),
        ("abort", "stop the rollout: the clusters it changed get the previous config back"),
    ):
        parser = _command(
            actions, client, name=action, help_text=help_text, prepare=_rollout(action)
        )
        parser.add_argument(
            "kind", metavar="KIND", type=str.lower, help="workload (the only kind that rolls out)"
        )
        parser.add_argument("ref", metavar="REF", help="the workload's name or wl_ id")
        if action != "status":
            parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)


def _rollout(action: str) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        kind_word, ref = str(args.kind), str(args.ref)
        if kind_word not in kinds.words() or kinds.lookup(kind_word) is not kinds.WORKLOAD:
            raise UsageError(
                f"rollout {action} applies to workloads: rollout {action} workload REF"
            )
        if action == "status":
            return lambda ctx: commands.rollout_status(ctx, ref=ref)
        dry_run = bool(args.dry_run)
        return lambda ctx: commands.rollout_action(ctx, ref=ref, action=action, dry_run=dry_run)

    return prepare


def _add_authority(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = _group(
        sub,
        client,
        name="authority",
        help_text="review, promote (the agent takes control) or demote (it lets go) deployments",
    )
    ref_help = "deployment id or <workload>.<cluster>"
    review = _command(
        actions,
        client,
        name="review",
        help_text="show what promoting to managed would change",
        prepare=_review,
    )
    review.add_argument("ref", metavar="DEPLOYMENT", help=ref_help)
    promote = _command(
        actions,
        client,
        name="promote",
        help_text="make it managed: the agent reconciles it (refused while configs differ)",
        prepare=_set_authority("managed"),
    )
    promote.add_argument("ref", metavar="DEPLOYMENT", help=ref_help)
    promote.add_argument(
        "--accept-differences",
        action="store_true",
        help="promote anyway: the agent applies the declaration (pods whose template changes "
        "restart)",
    )
    demote = _command(
        actions,
        client,
        name="demote",
        help_text="make it observed: the agent only reads it; nothing is deleted",
        prepare=_set_authority("observed"),
    )
    demote.add_argument("ref", metavar="DEPLOYMENT", help=ref_help)


def _review(args: argparse.Namespace) -> Action:
    ref = str(args.ref)
    return lambda ctx: commands.review_deployment(ctx, ref=ref)


def _set_authority(authority: str) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        ref = str(args.ref)
        # demote has no --accept-differences: nothing is compared when letting go.
        accept = bool(getattr(args, "accept_differences", False))
        return lambda ctx: commands.set_authority(
            ctx, ref=ref, authority=authority, accept_differences=accept
        )

    return prepare


def _add_tokens(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = _group(
        sub,
        client,
        name="token",
        help_text="scoped API tokens: viewer, operator of projects, admin (admin only)",
    )
    create = _command(
        actions,
        client,
        name="create",
        help_text="create a token; its secret is printed once",
        prepare=_create_token,
    )
    create.add_argument("name", metavar="NAME", help="a DNS label, e.g. team-search-ci")
    create.add_argument(
        "--role",
        required=True,
        choices=["viewer", "operator", "fleet_viewer", "admin"],
        help="what it may do (docs/security.md: viewer and operator read only their projects'"
        " workloads; fleet_viewer reads the whole fleet)",
    )
    create.add_argument(
        "--project",
        action="append",
        default=[],
        metavar="NAME",
        help="a project a viewer reads or an operator reads and changes (repeat for several)",
    )
    listing = _command(
        actions,
        client,
        name="list",
        help_text="list tokens (never their secrets)",
        prepare=_list_tokens,
    )
    listing.add_argument("--all", action="store_true", help="include revoked tokens")
    revoke = _command(
        actions,
        client,
        name="revoke",
        help_text="revoke a token at once (its record stays)",
        prepare=_revoke_token,
    )
    revoke.add_argument("name", metavar="NAME")


def _create_token(args: argparse.Namespace) -> Action:
    name, role, projects = str(args.name), str(args.role), [str(p) for p in args.project]
    return lambda ctx: commands.create_token(ctx, name=name, role=role, projects=projects)


def _list_tokens(args: argparse.Namespace) -> Action:
    include_revoked = bool(args.all)
    return lambda ctx: commands.list_tokens(ctx, include_revoked=include_revoked)


def _revoke_token(args: argparse.Namespace) -> Action:
    name = str(args.name)
    return lambda ctx: commands.revoke_token(ctx, name=name)


AUDIT_FILTERS = ("actor", "action", "target", "outcome", "since", "until")


def _add_audit(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
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
        "--limit", type=_count, default=100, help="at most this many (default: %(default)s)"
    )


def _audit(args: argparse.Namespace) -> Action:
    filters = {name: str(getattr(args, name)) for name in AUDIT_FILTERS if getattr(args, name)}
    limit = int(args.limit)
    return lambda ctx: commands.audit(ctx, filters=filters, limit=limit)


def _add_explain(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = _command(
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


# -- argument types ---------------------------------------------------------------------------


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _quota(text: str) -> tuple[str, int]:
    device_class, sep, limit = text.partition("=")
    if not sep or not device_class:
        raise argparse.ArgumentTypeError(f"expected CLASS=N (e.g. H100-80GB=16), got {text!r}")
    return device_class, _count(limit)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def _sort_path(text: str) -> str:
    path = text.strip()
    try:
        jsonpath.compile_template(path if path.startswith("{") else "{" + path + "}")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return path


def _output_format(text: str) -> str:
    try:
        return output.parse_format(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _choices(words: Sequence[str]) -> str:
    return "one of: " + ", ".join(words)


def _version() -> str:
    try:
        return importlib.metadata.version("wingsmith")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
