"""The one record <-> message converter (common/convert.py), over every pair of a message and
the record it converts to or from, on both sides.

`PAIRS` names each pair with the message fields the converter does not copy (the caller gives
them) and the record fields the message lacks. A message field added without a record field
of the same name, or a listing here, fails `test_every_message_field_has_a_mapping`; a field
the converter drops, swaps or misreads fails the round trip, which builds each record with
every field off its default and distinct.
"""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
import types
import typing
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

import agent.dgd_status
import agent.model
import agent.observe
from agent.devices import model as devices_model
from agent.devices import verify
from agent.sync import convert as agent_convert
from common import convert, discovered, serving
from hub import model as hub_model
from hub import wire  # noqa: F401  (registers FailoverPolicy's two functions)
from hub.service import views, workloads
from tests.records import every_field_deployment
from wingsmith.v1 import resources_pb2 as pb
from wingsmith.v1 import sync_pb2


@dataclasses.dataclass(frozen=True)
class Pair:
    message: Any
    record: Any
    # Message fields the caller gives (derived, or output only), not copied by name.
    given: frozenset[str] = frozenset()
    # Record fields a reader must give: nested records the wire carries only part of (an
    # output-only message; their own pair checks them).
    read_given: frozenset[str] = frozenset()

    @property
    def id(self) -> str:
        return f"{self.message.DESCRIPTOR.name}<->{self.record.__module__}.{self.record.__name__}"


def _pair(message: Any, record: Any, *given: str) -> Pair:
    return Pair(message, record, frozenset(given))


PAIRS = [
    # Shared by both sides.
    _pair(pb.ServingConfig, serving.Serving, "disaggregation"),
    _pair(pb.KvCacheConfig, serving.KvCache),
    _pair(pb.DiscoveredService, discovered.DiscoveredService),
    _pair(sync_pb2.ReplicaReport, discovered.ReplicaObservation),
    _pair(sync_pb2.DiscoveredObservation, discovered.DiscoveredObservation, "observe_unix_nanos"),
    # Hub (hub/wire.py, hub/api/convert.py).
    _pair(pb.Device, hub_model.Device),
    _pair(pb.QuotaUsage, hub_model.QuotaUsage),
    _pair(pb.Project, hub_model.Project, "usage", "dry_run"),
    Pair(
        pb.Cluster,
        hub_model.Cluster,
        frozenset(
            {
                "connected",
                "cordoned",
                "cordoned_device_classes",
                "cordoned_nodes",
                "devices",
                "draining",
                "dry_run",
                "never_connected",
                "nodes",
                "stale",
            }
        ),
        # The agents' session ids stay on the hub (AgentSession's own pair round-trips them).
        read_given=frozenset({"agents"}),
    ),
    _pair(pb.AgentSession, hub_model.AgentSession),
    _pair(pb.Node, hub_model.NodeObservation, "cordoned", "observe_time"),
    _pair(pb.DeviceCapacity, hub_model.Capacity, "free"),
    _pair(pb.Placement, hub_model.Placement),
    _pair(pb.PlacementPreference, hub_model.PlacementPreference),
    _pair(pb.Allocation, hub_model.Allocation),
    _pair(pb.AppliedObject, hub_model.AppliedObject, "observe_time"),
    _pair(pb.ApiToken, hub_model.ApiToken),
    _pair(
        pb.Workload,
        hub_model.Workload,
        "phase",
        "degraded",
        "ready_replicas",
        "deployments",
        "devices_per_replica",
        "failovers",
        "rollout_status",
        "dry_run",
        # The rollout's state on the record, its policy on the wire.
        "rollout",
    ),
    _pair(
        pb.Workload,
        workloads.WorkloadSpec,
        "workload_id",
        "phase",
        "degraded",
        "ready_replicas",
        "deployments",
        "devices_per_replica",
        "create_time",
        "update_time",
        "failovers",
        "rollout",
        "rollout_status",
        "dry_run",
    ),
    _pair(pb.RolloutPolicy, hub_model.RolloutPolicy),
    _pair(pb.FailoverStatus, hub_model.FailoverRecord, "failback_time"),
    _pair(pb.RolloutStatus, views.RolloutView, "state"),
    _pair(pb.Difference, views.Difference),
    _pair(pb.AuditRecord, hub_model.AuditRecord),
    _pair(
        pb.Deployment,
        hub_model.Deployment,
        "name",
        "admission_phase",
        "applied",
        "degraded",
        "drift",
        "dry_run",
        "failover_for",
        "failover_replicas",
        "live_digests",
        "rollout",
        "status",
        "sync",
        "topology_violations",
        # A word on the record, a message on the wire (hub/api/convert.py builds it).
        "adopted_from",
    ),
    # Agent (agent/sync/convert.py).
    _pair(sync_pb2.DeploymentSpec, agent.model.DeploymentSpec),
    _pair(sync_pb2.DeploymentStatusReport, agent.dgd_status.StatusObservation),
    _pair(sync_pb2.AppliedObjectReport, agent.dgd_status.AppliedObject),
    _pair(
        sync_pb2.DeploymentObservation, agent.observe.DeploymentObservation, "observe_unix_nanos"
    ),
    _pair(pb.Device, devices_model.Gpu, "verified"),
    _pair(sync_pb2.AllocationReport, verify.PodAllocation),
    _pair(sync_pb2.NodeObservation, agent.observe.NodeObservation, "observe_unix_nanos", "devices"),
]

# Messages of resources.proto and sync.proto no record maps to field by field, and why. A new
# message joins PAIRS or this list (test_every_message_is_paired_or_listed); control.proto's are
# RPC requests and responses, whose handlers read them field by field.
_VIEW = "built from a read view in hub/api/convert.py: most fields derived"
_STREAM = "a stream protocol message: no record, read and built in hub/sync and agent/sync"
BY_HAND = {
    "Disaggregation": "part of ServingConfig (common/serving.py registers Serving)",
    "Failover": "FailoverPolicy's registered functions (hub/wire.py): names carry units",
    "TopologyViolation": _VIEW,
    "AdoptedFrom": _VIEW,
    "DeploymentSummary": _VIEW,
    "WorkloadRollout": _VIEW,
    "WaveStatus": _VIEW,
    "DryRunResult": _VIEW,
    "DeploymentChange": _VIEW,
    "DeploymentStatus": _VIEW,
    "SyncState": _VIEW,
    "Replica": _VIEW,
    "Discovered": _VIEW,
    "AgentMessage": _STREAM,
    "HubMessage": _STREAM,
    "ClusterInfo": _STREAM,
    "Leadership": _STREAM,
    "Hello": _STREAM,
    "Ack": _STREAM,
    "Reject": _STREAM,
    "Heartbeat": _STREAM,
    "ObservationBatch": _STREAM,
    "ResyncRequest": _STREAM,
    "LeadershipGrant": _STREAM,
    "Fence": _STREAM,
    "Welcome": _STREAM,
    "HeldObservation": _STREAM,
    "DesiredState": _STREAM,
    "Problem": _STREAM,
}


def test_every_message_is_paired_or_listed() -> None:
    paired = {p.message.DESCRIPTOR.name for p in PAIRS}
    messages = {
        name for module in (pb, sync_pb2) for name in module.DESCRIPTOR.message_types_by_name
    }
    assert messages - paired - set(BY_HAND) == set(), "a message neither paired nor listed"
    assert set(BY_HAND) <= messages - paired, "a listed message that is gone or now paired"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_every_message_field_has_a_mapping(pair: Pair) -> None:
    """Each message field is copied from the record field of its name or given by the caller
    (listed in PAIRS): a new proto field with neither fails here, naming it."""
    fields = {f.name for f in pair.message.DESCRIPTOR.fields}
    record = {f.name for f in dataclasses.fields(pair.record)}
    assert fields - record - pair.given == set(), "a message field with no mapping"
    assert pair.given <= fields, "a listed field the message no longer has"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_a_record_crosses_the_wire_and_back_whole(pair: Pair) -> None:
    record = _every_field(pair.record, pair.message.DESCRIPTOR, itertools.count(1))
    message = convert.to_message(pair.message, record, **dict.fromkeys(pair.given))
    received = pair.message.FromString(message.SerializeToString())
    # The record's fields the message lacks (or the caller gives) come back as given.
    names = {f.name for f in pair.message.DESCRIPTOR.fields} - pair.given - pair.read_given
    rest = {
        f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in names
    }
    assert convert.from_message(pair.record, received, **rest) == record


def _to_message_by_loop(message_type: Any, record: Any, **given: Any) -> Any:
    """to_message as it was before it was generated: a loop over the plan (the reference)."""
    values = {name: value for name, value in given.items() if value is not None}
    record_type: Any = type(record)
    for name, to_wire in convert._to_plan(record_type, message_type.DESCRIPTOR):
        if name not in given:
            value = to_wire(getattr(record, name))
            if value is not None:
                values[name] = value
    return message_type(**values)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
@pytest.mark.parametrize("defaults", [False, True], ids=["every-field-set", "defaults"])
def test_the_generated_to_message_builds_what_the_plan_loop_built(
    pair: Pair, defaults: bool
) -> None:
    """to_message runs code generated per record type, message type and given fields: the
    same message as the loop over the same plan, given fields set or left unset."""
    record = _every_field(pair.record, pair.message.DESCRIPTOR, itertools.count(1))
    if defaults and convert._default_of(pair.record) is not None:
        record = convert._default_of(pair.record)
    for given in (
        dict.fromkeys(pair.given),
        {name: _given_value(pair, name) for name in pair.given},
    ):
        built = convert.to_message(pair.message, record, **given)
        assert built == _to_message_by_loop(pair.message, record, **given)
        assert built.SerializeToString(deterministic=True) == _to_message_by_loop(
            pair.message, record, **given
        ).SerializeToString(deterministic=True)


def _given_value(pair: Pair, name: str) -> Any:
    """A value for a given field: a message of its type, or a scalar off its default."""
    field = pair.message.DESCRIPTOR.fields_by_name[name]
    if field.is_repeated:  # maps too
        return None
    if field.message_type is not None:
        return convert._message_class(field.message_type)()
    if field.enum_type is not None:
        return field.enum_type.values[-1].number
    return {bool: True, str: "given", bytes: b"given", float: 1.5}.get(type(field.default_value), 7)


def test_an_unset_nested_message_reads_as_none_or_the_default() -> None:
    assert convert.from_message(serving.Serving, pb.ServingConfig()).kv_cache == serving.KvCache()
    observation = convert.from_message(
        agent.observe.DeploymentObservation, sync_pb2.DeploymentObservation()
    )
    assert observation.status is None and observation.applied is None
    # An optional nested record at its default is still sent: unset would read as None.
    placement = hub_model.Placement(failover=hub_model.FailoverPolicy())
    message = convert.to_message(pb.Placement, placement)
    assert convert.from_message(hub_model.Placement, message) == placement
    default = serving.Serving(engine="vllm", engine_version="1", model="m")
    assert not convert.serving_to_message(default).HasField("kv_cache"), "a default nested record"


@pytest.mark.parametrize(
    ("enum", "word", "number"),
    [
        (pb.Engine, "vllm", pb.ENGINE_VLLM),
        (pb.AdmissionPhase, "pending", pb.ADMISSION_PHASE_PENDING),
        (pb.Engine, "", pb.ENGINE_UNSPECIFIED),
    ],
)
def test_an_enum_is_its_word_without_the_type_prefix(enum: Any, word: str, number: int) -> None:
    assert convert.enum_word(enum, number) == word
    assert convert.enum_number(enum, word) == number


def test_an_enum_number_the_type_lacks_reads_as_unknown_and_a_bad_word_is_refused() -> None:
    assert convert.enum_word(pb.Engine, 99) == "unknown(99)"
    with pytest.raises(ValueError, match="Engine has no value 'nope'"):
        convert.enum_number(pb.Engine, "nope")


def test_a_map_of_messages_crosses_both_ways() -> None:
    """Maps of scalars and of nested records (Project's usage), each value converted."""

    @dataclasses.dataclass(frozen=True)
    class Usage:
        name: str
        quotas: dict[str, int]
        usage: dict[str, hub_model.QuotaUsage]

    record = Usage("p", {"H100": 3}, {"H100": hub_model.QuotaUsage(used=1, reserved=2, limit=3)})
    message = convert.to_message(pb.Project, record)
    assert message.usage["H100"].reserved == 2 and message.quotas["H100"] == 3
    assert convert.from_message(Usage, message) == record


def _every_field(record_type: Any, descriptor: Descriptor | None, count: Any) -> Any:
    """A `record_type` with every field set off its default, each value distinct; enum words
    chosen among the message's enum values."""
    hints = typing.get_type_hints(record_type)
    by_name = descriptor.fields_by_name if descriptor is not None else {}
    values = {
        f.name: _value(hints[f.name], by_name.get(f.name), count)
        for f in dataclasses.fields(record_type)
        if f.init
    }
    return record_type(**values)


def _value(hint: Any, field: FieldDescriptor | None, count: Any) -> Any:
    n = next(count)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), field, count)
    is_map = (
        field is not None
        and field.message_type is not None
        and (field.message_type.GetOptions().map_entry)
    )
    if origin is tuple:
        return tuple(_value(args[0], field, count) for _ in range(2))
    if origin is not None and args and len(args) == 2 and origin is not tuple:
        entry = field.message_type.fields_by_name["value"] if is_map and field else None
        return {f"k{n}": _value(args[1], entry, count), f"j{n}": _value(args[1], entry, count)}
    if field is not None and field.enum_type is not None:
        numbers = [v.number for v in field.enum_type.values if v.number]
        return convert.enum_word(field.enum_type, numbers[n % len(numbers)])
    if hint is str:
        return f"s{n}"
    if hint is bool:
        return True
    if hint is int:
        return n
    if hint is float:
        return n + 0.25
    if dataclasses.is_dataclass(hint):
        nested = field.message_type if field is not None else None
        if hint is serving.Serving:
            nested = pb.ServingConfig.DESCRIPTOR
        record = _every_field(hint, nested, count)
        if hint is serving.Serving:
            record = dataclasses.replace(record, mode="disaggregated")
        return record
    raise AssertionError(f"no test value for {hint!r}")


def test_a_field_named_alike_but_shaped_otherwise_must_be_given() -> None:
    """adopted_from is a word on the hub's record and a message on the wire: the converter
    refuses to guess, naming the field, until the caller gives it."""
    with pytest.raises(TypeError, match=r"wingsmith\.v1\.Deployment\.adopted_from: give it"):
        convert.to_message(pb.Deployment, every_field_deployment())
    message = convert.to_message(pb.Deployment, every_field_deployment(), adopted_from=None)
    assert not message.HasField("adopted_from")
    # A record nested under a name its message means otherwise (Workload's `rollout`: the
    # rollout's state on the hub, its policy on the wire) is refused too, not sent empty.
    workload = _every_field(hub_model.Workload, pb.Workload.DESCRIPTOR, itertools.count(1))
    with pytest.raises(TypeError, match=r"Workload\.rollout: give it, WorkloadRollout shares"):
        convert.to_message(pb.Workload, workload)


def test_the_agent_reads_an_enum_number_it_lacks_as_unknown_not_as_the_default() -> None:
    """A newer hub's authority is not taken for "managed" (the agent would take the DGD over),
    nor a newer engine or router mode for the default: the words name what came."""
    message = sync_pb2.DeploymentSpec(authority=99, admitted=True, enabled=True)
    message.serving.router_mode = 7  # type: ignore[assignment]
    spec = agent_convert.deployment(message)
    assert spec.authority == "unknown(99)" and not spec.should_run
    assert spec.serving.router_mode == "unknown(7)"


def test_the_hubs_core_loads_no_message_type_for_the_shared_serving_types() -> None:
    """hub.model re-exports common/serving.py's types: that module stays free of protobuf, so
    the store, the decisions and the service load none (the converter holds the wire form)."""
    probe = (
        "import sys, hub.model, hub.store.deployments, hub.admission, hub.placement; "
        "print(sorted(m for m in sys.modules if m.startswith(('google.protobuf', 'wingsmith'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
