"""A whole-cluster agent's stream open is one trip to the store-writer thread (docs/stream.md
"No write on the event loop"): its session is recorded and marked the cluster's leader in one
transaction, not recorded and then marked in a second write.

Structural, not a timing: `sync_service.set_leader` (the separate leader mark) is wrapped to
count its calls; a whole-cluster agent connecting, and a second one superseding it, are each
marked the only leader without it (on the old code each open called it once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hub.service import sync as sync_service
from tests.harness import Hub, SimAgent, wait_until
from tests.integration.rawstream import RawStream


@pytest.fixture
def marks(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    called: list[str | None] = []
    original = sync_service.set_leader

    def set_leader(ctx: Any, *, cluster_id: str, session_id: str | None) -> None:
        called.append(session_id)
        original(ctx, cluster_id=cluster_id, session_id=session_id)

    monkeypatch.setattr(sync_service, "set_leader", set_leader)
    return called


def leaders(hub: Hub) -> list[str]:
    return [a["instance"] for a in hub.get("/v1/clusters/east")["agents"] if a["leader"]]


def test_a_whole_cluster_agent_is_marked_the_leader_when_its_session_is_recorded(
    hub: Hub, agents: Callable[..., SimAgent], marks: list[str | None]
) -> None:
    token = hub.register_cluster("east")
    first = RawStream(hub.grpc_target, token)
    first.hello("east", agent_instance="raw-1")
    first.receive_kind("welcome")
    assert leaders(hub) == ["raw-1"]
    # A newer stream of the whole cluster supersedes it, and is the only one marked.
    agents(cluster_id="east", token=token, spec="nodes=1,gpus=2,class=H100-80GB")
    wait_until(lambda: leaders(hub) not in ([], ["raw-1"]), what="the new agent leads")
    (second,) = leaders(hub)
    assert second != "raw-1"
    assert marks == [], "marked in the session's own transaction"
    first.close()
