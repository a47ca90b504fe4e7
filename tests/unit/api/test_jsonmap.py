"""The REST JSON mapping: enum words, nulls, int64 numbers, maps, errors with field paths."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf import empty_pb2, field_mask_pb2, json_format
from google.protobuf.message import Message

from hub.api import jsonmap, jsonread
from hub.errors import InvalidArgument
from wingsmith.v1 import control_pb2
from wingsmith.v1 import resources_pb2 as pb

from . import builders, things


def _all_fields_set(message: Message) -> bool:
    return {f.name for f, _ in message.ListFields()} == {f.name for f in message.DESCRIPTOR.fields}


# --------------------------------------------------------------------------------------------
# to_json


@pytest.mark.parametrize(
    ("message", "field", "word"),
    [
        (pb.Deployment(admission_phase=pb.ADMISSION_PHASE_PENDING), "admission_phase", "pending"),
        (pb.Deployment(admission_phase=pb.ADMISSION_PHASE_FAILED), "admission_phase", "failed"),
        (
            pb.Deployment(admission_reason=pb.ADMISSION_REASON_INSUFFICIENT_QUOTA),
            "admission_reason",
            "insufficient_quota",
        ),
        (pb.Deployment(authority=pb.AUTHORITY_MANAGED), "authority", "managed"),
        (pb.ServingConfig(engine=pb.ENGINE_VLLM), "engine", "vllm"),
        (pb.ServingConfig(engine=pb.ENGINE_TRTLLM), "engine", "trtllm"),
        (pb.ServingConfig(router_mode=pb.ROUTER_MODE_ROUND_ROBIN), "router_mode", "round_robin"),
        (pb.ServingConfig(mode=pb.SERVING_MODE_DISAGGREGATED), "mode", "disaggregated"),
    ],
)
def test_to_json_writes_enum_values_as_their_lower_case_word(
    message: Message, field: str, word: str
) -> None:
    assert jsonmap.to_json(message)[field] == word


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (pb.Deployment(), "admission_phase"),
        (pb.Deployment(), "authority"),
        (pb.ServingConfig(), "engine"),
        (pb.ServingConfig(), "router_mode"),
    ],
)
def test_to_json_writes_the_unspecified_enum_value_as_null(message: Message, field: str) -> None:
    assert jsonmap.to_json(message)[field] is None


def test_to_json_writes_an_unset_message_field_as_null_and_a_set_one_with_its_defaults() -> None:
    unreported = jsonmap.to_json(pb.Deployment(deployment_id="dep_1"))
    reported = jsonmap.to_json(pb.Deployment(status=pb.DeploymentStatus()))

    assert unreported["status"] is None
    assert unreported["sync"] is None
    assert unreported["create_time"] is None
    assert reported["status"] == {
        "phase": "",
        "reason": "",
        "message": "",
        "ready_replicas": 0,
        "desired_replicas": 0,
        "stale": False,
        "observe_time": None,
        "applied_replicas": 0,
        "replicas_owner": "",
    }


def test_to_json_writes_every_field_with_its_default_in_declaration_order() -> None:
    document = jsonmap.to_json(pb.Workload())

    assert list(document) == [f.name for f in pb.Workload.DESCRIPTOR.fields]
    assert document["name"] == ""
    assert document["replicas"] == 0
    assert document["degraded"] is False
    assert document["deployments"] == []
    assert document["serving"] is None


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        (pb.Deployment(generation=7), "generation", 7),
        (pb.Deployment(generation=2**53 + 1), "generation", 2**53 + 1),
        (pb.Cluster(desired_revision=2**63 - 1), "desired_revision", 2**63 - 1),
        (pb.Cluster(applied_revision=-(2**63)), "applied_revision", -(2**63)),
        (pb.Device(memory_bytes=2**64 - 1), "memory_bytes", 2**64 - 1),
        (pb.Device(memory_bytes=80 * 2**30), "memory_bytes", 80 * 2**30),
    ],
)
def test_to_json_writes_int64_and_uint64_as_exact_json_numbers(
    message: Message, field: str, number: int
) -> None:
    value = jsonmap.to_json(message)[field]

    assert type(value) is int
    assert value == number
    assert json.loads(json.dumps(jsonmap.to_json(message)))[field] == number


def test_to_json_writes_maps_as_objects_with_sorted_keys_and_message_values_in_full() -> None:
    project = pb.Project(
        quotas={"H100-80GB": 16, "A100-40GB": 4},
        usage={"H100-80GB": pb.QuotaUsage(used=3, limit=16)},
    )

    document = jsonmap.to_json(project)

    assert list(document["quotas"]) == ["A100-40GB", "H100-80GB"]
    assert document["quotas"]["H100-80GB"] == 16
    assert document["usage"] == {"H100-80GB": {"used": 3, "reserved": 0, "limit": 16}}


def test_to_json_writes_repeated_and_map_enum_values_as_words_and_unspecified_as_null() -> None:
    thing = things.Thing(colors=[2, 0, 1], color_by_name={"sky": 2, "void": 0})

    document = jsonmap.to_json(thing)

    assert document["colors"] == ["dark_blue", None, "red"]
    assert document["color_by_name"] == {"sky": "dark_blue", "void": None}


def test_to_json_writes_well_known_types_in_their_protojson_form() -> None:
    workload = pb.Workload(create_time={"seconds": 1_700_000_000, "nanos": 500_000_000})
    request = control_pb2.UpdateWorkloadRequest(
        update_mask=field_mask_pb2.FieldMask(paths=["replicas", "serving.engine_version"])
    )

    assert jsonmap.to_json(workload)["create_time"] == "2023-11-14T22:13:20.500Z"
    assert jsonmap.to_json(request)["update_mask"] == "replicas,serving.engineVersion"
    assert jsonmap.to_json(empty_pb2.Empty()) == {}


def test_to_json_is_deterministic_whatever_order_the_message_was_built_in() -> None:
    first = pb.Deployment(live_digests={"svg_b": 1, "svg_a": 2}, generation=3, enabled=True)
    second = pb.Deployment(enabled=True)
    second.live_digests["svg_a"] = 2
    second.live_digests["svg_b"] = 1
    second.generation = 3

    assert json.dumps(jsonmap.to_json(first)) == json.dumps(jsonmap.to_json(second))
    assert jsonmap.to_json(first) == jsonmap.to_json(first)


# --------------------------------------------------------------------------------------------
# from_json


@pytest.mark.parametrize(
    ("value", "engine"),
    [
        ("vllm", pb.ENGINE_VLLM),
        ("ENGINE_VLLM", pb.ENGINE_VLLM),
        ("trtllm", pb.ENGINE_TRTLLM),
        ("ENGINE_UNSPECIFIED", pb.ENGINE_UNSPECIFIED),
        (None, pb.ENGINE_UNSPECIFIED),
    ],
)
def test_from_json_reads_an_enum_as_its_word_its_full_name_or_null(
    value: str | None, engine: int
) -> None:
    assert jsonread.from_json({"engine": value}, pb.ServingConfig).engine == engine


def test_from_json_reads_repeated_and_map_enums_with_null_as_unspecified() -> None:
    thing = jsonread.from_json(
        {"colors": ["red", None, "COLOR_DARK_BLUE"], "color_by_name": {"a": "red", "b": None}},
        things.Thing,
    )

    assert list(thing.colors) == [1, 0, 2]
    assert dict(thing.color_by_name) == {"a": 1, "b": 0}


def test_from_json_reads_null_as_unset_and_int64_text_and_numbers() -> None:
    deployment = jsonread.from_json(
        {"status": None, "generation": "9007199254740993", "desired_replicas": 3.0},
        pb.Deployment,
    )

    assert not deployment.HasField("status")
    assert deployment.generation == 2**53 + 1
    assert deployment.desired_replicas == 3


def test_from_json_accepts_protojson_camel_case_names_and_field_mask_paths_in_either_case() -> None:
    workload = jsonread.from_json({"deviceClass": "H100-80GB"}, pb.Workload)
    request = jsonread.from_json(
        {"update_mask": "replicas,serving.engine_version,serving.kvCache"},
        control_pb2.UpdateWorkloadRequest,
    )

    assert workload.device_class == "H100-80GB"
    assert list(request.update_mask.paths) == [
        "replicas",
        "serving.engine_version",
        "serving.kv_cache",
    ]


def test_from_json_merges_into_an_instance_it_is_given() -> None:
    workload = pb.Workload(name="llama", replicas=2)

    result = jsonread.from_json({"replicas": 6}, workload)

    assert result is workload
    assert (workload.name, workload.replicas) == ("llama", 6)


_BAD: list[tuple[Any, type[Message], str, str]] = [
    # (document, message type, path prefix, expected InvalidArgument.field)
    ({"serving": {"engine": "vlm"}}, pb.Workload, "workload", "workload.serving.engine"),
    ({"serving": {"engine": 1}}, pb.Workload, "workload", "workload.serving.engine"),
    ({"serving": {"engin": "vllm"}}, pb.Workload, "workload", "workload.serving.engin"),
    ({"servng": {}}, pb.Workload, "", "servng"),
    ({"name": 5}, pb.Workload, "workload", "workload.name"),
    ({"replicas": "six"}, pb.Workload, "", "replicas"),
    ({"replicas": 1.5}, pb.Workload, "", "replicas"),
    ({"replicas": True}, pb.Workload, "", "replicas"),
    ({"replicas": 2**31}, pb.Workload, "", "replicas"),
    ({"degraded": "yes"}, pb.Workload, "", "degraded"),
    ({"serving": []}, pb.Workload, "", "serving"),
    (
        {"serving": {"kv_cache": {"gpu_memory_utilization": "most"}}},
        pb.Workload,
        "",
        "serving.kv_cache.gpu_memory_utilization",
    ),
    ({"placement": {"clusters": "east"}}, pb.Workload, "", "placement.clusters"),
    ({"placement": {"clusters": ["east", 7]}}, pb.Workload, "", "placement.clusters[1]"),
    ({"placement": {"clusters": [None]}}, pb.Workload, "", "placement.clusters[0]"),
    ({"quotas": {"H100-80GB": "lots"}}, pb.Project, "project", 'project.quotas["H100-80GB"]'),
    ({"quotas": ["H100-80GB"]}, pb.Project, "project", "project.quotas"),
    ({"create_time": "yesterday"}, pb.Workload, "", "create_time"),
    ({"device_class": "a", "deviceClass": "b"}, pb.Workload, "", "device_class"),
    ({"colors": ["red", "green"]}, things.Thing, "thing", "thing.colors[1]"),
    ({"update_mask": 5}, control_pb2.UpdateWorkloadRequest, "", "update_mask"),
    ([1, 2], pb.Workload, "workload", "workload"),
    ("text", pb.Workload, "", ""),
]


@pytest.mark.parametrize(("document", "message_type", "path", "field"), _BAD)
def test_from_json_refuses_bad_input_with_the_dotted_path_of_the_offending_value(
    document: Any, message_type: type[Message], path: str, field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        jsonread.from_json(document, message_type, path=path)

    assert caught.value.field == field


def test_from_json_names_the_accepted_enum_words_when_a_value_is_unknown() -> None:
    with pytest.raises(InvalidArgument) as caught:
        jsonread.from_json({"serving": {"engine": "vlm"}}, pb.Workload, path="workload")

    assert caught.value.field == "workload.serving.engine"
    assert "vllm, sglang, trtllm" in caught.value.problem


def test_from_json_wraps_json_format_errors_instead_of_letting_them_escape() -> None:
    with pytest.raises(InvalidArgument) as caught:
        jsonread.from_json({"create_time": "2025-13-45T99:00:00Z"}, pb.Workload)

    assert isinstance(caught.value.__cause__, json_format.ParseError)


# --------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("build", [builders.workload, builders.deployment])
def test_a_fully_populated_resource_survives_a_round_trip_through_json_text(build: Any) -> None:
    message = build()
    assert _all_fields_set(message), "the builder must set every field"

    text = json.dumps(jsonmap.to_json(message))
    back = jsonread.from_json(json.loads(text), type(message))

    assert back == message
