"""`wingsmith label KIND REF key=value key2-`: kubectl's label verb, over the hub's REST API.

Workloads, projects and clusters carry labels (the `label_selector` of every list selects by
them: docs/cli.md "Labels"). Changes are parsed here (a usage error needs no hub), then the
resource is read, its labels changed and the whole map written back under the update mask
`labels` (the API replaces maps whole). As kubectl: a new value for a key that has one is
refused unless `--overwrite`; removing a key that is not there is said, not refused; a call
that changes nothing writes nothing ("not labeled").

Two people labeling the same resource at the same moment can lose one change: the API has no
precondition (a resource version) to detect it, as `set-quota` says too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cli import kinds
from cli.commands import VALIDATE_ONLY, Context, resource_path, show_dry_run, suggesting
from cli.errors import CliError, UsageError

# The kinds that carry labels of their own (deployments, replicas, ... are selected by their
# workload's).
LABELED = (kinds.WORKLOAD, kinds.PROJECT, kinds.CLUSTER)

# Kubernetes' label syntax, checked here only enough to tell a change from a typo; the hub
# checks the rest and names the bad key (INVALID_ARGUMENT).
_KEY = re.compile(r"^([A-Za-z0-9.-]+/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Changes:
    """Labels to set (key -> value) and keys to remove, in the order given."""

    put: Mapping[str, str]
    remove: tuple[str, ...]


def parse(words: Sequence[str]) -> Changes:
    """`k=v` sets, `k-` removes; anything else, or a key named twice, is a usage error."""
    put: dict[str, str] = {}
    remove: list[str] = []
    for word in words:
        if "=" in word:
            key, value = word.split("=", 1)
        elif word.endswith("-"):
            key, value = word[:-1], None
        else:
            raise UsageError(f"{word!r}: give key=value to set a label, key- to remove one")
        if not _KEY.match(key):
            raise UsageError(f"{word!r}: {key!r} is not a label key (e.g. app, example.com/tier)")
        if key in put or key in remove:
            raise UsageError(f"label {key!r} given twice")
        if value is None:
            remove.append(key)
        else:
            put[key] = value
    if not put and not remove:
        raise UsageError("give at least one change: key=value or key-")
    return Changes(put, tuple(remove))


def label(
    ctx: Context,
    *,
    kind: kinds.Kind,
    ref: str,
    changes: Changes,
    overwrite: bool,
    dry_run: bool = False,
) -> None:
    path = resource_path(kind, ref)
    with suggesting(ctx, kind=kind, ref=ref):
        current = ctx.client.get(path)
    labels: dict[str, str] = dict(current.get("labels") or {})
    for key, value in changes.put.items():
        if key in labels and labels[key] != value and not overwrite:
            raise CliError(
                f"{kind.name}/{ref}: label {key!r} already has a value ({labels[key]!r});"
                " give --overwrite to change it"
            )
        labels[key] = value
    for key in changes.remove:
        if labels.pop(key, None) is None:
            ctx.note(f"label {key!r} not found on {kind.name}/{ref}")
    what = f"{kind.name}/{current.get(kind.name_field) or ref}"
    if labels == dict(current.get("labels") or {}):
        if ctx.human:
            print(f"{what} not labeled", file=ctx.out)
        else:
            ctx.show(current, kind=kind)
        return
    if dry_run:
        answer = ctx.client.patch(path, {"labels": labels}, params=VALIDATE_ONLY)
        show_dry_run(ctx, what=f"{what} labeled", answer=answer)
        return
    answer = ctx.client.patch(path, {"labels": labels})
    if ctx.human:
        print(f"{what} labeled", file=ctx.out)
    else:
        ctx.show(answer, kind=kind)
