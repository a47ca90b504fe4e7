"""Arguments of the commands that change resources: `create -f`, `apply -f`, `scale`,
`set-priority`, `set-quota`, `enable`/`disable`, `delete` (by REF or -f) and `label`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from cli import (
    applying,
    commands,
    kinds,
    labeling,
    manifests,
)
from cli.args import (
    DRY_RUN_HELP,
    Action,
    command,
    dry_run_flag,
    file_argument,
    kind_argument,
    quota_pair,
    whole_number,
)
from cli.errors import UsageError
from cli.kinds import PRIORITIES

if TYPE_CHECKING:
    from cli.args import Subparsers


def add_apply(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="apply",
        help_text="create or update projects, clusters and workloads from a YAML or JSON file "
        "(running it again changes nothing)",
        prepare=_apply,
    )
    file_argument(parser)
    dry_run_flag(
        parser,
        "say what would be created or changed, writing nothing (workloads: the hub's"
        " own answer: placement, admission, restarts, preemptions)",
    )


def _apply(args: argparse.Namespace) -> Action:
    documents = manifests.read(args.filename, stdin=sys.stdin)
    dry_run = bool(args.dry_run)
    return lambda ctx: applying.apply(ctx, documents=documents, dry_run=dry_run)


def add_create(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="create",
        help_text="create projects, clusters and workloads from a YAML or JSON file",
        prepare=_create,
    )
    file_argument(parser)
    dry_run_flag(parser, DRY_RUN_HELP + " (workloads)")


def _create(args: argparse.Namespace) -> Action:
    documents = manifests.read(args.filename, stdin=sys.stdin)
    dry_run = bool(args.dry_run)
    return lambda ctx: commands.create(ctx, documents=documents, dry_run=dry_run)


def add_scale(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub, client, name="scale", help_text="set a workload's total replicas", prepare=_scale
    )
    kind_argument(parser, kinds.WORKLOAD.words, "workload")
    parser.add_argument("ref", metavar="REF", help="workload id or name")
    parser.add_argument("--replicas", required=True, type=whole_number, metavar="N")
    dry_run_flag(parser)


def _scale(args: argparse.Namespace) -> Action:
    ref, replicas, dry_run = str(args.ref), int(args.replicas), bool(args.dry_run)
    return lambda ctx: commands.scale(ctx, ref=ref, replicas=replicas, dry_run=dry_run)


def add_set_priority(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="set-priority",
        help_text="set a workload's priority class (admission order and preemption)",
        prepare=_set_priority,
    )
    kind_argument(parser, kinds.WORKLOAD.words, "workload")
    parser.add_argument("ref", metavar="REF", help="workload id or name")
    parser.add_argument(
        "priority", metavar="PRIORITY", choices=PRIORITIES, help=" | ".join(PRIORITIES)
    )


def _set_priority(args: argparse.Namespace) -> Action:
    ref, priority = str(args.ref), str(args.priority)
    return lambda ctx: commands.set_priority(ctx, ref=ref, priority=priority)


def add_set_quota(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="set-quota",
        help_text="set a project's device limits per device class (merged into the current ones)",
        prepare=_set_quota,
    )
    parser.add_argument("project", metavar="PROJECT")
    parser.add_argument(
        "quotas", metavar="CLASS=N", nargs="+", type=quota_pair, help="e.g. H100-80GB=16 (0: none)"
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


def add_enable(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    for word, enabled in (("enable", True), ("disable", False)):
        parser = command(
            sub,
            client,
            name=word,
            help_text=f"{word} deployments (a disabled one holds no devices)",
            prepare=_set_enabled(enabled),
        )
        kind_argument(parser, kinds.DEPLOYMENT.words, "deployment")
        parser.add_argument(
            "refs", metavar="REF", nargs="+", help="deployment id or <workload>.<cluster>"
        )
        dry_run_flag(parser)


def _set_enabled(enabled: bool) -> Callable[[argparse.Namespace], Action]:
    def prepare(args: argparse.Namespace) -> Action:
        refs, dry_run = [str(ref) for ref in args.refs], bool(args.dry_run)
        return lambda ctx: commands.set_enabled(ctx, refs=refs, enabled=enabled, dry_run=dry_run)

    return prepare


def add_delete(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    parser = command(
        sub,
        client,
        name="delete",
        help_text="delete workloads, projects or clusters",
        prepare=_delete,
    )
    choices = kinds.words(where="deletable")
    kind_argument(parser, choices, nargs="?")
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
    dry_run_flag(parser, DRY_RUN_HELP + " (workloads)")


def _delete(args: argparse.Namespace) -> Action:
    if args.filename is not None:
        if args.kind is not None:
            raise UsageError("give either -f FILE or KIND REF..., not both")
        if args.dry_run:
            raise UsageError("--dry-run: name the workloads (delete workload REF... --dry-run)")
        documents = manifests.read(args.filename, stdin=sys.stdin)
        ignore = bool(args.ignore_not_found)
        return lambda ctx: applying.delete_files(ctx, documents=documents, ignore_not_found=ignore)
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


def add_label(sub: Subparsers, client: argparse.ArgumentParser) -> None:
    labeled = [w for kind in labeling.LABELED for w in kind.words]
    parser = command(
        sub,
        client,
        name="label",
        help_text="set or remove labels of a workload, project or cluster (as kubectl label)",
        prepare=_label,
    )
    kind_argument(parser, labeled)
    parser.add_argument("ref", metavar="REF", help="id or name")
    parser.add_argument(
        "changes", metavar="CHANGE", nargs="+", help="key=value sets a label, key- removes one"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="allow a new value for a label that has one"
    )
    dry_run_flag(parser)


def _label(args: argparse.Namespace) -> Action:
    kind, ref = kinds.lookup(args.kind), str(args.ref)
    changes = labeling.parse(args.changes)
    overwrite, dry_run = bool(args.overwrite), bool(args.dry_run)
    return lambda ctx: labeling.label(
        ctx, kind=kind, ref=ref, changes=changes, overwrite=overwrite, dry_run=dry_run
    )
