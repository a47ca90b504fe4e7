"""An agent's report of the object it applied is hostile input until checked (issue 9, item 7):
bounded in size, a JSON object, its digest the hash of its body (hub/sync/observed.py)."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from hub import errors
from hub.model import ObservationBatch
from hub.sync import convert, fields, observed
from wingsmith.v1 import sync_pb2

BODY = json.dumps({"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment"})


def digest(body: str) -> str:
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def batch(**applied: object) -> sync_pb2.ObservationBatch:
    fields: dict[str, object] = {
        "api_version": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "namespace": "wingsmith",
        "name": "chat",
        "digest": digest(BODY),
        "body": BODY,
        **applied,
    }
    return sync_pb2.ObservationBatch(
        seq=1,
        deployments=[
            sync_pb2.DeploymentObservation(
                deployment_id="dep_0123456789abcdef",
                observe_unix_nanos=time.time_ns(),
                applied=sync_pb2.AppliedObjectReport(**fields),
            )
        ],
    )


def check(message: sync_pb2.ObservationBatch) -> ObservationBatch:
    return convert.observations(message, convert.Checker(now_ns=time.time_ns(), max_skew_ns=10**12))


def test_a_well_formed_applied_object_is_taken_whole() -> None:
    (observation,) = check(batch()).deployments
    assert observation.applied is not None and observation.applied.body == BODY
    assert (observation.applied.namespace, observation.applied.name) == ("wingsmith", "chat")


big = json.dumps({"spec": "x" * (fields.MAX_APPLIED_BYTES + 1)})


@pytest.mark.parametrize(
    ("case", "fields", "path"),
    [
        ("over the size cap", {"body": big, "digest": digest(big)}, "applied.body"),
        ("not JSON", {"body": "{nope", "digest": digest("{nope")}, "applied.body"),
        ("a JSON list", {"body": "[1]", "digest": digest("[1]")}, "applied.body"),
        ("a digest of something else", {"digest": digest("other")}, "applied.digest"),
        ("a malformed digest", {"digest": "md5:00"}, "applied.digest"),
        ("a body beside truncated", {"truncated": True}, "applied.body"),
        ("no kind", {"kind": ""}, "applied.kind"),
        ("a name no object can have", {"name": "Chat/../x"}, "applied.name"),
    ],
)
def test_a_bad_applied_object_refuses_the_batch_naming_the_field(
    case: str, fields: dict[str, object], path: str
) -> None:
    with pytest.raises(errors.InvalidArgument) as refused:
        check(batch(**fields))
    assert refused.value.field.endswith(path), case


def test_a_truncated_object_keeps_its_coordinates_and_digest() -> None:
    (observation,) = check(batch(body="", truncated=True)).deployments
    assert (
        observation.applied is not None
        and observation.applied.truncated
        and observation.applied.body == ""
    )
    assert observation.applied.digest == digest(BODY)


def test_a_body_reported_again_is_compared_not_parsed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every report of a deployment carries what its agent applied: a body checked once under
    its digest is not parsed and hashed again (observed.BODIES), yet the same digest with any
    other body is checked, and refused."""
    body = json.dumps({"kind": "DynamoGraphDeployment", "metadata": {"name": "again"}})
    check(batch(body=body, digest=digest(body)))  # checked and kept
    parsed: list[str] = []
    real_loads = json.loads
    monkeypatch.setattr(
        observed.json, "loads", lambda text: parsed.append(text) or real_loads(text)
    )
    (observation,) = check(batch(body=body, digest=digest(body))).deployments
    assert observation.applied is not None and observation.applied.body == body
    assert parsed == []
    # The same digest, another body (valid JSON): the digest is checked against it.
    other = json.dumps({"kind": "DynamoGraphDeployment", "metadata": {"name": "other"}})
    with pytest.raises(errors.InvalidArgument) as refused:
        check(batch(body=other, digest=digest(body)))
    assert refused.value.field.endswith("applied.digest")
    assert parsed == [other]


def test_a_refused_body_is_never_kept() -> None:
    for _ in range(2):  # refused the second time too: nothing was kept the first
        with pytest.raises(errors.InvalidArgument):
            check(batch(body="[1]", digest=digest("[1]")))
    assert observed.BODIES.get(digest("[1]")) is None
