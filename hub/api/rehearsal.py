"""A validate_only call with no preview of its own (projects, clusters, discovered decisions,
tokens): the very handler, run in one transaction that is rolled back (dryrun.whole).

Called by the handlers (hub/api/handlers.py), which pass how to run the real call over the
rehearsal's context; the answer carries what the call would change and no credential
(nothing was made: a token or secret shown would be a lie).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import Message

from hub.api import convert
from hub.service import dryrun
from hub.service.context import ServiceContext

MessageT = TypeVar("MessageT", bound=Message)


def rehearse(
    ctx: ServiceContext,
    call: Callable[[ServiceContext, Message], Message],
    request: Message,
    kind: type[MessageT],
    *,
    shown: Callable[[dryrun.DryRun], dryrun.DryRun],
) -> MessageT:
    """`call(ctx, request without validate_only)` rolled back; its answer with the dry run
    (as `shown` lets the caller read it) and without secrets."""
    real = type(request)()
    real.CopyFrom(request)
    real.validate_only = False  # type: ignore[attr-defined]
    answer, preview = dryrun.whole(ctx, lambda tx_ctx: call(tx_ctx, real))
    assert isinstance(answer, kind)
    dry = convert.dry_run(shown(preview))
    fields = answer.DESCRIPTOR.fields_by_name
    if "dry_run" in fields:
        answer.dry_run.CopyFrom(dry)  # type: ignore[attr-defined]
    elif "cluster" in fields:
        answer.cluster.dry_run.CopyFrom(dry)  # type: ignore[attr-defined]
    for secret in ("token", "secret"):
        field = fields.get(secret)
        if field is not None and field.type == field.TYPE_STRING:
            answer.ClearField(secret)
    return answer
