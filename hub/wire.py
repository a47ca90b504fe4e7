"""Protobuf <-> domain conversions shared by both edges (hub/api and hub/sync).

Only the edges import this module; the core never sees a protobuf message. Enum values map to
the design's lower-case words by stripping the enum's type prefix ("ENGINE_VLLM" -> "vllm"),
the same rule the REST JSON uses.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from google.protobuf import timestamp_pb2

from hub.model import Device, KvCache, Serving
from wingsmith.v1 import resources_pb2 as pb

# A generated enum class (mypy-protobuf types each one as its own wrapper class).
EnumType = Any


def enum_word(enum: EnumType, value: int) -> str:
    """ENGINE_VLLM -> "vllm"; the UNSPECIFIED value -> "".

    A number the enum does not define (a newer client, or a bad one) comes back as
    "unknown(N)", which every validator rejects with a message naming the field.
    """
    try:
        name = enum.Name(value)
    except ValueError:
        return f"unknown({value})"
    prefix = _prefix(enum)
    word = name[len(prefix) :] if name.startswith(prefix) else name
    return "" if word == "UNSPECIFIED" else word.lower()


def enum_value(enum: EnumType, word: str) -> Any:
    """ "vllm" -> ENGINE_VLLM's number (typed Any: each enum has its own ValueType)."""
    if not word:
        return 0
    return enum.Value(_prefix(enum) + word.upper())


def _prefix(enum: EnumType) -> str:
    return _prefix_of(enum.DESCRIPTOR.name)


@functools.cache
def _prefix_of(name: str) -> str:
    # AdmissionPhase -> ADMISSION_PHASE_ (cached: every converted record names a few enums)
    snake = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name))
    return snake.upper() + "_"


def message_from(message_type: Any, record: Any, **given: Any) -> Any:
    """A `message_type` message from the dataclass `record`: `given` fields as given, and every
    other field the record has by the same name copied, so a new field of both needs no line
    here: scalars as they are, repeated scalars from tuples, enums from their word (as
    `enum_value`). Message fields (timestamps, nested messages) come only through `given`."""
    values = dict(given)
    record_type: Any = type(record)
    for name, convert in _copied(message_type, record_type):
        if name not in values:
            values[name] = convert(getattr(record, name))
    return message_type(**values)


@functools.cache
def _copied(message_type: Any, record_type: Any) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """(field name, conversion) of the fields `message_from` copies: computed once per pair."""
    names = {f.name for f in dataclasses.fields(record_type)}
    plan: list[tuple[str, Callable[[Any], Any]]] = []
    for field in message_type.DESCRIPTOR.fields:
        if field.name not in names or field.message_type is not None:
            continue
        repeated = field.is_repeated
        convert: Callable[[Any], Any]
        if field.enum_type is not None:
            convert = functools.partial(
                _enum_numbers if repeated else _enum_number, field.enum_type
            )
        else:
            convert = list if repeated else _same
        plan.append((field.name, convert))
    return tuple(plan)


def _enum_number(enum: Any, word: str) -> int:
    """ "managed" -> AUTHORITY_MANAGED's number, from the enum's descriptor."""
    if not word:
        return 0
    return int(enum.values_by_name[_prefix_of(enum.name) + word.upper()].number)


def _enum_numbers(enum: Any, words: Any) -> list[int]:
    return [_enum_number(enum, word) for word in words]


def _same(value: Any) -> Any:
    return value


def timestamp(seconds: float | None) -> timestamp_pb2.Timestamp | None:
    if seconds is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def timestamp_ns(nanos: int) -> timestamp_pb2.Timestamp | None:
    if not nanos:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(nanos)
    return stamp


def serving_to_proto(serving: Serving) -> pb.ServingConfig:
    message = pb.ServingConfig(
        engine=enum_value(pb.Engine, serving.engine),
        engine_version=serving.engine_version,
        model=serving.model,
        tensor_parallel=serving.tensor_parallel,
        pipeline_parallel=serving.pipeline_parallel,
        expert_parallel=serving.expert_parallel,
        context_length=serving.context_length,
        quantization=serving.quantization,
        engine_args=list(serving.engine_args),
        mode=enum_value(pb.ServingMode, serving.mode),
        router_mode=enum_value(pb.RouterMode, serving.router_mode),
        image=serving.image,
        runtime_version=serving.runtime_version,
    )
    kv = serving.kv_cache
    if kv != KvCache():
        message.kv_cache.CopyFrom(
            pb.KvCacheConfig(
                dtype=kv.dtype,
                gpu_memory_utilization=kv.gpu_memory_utilization,
                block_size=kv.block_size,
                disable_prefix_caching=kv.disable_prefix_caching,
            )
        )
    if serving.mode == "disaggregated":
        message.disaggregation.CopyFrom(
            pb.Disaggregation(
                prefill_workers=serving.prefill_workers, decode_workers=serving.decode_workers
            )
        )
    return message


def serving_from_proto(message: pb.ServingConfig) -> Serving:
    """Raw values (not validated): hub.serving.normalize checks them."""
    kv = message.kv_cache
    return Serving(
        engine=enum_word(pb.Engine, message.engine),
        engine_version=message.engine_version,
        model=message.model,
        tensor_parallel=message.tensor_parallel,
        pipeline_parallel=message.pipeline_parallel,
        expert_parallel=message.expert_parallel,
        context_length=message.context_length,
        quantization=message.quantization,
        kv_cache=KvCache(
            dtype=kv.dtype,
            gpu_memory_utilization=kv.gpu_memory_utilization,
            block_size=kv.block_size,
            disable_prefix_caching=kv.disable_prefix_caching,
        ),
        engine_args=tuple(message.engine_args),
        mode=enum_word(pb.ServingMode, message.mode) or "aggregated",
        prefill_workers=message.disaggregation.prefill_workers,
        decode_workers=message.disaggregation.decode_workers,
        router_mode=enum_word(pb.RouterMode, message.router_mode),
        image=message.image,
        runtime_version=message.runtime_version,
    )


def device_to_proto(device: Device) -> pb.Device:
    return pb.Device(
        uuid=device.uuid,
        name=device.name,
        memory_bytes=device.memory_bytes,
        pci_bus_id=device.pci_bus_id,
        device_class=device.device_class,
        healthy=device.healthy,
        health_reason=device.health_reason,
        verified=device.verified,
        nvlink_domain=device.nvlink_domain,
        parent_uuid=device.parent_uuid,
    )
