"""Arguments of the operator's commands beyond a resource's own fields: `rotate-token`,
`cordon`/`uncordon`/`drain`, `discovered track|ignore|promote`, `rollout status|resume|abort`,
`authority review|promote|demote` and `token create|list|revoke`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from cli import (
    kinds,
    operations,
)
from cli.args import (
    Action,
    command,
    dry_run_flag,
    group,
    kind_argument,
)
from cli.errors import UsageError

if TYPE_CHECKING:
    from cli.args import Subparsers


def add_rotate_token(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="rotate-token",
        help_text="give a cluster a new agent token (shown once); the old one stops working"
        " and the streams opened with it are closed",
        prepare=_rotate_token,
    )
    _cluster_arguments(parser)
    parser.add_argument(
        "--revoke-certificates",
        action="store_true",
        help="also refuse every client certificate (mutual TLS) its agents have used",
    )


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """KIND CLUSTER, the kind being `cluster` (as kubectl's words: `cordon cluster east`)."""
    kind_argument(parser, ["cluster"], "cluster")
    parser.add_argument("ref", metavar="CLUSTER")


def _rotate_token(args: argparse.Namespace) -> Action:
    cluster_id, revoke = str(args.ref), bool(args.revoke_certificates)
    return lambda ctx: operations.rotate_token(
        ctx, cluster_id=cluster_id, revoke_certificates=revoke
    )


MAINTENANCE = {
    "cordon": "no new placements or admissions on a cluster (or one node or device class);"
    " nothing running moves",
    "uncordon": "undo a cordon (without --node or --device-class: every cordon of the cluster,"
    " and a drain)",
    "drain": "cordon a cluster and re-place its managed deployments elsewhere, removing each"
    " there once its stand-ins run",
}


def add_maintenance(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    for verb, help_text in MAINTENANCE.items():
        parser = command(sub, client, name=verb, help_text=help_text, prepare=_maintain(verb))
        _cluster_arguments(parser)
        dry_run_flag(parser)
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
        return lambda ctx: operations.maintain(
            ctx,
            verb=verb,
            cluster_id=cluster_id,
            node=node,
            device_class=device_class,
            dry_run=dry_run,
        )

    return prepare


def add_discovered(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = group(
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
        parser = command(
            actions, client, name=decision, help_text=help_text, prepare=_decide(decision)
        )
        parser.add_argument("ref", metavar="REF", help=ref_help)
    promote = command(
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
        return lambda ctx: operations.decide_discovered(ctx, ref=ref, decision=decision)

    return prepare


def _promote_discovered(args: argparse.Namespace) -> Action:
    ref, project = str(args.ref), str(args.project)
    name, device_class = str(args.name), str(args.device_class)
    return lambda ctx: operations.promote_discovered(
        ctx, ref=ref, project=project, workload_name=name, device_class=device_class
    )


def add_rollout(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = group(
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
        parser = command(
            actions, client, name=action, help_text=help_text, prepare=_rollout(action)
        )
        # Any word: prepare names the one kind that rolls out when another is given.
        kind_argument(parser, None, "workload (the only kind that rolls out)")
        parser.add_argument("ref", metavar="REF", help="the workload's name or wl_ id")
        if action != "status":
            dry_run_flag(parser)


def _rollout(action: str) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        kind_word, ref = str(args.kind), str(args.ref)
        if kind_word not in kinds.words() or kinds.lookup(kind_word) is not kinds.WORKLOAD:
            raise UsageError(
                f"rollout {action} applies to workloads: rollout {action} workload REF"
            )
        if action == "status":
            return lambda ctx: operations.rollout_status(ctx, ref=ref)
        dry_run = bool(args.dry_run)
        return lambda ctx: operations.rollout_action(ctx, ref=ref, action=action, dry_run=dry_run)

    return prepare


def add_authority(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = group(
        sub,
        client,
        name="authority",
        help_text="review, promote (the agent takes control) or demote (it lets go) deployments",
    )
    ref_help = "deployment id or <workload>.<cluster>"
    review = command(
        actions,
        client,
        name="review",
        help_text="show what promoting to managed would change",
        prepare=_review,
    )
    review.add_argument("ref", metavar="DEPLOYMENT", help=ref_help)
    promote = command(
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
    demote = command(
        actions,
        client,
        name="demote",
        help_text="make it observed: the agent only reads it; nothing is deleted",
        prepare=_set_authority("observed"),
    )
    demote.add_argument("ref", metavar="DEPLOYMENT", help=ref_help)


def _review(args: argparse.Namespace) -> Action:
    ref = str(args.ref)
    return lambda ctx: operations.review_deployment(ctx, ref=ref)


def _set_authority(authority: str) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        ref = str(args.ref)
        # demote has no --accept-differences: nothing is compared when letting go.
        accept = bool(getattr(args, "accept_differences", False))
        return lambda ctx: operations.set_authority(
            ctx, ref=ref, authority=authority, accept_differences=accept
        )

    return prepare


def add_tokens(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    actions = group(
        sub,
        client,
        name="token",
        help_text="scoped API tokens: viewer, operator of projects, admin (admin only)",
    )
    create = command(
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
    listing = command(
        actions,
        client,
        name="list",
        help_text="list tokens (never their secrets)",
        prepare=_list_tokens,
    )
    listing.add_argument("--all", action="store_true", help="include revoked tokens")
    revoke = command(
        actions,
        client,
        name="revoke",
        help_text="revoke a token at once (its record stays)",
        prepare=_revoke_token,
    )
    revoke.add_argument("name", metavar="NAME")


def _create_token(args: argparse.Namespace) -> Action:
    name, role, projects = str(args.name), str(args.role), [str(p) for p in args.project]
    return lambda ctx: operations.create_token(ctx, name=name, role=role, projects=projects)


def _list_tokens(args: argparse.Namespace) -> Action:
    include_revoked = bool(args.all)
    return lambda ctx: operations.list_tokens(ctx, include_revoked=include_revoked)


def _revoke_token(args: argparse.Namespace) -> Action:
    name = str(args.name)
    return lambda ctx: operations.revoke_token(ctx, name=name)
