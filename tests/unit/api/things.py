"""A small test-only proto ("wstest.Things"), built from text into its own descriptor pool.

It exercises what ControlService does not: nested `{a.b}` variables, `{x=segments/*}` and
`**`, a custom verb with body "*", additional bindings, response_body, a custom HTTP method,
repeated enums, bool/int64/Timestamp/nested query parameters, and rules the gateway must
refuse to build. Nothing in it is a Wingsmith type, which is the point: the gateway is generic.
"""

from __future__ import annotations

from google.api import annotations_pb2, http_pb2
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    empty_pb2,
    field_mask_pb2,
    message_factory,
    text_format,
    timestamp_pb2,
)
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor
from google.protobuf.message import Message

_OPTIONAL = "label: LABEL_OPTIONAL"
_REPEATED = "label: LABEL_REPEATED"


def _field(name: str, number: int, kind: str, *, repeated: bool = False, ref: str = "") -> str:
    type_name = f'type_name: "{ref}"' if ref else ""
    label = _REPEATED if repeated else _OPTIONAL
    return f'field {{ name: "{name}" number: {number} type: {kind} {label} {type_name} }}'


def _map_entry(name: str, value_kind: str) -> str:
    return (
        f'nested_type {{ name: "{name}" options {{ map_entry: true }} '
        f"{_field('key', 1, 'TYPE_STRING')} {_field('value', 2, value_kind)} }}"
    )


def _method(name: str, rule: str, *, returns: str = ".wstest.Thing") -> str:
    options = f"options {{ [google.api.http] {{ {rule} }} }}" if rule else ""
    return (
        f'method {{ name: "{name}" input_type: ".wstest.ThingRequest" '
        f'output_type: "{returns}" {options} }}'
    )


_FILE = f"""
name: "wstest/things.proto"
package: "wstest"
syntax: "proto3"
dependency: "google/api/annotations.proto"
dependency: "google/protobuf/field_mask.proto"
dependency: "google/protobuf/timestamp.proto"
dependency: "google/protobuf/empty.proto"
enum_type {{
  name: "Color"
  value {{ name: "COLOR_UNSPECIFIED" number: 0 }}
  value {{ name: "COLOR_RED" number: 1 }}
  value {{ name: "COLOR_DARK_BLUE" number: 2 }}
}}
message_type {{
  name: "Inner"
  {_field("size", 1, "TYPE_INT64")}
}}
message_type {{
  name: "Thing"
  {_field("name", 1, "TYPE_STRING")}
  {_field("count", 2, "TYPE_INT32")}
  {_field("colors", 3, "TYPE_ENUM", repeated=True, ref=".wstest.Color")}
  {_field("inner", 4, "TYPE_MESSAGE", ref=".wstest.Inner")}
  {_field("labels", 5, "TYPE_MESSAGE", repeated=True, ref=".wstest.Thing.LabelsEntry")}
  {_field("color_by_name", 6, "TYPE_MESSAGE", repeated=True, ref=".wstest.Thing.ColorByNameEntry")}
  {_map_entry("LabelsEntry", "TYPE_STRING")}
  {
    _map_entry("ColorByNameEntry", "TYPE_ENUM").replace(
        "type: TYPE_ENUM", 'type: TYPE_ENUM type_name: ".wstest.Color"'
    )
}
}}
message_type {{
  name: "Filter"
  {_field("min_count", 1, "TYPE_INT32")}
}}
message_type {{
  name: "ThingRequest"
  {_field("thing", 1, "TYPE_MESSAGE", ref=".wstest.Thing")}
  {_field("update_mask", 2, "TYPE_MESSAGE", ref=".google.protobuf.FieldMask")}
  {_field("validate_only", 3, "TYPE_BOOL")}
  {_field("tags", 4, "TYPE_STRING", repeated=True)}
  {_field("color", 5, "TYPE_ENUM", ref=".wstest.Color")}
  {_field("colors", 6, "TYPE_ENUM", repeated=True, ref=".wstest.Color")}
  {_field("parent", 7, "TYPE_STRING")}
  {_field("limit", 8, "TYPE_INT64")}
  {_field("path", 9, "TYPE_STRING")}
  {_field("since", 10, "TYPE_MESSAGE", ref=".google.protobuf.Timestamp")}
  {_field("filter", 11, "TYPE_MESSAGE", ref=".wstest.Filter")}
  {_field("labels", 12, "TYPE_MESSAGE", repeated=True, ref=".wstest.ThingRequest.LabelsEntry")}
  {_field("ratio", 13, "TYPE_DOUBLE")}
  {_map_entry("LabelsEntry", "TYPE_STRING")}
}}
service {{
  name: "Things"
  {_method("GetThing", 'get: "/v1/things/{thing.name}"')}
  {_method("GetSpecialThing", 'get: "/v1/things/special"')}
  {_method("UpdateThing", 'patch: "/v1/things/{thing.name}" body: "thing"')}
  {_method("ArchiveThing", 'post: "/v1/things/{thing.name}:archive" body: "*"')}
  {
    _method(
        "ListThings",
        'get: "/v1/{parent=shelves/*}/things" additional_bindings { get: "/v1/things" }',
    )
}
  {_method("GetThingName", 'get: "/v1/names/{thing.name}" response_body: "name"')}
  {_method("GetFile", 'get: "/v1/files/{path=**}"')}
  {
    _method(
        "PurgeThing",
        'custom { kind: "PURGE" path: "/v1/things/{thing.name}" }',
        returns=".google.protobuf.Empty",
    )
}
  method {{ name: "WatchThings" input_type: ".wstest.ThingRequest"
           output_type: ".wstest.Thing" server_streaming: true }}
}}
service {{
  name: "RepeatedVariable"
  {_method("Get", 'get: "/v1/tags/{tags}"')}
}}
service {{
  name: "UnknownVariable"
  {_method("Get", 'get: "/v1/nothing/{nothing}"')}
}}
service {{
  name: "UnknownBody"
  {_method("Create", 'post: "/v1/things" body: "nothing"')}
}}
service {{
  name: "DuplicateRoute"
  {_method("First", 'get: "/v1/things/{thing.name}"')}
  {_method("Second", 'get: "/v1/things/{parent}"')}
}}
service {{
  name: "StreamingWithRule"
  method {{ name: "Watch" input_type: ".wstest.ThingRequest" output_type: ".wstest.Thing"
           client_streaming: true options {{ [google.api.http] {{ get: "/v1/watch" }} }} }}
}}
"""


def _build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    dependencies: list[FileDescriptor] = [
        descriptor_pb2.DESCRIPTOR,
        http_pb2.DESCRIPTOR,
        annotations_pb2.DESCRIPTOR,
        field_mask_pb2.DESCRIPTOR,
        timestamp_pb2.DESCRIPTOR,
        empty_pb2.DESCRIPTOR,
    ]
    for dependency in dependencies:
        proto = descriptor_pb2.FileDescriptorProto()
        dependency.CopyToProto(proto)
        pool.Add(proto)
    pool.Add(text_format.Parse(_FILE, descriptor_pb2.FileDescriptorProto()))
    return pool


POOL = _build_pool()


def service(name: str) -> ServiceDescriptor:
    return POOL.FindServiceByName(f"wstest.{name}")


def message_class(name: str) -> type[Message]:
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"wstest.{name}"))


Thing = message_class("Thing")
ThingRequest = message_class("ThingRequest")
