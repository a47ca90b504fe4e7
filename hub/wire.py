"""Protobuf <-> domain conversions shared by both hub edges (hub/api and hub/sync).

Only the edges import this module; the core never sees a protobuf message. The rule itself
(fields of the same name copied, enums as words without their type prefix, repeated fields,
maps, nested messages, timestamps) is common/convert.py's, the one converter the agent uses
too; this module names it for the hub's edges.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import timestamp_pb2

from common import convert
from hub.model import FailoverPolicy, Serving
from wingsmith.v1 import resources_pb2 as pb

# A generated enum class (mypy-protobuf types each one as its own wrapper class).
EnumType = Any

enum_word = convert.enum_word
timestamp = convert.timestamp
# A message from a record: the fields of the same name by the converter's rule, `given` ones
# as given (None: unset).
message_from = convert.to_message
# A record from a message by the same rule, `given` fields winning.
record_from = convert.from_message


def enum_value(enum: EnumType, word: str) -> Any:
    """ "vllm" -> ENGINE_VLLM's number (typed Any: each enum has its own ValueType)."""
    return convert.enum_number(enum, word)


def timestamp_ns(nanos: int) -> timestamp_pb2.Timestamp | None:
    if not nanos:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(nanos)
    return stamp


def serving_to_proto(serving: Serving) -> pb.ServingConfig:
    return convert.serving_to_message(serving)


def serving_from_proto(message: pb.ServingConfig) -> Serving:
    """Raw values (not validated): hub.serving.normalize checks them."""
    return convert.serving_from_message(message)


def _failover_to_proto(policy: FailoverPolicy) -> pb.Failover:
    return pb.Failover(
        toleration_seconds=policy.toleration_s, stabilization_seconds=policy.stabilization_s
    )


def _failover_from_proto(message: pb.Failover) -> FailoverPolicy:
    return FailoverPolicy(
        toleration_s=message.toleration_seconds, stabilization_s=message.stabilization_seconds
    )


# The policy's fields are named for their unit on the hub (toleration_s, also in stored
# documents) and spelled out on the wire: its two functions, wherever a Failover is nested.
convert.register(FailoverPolicy, _failover_to_proto, _failover_from_proto)
