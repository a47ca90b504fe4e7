"""Update calls (AIP-134): the paths an update_mask names, checked against the contract's
mutable fields, and a workload update's merge of the masked fields into the stored workload.

Called by the handlers (hub/api/handlers.py); the fields each update may change are the
contract's (hub/api/contract.py `MUTABLE`), which the OpenAPI document lists too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from google.protobuf import field_mask_pb2
from google.protobuf.message import Message

from hub import errors, wire
from hub.api import convert
from hub.service.workloads import WorkloadChange
from wingsmith.v1 import resources_pb2 as pb

MessageT = TypeVar("MessageT", bound=Message)


def workload_change(current: pb.Workload, request: pb.Workload, paths: list[str]) -> WorkloadChange:
    """The change `paths` of `request` make to the workload `current`."""
    merged = pb.Workload()
    merged.CopyFrom(current)
    mask = field_mask_pb2.FieldMask(paths=paths)
    # AIP-134: a path that names a message field replaces it whole, so a message the
    # request leaves out is cleared (REST: `"kv_cache": null`, `"failover": null`). A merge
    # would keep the old one and answer 200 for a change it never made.
    mask.MergeMessage(
        _with_parents(request, paths),
        merged,
        replace_message_field=True,
        replace_repeated_field=True,
    )
    touched = {path.split(".", 1)[0] for path in paths}
    return WorkloadChange(
        replicas=merged.replicas if "replicas" in touched else None,
        serving=wire.serving_from_proto(merged.serving) if "serving" in touched else None,
        placement=(
            convert.placement_from_proto(merged.placement) if "placement" in touched else None
        ),
        rollout_policy=convert.rollout_policy(merged.rollout) if "rollout" in touched else None,
        priority=wire.enum_word(pb.Priority, merged.priority) if "priority" in touched else None,
        labels=dict(merged.labels) if "labels" in touched else None,
    )


def _with_parents(message: MessageT, paths: Sequence[str]) -> MessageT:
    """A copy of `message` with the parents of every path present. protobuf's merge skips a
    path whose parent message the source lacks, so `serving.kv_cache` with no `serving` in
    the request would keep the old KV cache instead of clearing it (the paths are valid for
    the descriptor: every parent is a singular message)."""
    copy = type(message)()
    copy.CopyFrom(message)
    for path in paths:
        node: Message = copy
        for name in path.split(".")[:-1]:
            node = getattr(node, name)
            node.SetInParent()
    return copy


def mask_paths(
    request: Message,
    mask: field_mask_pb2.FieldMask,
    resource: Message,
    *,
    allowed: tuple[str, ...],
) -> list[str]:
    """The update's paths: exactly the request's update_mask, which must be present.

    AIP-134 would infer a missing mask from the populated fields, but protobuf cannot tell a
    field set to its default (enabled: false, replicas: 0, quotas: {}) from one left out, so an
    inferred mask silently drops exactly those changes. REST always sends a mask (inferred from
    the JSON body, where presence is visible: hub/api/rest.py); a gRPC caller names the fields.
    A present but empty mask changes nothing and returns the resource.
    """
    if not request.HasField("update_mask"):
        example = allowed[0]
        raise errors.InvalidArgument(
            "update_mask",
            f'required: name the fields to change, e.g. "update_mask": "{example}"'
            f" (a field set to its default, such as false or 0, cannot be told from one left"
            f" out); mutable fields: {', '.join(allowed)}",
        )
    paths = list(mask.paths)
    for path in paths:
        if path.split(".", 1)[0] not in allowed:
            raise errors.InvalidArgument(
                "update_mask",
                f"{path!r} cannot be changed; mutable fields: {', '.join(allowed)}",
            )
    probe = field_mask_pb2.FieldMask(paths=paths)
    descriptor_of: Any = resource.DESCRIPTOR  # upb and pure-Python descriptors differ in type
    if not probe.IsValidForDescriptor(descriptor_of):
        raise errors.InvalidArgument("update_mask", f"unknown field path in {paths}")
    return paths
