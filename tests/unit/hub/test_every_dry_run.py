"""Every mutating call takes validate_only (issue 20 section 4), and its dry answer is what the
real call then does. Through the control handlers (what both edges dispatch to), on each store
backend: the request descriptors (a new mutating RPC without the field fails here), then, for
the calls with no preview of their own (projects, clusters, discovered decisions, tokens), a
dry call that writes nothing (every row of every table compared) and answers as the real
call made right after, less what only a real call makes (a token, a secret)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from google.protobuf.message import Message

from hub import errors
from hub.api import permissions
from hub.api.control import ControlHandlers
from hub.model import DiscoveredObservation, ObservationBatch
from hub.service import ingest, workloads
from hub.service.context import ServiceContext
from hub.store.port import open_store
from tests.unit.hub.test_dry_run import RecordingPublisher, dump, fleet, published, spec
from wingsmith.v1 import control_pb2 as cpb
from wingsmith.v1 import resources_pb2 as pb

H100 = "H100-80GB"
SERVICE = cpb.DESCRIPTOR.services_by_name["ControlService"]
# What only a real call makes (credentials: strings) or stamps (times): compared apart.
MADE = ("token", "secret", "create_time", "update_time", "revoke_time", "dry_run")


def test_every_mutating_rpc_takes_validate_only() -> None:
    missing = [
        m.name
        for m in SERVICE.methods
        if permissions.rule_for(m.name).mutating
        and "validate_only" not in m.input_type.fields_by_name
    ]
    assert not missing, f"give these requests validate_only (AIP-163): {missing}"


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    ctx = ServiceContext(db=open_store(store_url), publisher=RecordingPublisher())
    fleet(ctx, quota=4)  # one replica of 4 GPUs; a second waits on the quota
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    sighting = DiscoveredObservation("ml", "legacy", time.time_ns(), replicas=1)
    ingest.ingest(ctx, [("east", ObservationBatch(seq=9, discovered=(sighting,)))])
    return ctx


def discovered_id(handlers: ControlHandlers) -> str:
    (found,) = handlers.ListDiscovered(cpb.ListDiscoveredRequest()).discovered
    return found.discovered_id


CALLS: dict[str, Callable[[ControlHandlers], tuple[str, Message]]] = {
    "CreateProject": lambda h: (
        "CreateProject",
        cpb.CreateProjectRequest(project=pb.Project(name="ads", quotas={H100: 8})),
    ),
    "UpdateProject": lambda h: (
        "UpdateProject",
        cpb.UpdateProjectRequest(
            name="search", project=pb.Project(quotas={H100: 8}), update_mask={"paths": ["quotas"]}
        ),
    ),
    "DeleteProject": lambda h: ("DeleteProject", cpb.DeleteProjectRequest(name="search")),
    "CreateCluster": lambda h: (
        "CreateCluster",
        cpb.CreateClusterRequest(cluster=pb.Cluster(cluster_id="north", labels={"gpu": "h100"})),
    ),
    "UpdateCluster": lambda h: (
        "UpdateCluster",
        cpb.UpdateClusterRequest(
            cluster_id="east",
            cluster=pb.Cluster(labels={"region": "eu"}),
            update_mask={"paths": ["labels"]},
        ),
    ),
    "DeleteCluster": lambda h: ("DeleteCluster", cpb.DeleteClusterRequest(cluster_id="west")),
    "RotateClusterToken": lambda h: (
        "RotateClusterToken",
        cpb.RotateClusterTokenRequest(cluster_id="east", revoke_certificates=True),
    ),
    "TrackDiscovered": lambda h: (
        "TrackDiscovered",
        cpb.TrackDiscoveredRequest(ref=discovered_id(h)),
    ),
    "IgnoreDiscovered": lambda h: (
        "IgnoreDiscovered",
        cpb.IgnoreDiscoveredRequest(ref=discovered_id(h)),
    ),
    "CreateApiToken": lambda h: (
        "CreateApiToken",
        cpb.CreateApiTokenRequest(token=pb.ApiToken(name="ci", role=pb.API_ROLE_FLEET_VIEWER)),
    ),
    "RevokeApiToken": lambda h: ("RevokeApiToken", cpb.RevokeApiTokenRequest(name="old")),
}


def without_made(message: Message) -> Message:
    """The answer less what only a real call makes or stamps (at any depth)."""
    copy = type(message)()
    copy.CopyFrom(message)
    stack = [copy]
    while stack:
        current = stack.pop()
        for field, value in current.ListFields():
            if field.name in MADE:
                current.ClearField(field.name)
            elif field.type != field.TYPE_MESSAGE:
                continue
            elif not field.is_repeated:
                stack.append(value)
            elif not field.message_type.GetOptions().map_entry:
                stack.extend(value)
    return copy


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_dry_call_writes_nothing_and_answers_as_the_real_call(
    ctx: ServiceContext, call: str
) -> None:
    handlers = ControlHandlers(ctx)
    handlers.CreateApiToken(
        cpb.CreateApiTokenRequest(token=pb.ApiToken(name="old", role=pb.API_ROLE_ADMIN))
    )
    if call == "DeleteProject":
        workloads.delete(ctx, "chat")  # a project with workloads is not deleted
    method, request = CALLS[call](handlers)
    before, told = dump(ctx), len(published(ctx))

    dry_request = type(request)()
    dry_request.CopyFrom(request)
    dry_request.validate_only = True  # type: ignore[attr-defined]
    dry = getattr(handlers, method)(dry_request)

    assert dump(ctx) == before, "a dry run writes no row"
    assert len(published(ctx)) == told, "and tells no agent anything"
    for made in ("token", "secret"):
        if made in dry.DESCRIPTOR.fields_by_name and isinstance(getattr(dry, made), str):
            assert not getattr(dry, made), f"a dry {method} makes no {made}"
    real = getattr(handlers, method)(request)
    assert without_made(dry) == without_made(real)
    assert dump(ctx) != before, "the real call writes"


def test_a_dry_quota_raise_says_what_it_would_admit(ctx: ServiceContext) -> None:
    handlers = ControlHandlers(ctx)
    _, request = CALLS["UpdateProject"](handlers)
    request.validate_only = True  # type: ignore[attr-defined]

    answer = handlers.UpdateProject(request)  # type: ignore[arg-type]

    assert answer.quotas[H100] == 8
    assert [(c.name, list(c.effects)) for c in answer.dry_run.changes] == [
        ("chat.east", ["admitted"])
    ]


def test_a_dry_call_is_refused_as_the_real_one(ctx: ServiceContext) -> None:
    handlers = ControlHandlers(ctx)
    for request in (
        cpb.DeleteClusterRequest(cluster_id="east", validate_only=True),  # it holds chat
        cpb.DeleteClusterRequest(cluster_id="mars", validate_only=True),
    ):
        with pytest.raises(errors.WingsmithError) as dry:
            handlers.DeleteCluster(request)
        request.validate_only = False
        with pytest.raises(errors.WingsmithError) as real:
            handlers.DeleteCluster(request)
        assert (type(dry.value), str(dry.value)) == (type(real.value), str(real.value))
