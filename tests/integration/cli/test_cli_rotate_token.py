"""`wingsmith rotate-token cluster X [--revoke-certificates]` against a real hub: a new agent
token shown once, the old one refused by the hub's sync stream from then on."""

from __future__ import annotations

import json
import re

import grpc
import pytest

from tests.integration.cli.conftest import Runner
from tests.integration.rawstream import RawStream


def _stream_code(target: str, token: str) -> grpc.StatusCode | None:
    """Open a real sync stream with `token`: None once welcomed, else the refusal's code."""
    stream = RawStream(target, token)
    try:
        stream.hello("east")
        stream.receive_kind("welcome")
        return None
    except grpc.RpcError as e:
        code: grpc.StatusCode = e.code()
        return code
    finally:
        stream.close()


def _token(text: str) -> str:
    found = re.findall(r"wsa_[A-Za-z0-9_-]+", text)
    assert found, text
    return str(found[0])


def test_rotate_token_prints_a_new_token_and_the_old_one_stops_working(cli: Runner) -> None:
    old = cli.hub.client().post("/v1/clusters", {"cluster_id": "east"})["token"]
    assert _stream_code(cli.hub.grpc_target, old) is None

    out = cli.ok("rotate-token", "cluster", "east")
    assert "cluster/east token rotated: the old token no longer works" in out
    assert "shown once" in out
    new = _token(out)
    assert new != old
    assert _stream_code(cli.hub.grpc_target, old) == grpc.StatusCode.UNAUTHENTICATED
    assert _stream_code(cli.hub.grpc_target, new) is None

    answer = json.loads(
        cli.ok("rotate-token", "cluster", "east", "--revoke-certificates", "-o", "json")
    )
    assert answer["cluster"]["cluster_id"] == "east"
    assert _stream_code(cli.hub.grpc_target, new) == grpc.StatusCode.UNAUTHENTICATED
    assert _stream_code(cli.hub.grpc_target, answer["token"]) is None


def test_rotate_token_of_an_unknown_cluster_says_so(cli: Runner) -> None:
    missing = cli("rotate-token", "cluster", "nowhere")
    assert missing.code == 1
    assert missing.err == "error: 404 NOT_FOUND: cluster 'nowhere' not found\n"
    with pytest.raises(SystemExit) as usage:
        cli("rotate-token", "project", "east")
    assert usage.value.code == 2
    assert "invalid choice: 'project' (choose from 'cluster')" in cli.capsys.readouterr().err
