"""The derived record <-> message mappings (hub.wire.message_from on the hub, record_from in
agent/sync/convert.py): a deployment crosses hub -> DeploymentSpec -> agent with every field
intact, a field both sides name the same is copied with no line in either converter, and a
field given explicitly wins over the copy."""

from __future__ import annotations

import dataclasses

from agent.sync import convert as agent_convert
from hub import wire
from hub.model import Deployment
from hub.sync import convert as hub_convert
from tests.records import CONFIG, every_field_deployment
from wingsmith.v1 import resources_pb2 as pb
from wingsmith.v1 import sync_pb2


def test_a_deployment_reaches_the_agent_with_every_field_intact() -> None:
    d = every_field_deployment()
    message = hub_convert.deployment_spec(d)
    spec = agent_convert.deployment(sync_pb2.DeploymentSpec.FromString(message.SerializeToString()))
    received = dataclasses.asdict(spec)
    # Fields both sides name alike arrive as the hub holds them (a new one with no test line).
    hub_side = {f.name for f in dataclasses.fields(Deployment)} - {"serving"}
    alike = hub_side & set(received)
    assert len(alike) >= 14, alike
    for name in alike:
        assert received[name] == getattr(d, name), name
    # The rest, derived: the name, what runs, the serving config, adoption.
    assert {k: v for k, v in received.items() if k not in alike} == {
        "name": "chat.east",
        "replicas": 4,
        "admitted": True,
        "serving": dataclasses.asdict(agent_convert.serving(wire.serving_to_proto(CONFIG))),
        "adopted": True,
    }
    # What the converter derives rather than copies: a disabled deployment runs no replica.
    assert hub_convert.deployment_spec(every_field_deployment(enabled=False)).replicas == 0
    # An unset authority reads as managed on the agent (an old hub's message).
    message.ClearField("authority")
    assert agent_convert.deployment(message).authority == "managed"


def test_every_field_of_the_same_name_is_copied_and_given_ones_win() -> None:
    d = every_field_deployment()
    # adopted_from is a word on the record and a message on the wire: the caller gives it.
    message = wire.message_from(pb.Deployment, d, admission_message="as of now", adopted_from=None)
    model_fields = {f.name for f in dataclasses.fields(Deployment)}
    copied = [
        f
        for f in pb.Deployment.DESCRIPTOR.fields
        if f.name in model_fields
        and f.message_type is None
        and f.name not in ("admission_message", "adopted_from")
    ]
    assert len(copied) >= 15, "the scalars, enums and repeated fields both sides name alike"
    for field in copied:
        value = getattr(message, field.name)
        expected = getattr(d, field.name)
        if field.enum_type is not None:
            assert value == wire.enum_value(getattr(pb, field.enum_type.name), expected), field.name
        elif field.is_repeated:
            assert tuple(value) == expected, field.name
        else:
            assert value == expected, field.name
    assert message.admission_message == "as of now"
    # Nested messages by the same rule (common/convert.py): timestamps from seconds.
    assert message.create_time.ToNanoseconds() == int(d.create_time * 1e9)
    assert not message.HasField("adopted_from"), "a given None leaves the field unset"
