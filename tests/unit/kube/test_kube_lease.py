"""Leader election over a real Lease on the Kubernetes API emulator: one leader at a time,
terms that grow with every change of hands, takeover after expiry, release on stop."""

from __future__ import annotations

import datetime
from typing import Any

from agent.cluster.kube.lease import LeaseElector, LeaseTiming
from tests.fake_kube import KubeEmulator

T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
TIMING = LeaseTiming(lease_duration_s=15, renew_deadline_s=10, retry_s=2)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


def elector(
    api_client: Any, identity: str, clock: Clock, changes: list[tuple[str, bool, int]]
) -> LeaseElector:
    return LeaseElector(
        api_client,
        namespace="wingsmith",
        name="wingsmith-hangar",
        identity=identity,
        on_change=lambda leading, term: changes.append((identity, leading, term)),
        timing=TIMING,
        clock=clock,
    )


def test_the_first_pod_creates_the_lease_and_leads_with_term_one(
    api_client: Any, emulator: KubeEmulator
) -> None:
    clock, changes = Clock(), []
    a = elector(api_client, "pod-a", clock, changes)
    assert a.step().leading and a.state.term == 1
    assert changes == [("pod-a", True, 1)]
    lease = emulator.store.get(_lease_kind(), "wingsmith", "wingsmith-hangar")
    assert lease is not None and lease["spec"]["holderIdentity"] == "pod-a"


def test_only_one_pod_leads_and_the_other_takes_over_after_expiry(api_client: Any) -> None:
    clock, changes = Clock(), []
    a = elector(api_client, "pod-a", clock, changes)
    b = elector(api_client, "pod-b", clock, changes)
    assert a.step().leading
    assert not b.step().leading, "the lease is held and fresh"
    clock.tick(5)
    assert a.step().leading, "renewed"
    clock.tick(14)
    assert not b.step().leading, "renewed 14 s ago: not yet expired"
    clock.tick(2)  # a stopped renewing 16 s ago (> 15 s lease)
    taken = b.step()
    assert taken.leading and taken.term == 2, "a change of hands increments the term"
    clock.tick(1)
    stale = a.step()
    assert not stale.leading and stale.term == 2
    assert ("pod-a", False, 2) in changes and ("pod-b", True, 2) in changes


def test_a_leader_that_cannot_renew_steps_down_at_its_deadline(
    api_client: Any, emulator: KubeEmulator
) -> None:
    clock, changes = Clock(), []
    a = elector(api_client, "pod-a", clock, changes)
    assert a.step().leading
    emulator.fail(status=500, path="/apis/coordination.k8s.io")
    clock.tick(6)
    assert a.step().leading, "within the renew deadline it keeps leading"
    clock.tick(6)
    assert not a.step().leading, "past the deadline it steps down"
    emulator.heal()


def test_stopping_releases_the_lease_so_the_next_pod_leads_at_once(api_client: Any) -> None:
    clock, changes = Clock(), []
    a = elector(api_client, "pod-a", clock, changes)
    b = elector(api_client, "pod-b", clock, changes)
    assert a.step().leading
    a.stop()
    assert not a.state.leading
    taken = b.step()
    assert taken.leading and taken.term == 2


def _lease_kind() -> Any:
    from tests.fake_kube.store import LEASES

    return LEASES


def test_a_fenced_holder_moves_a_recreated_leases_term_past_the_hubs(
    api_client: Any, emulator: KubeEmulator
) -> None:
    clock, changes = Clock(), []
    a = elector(api_client, "pod-a", clock, changes)
    assert a.step().term == 1  # a Lease created afresh: the hub knows term 6 already

    moved = a.advance(6)

    assert moved.leading and moved.term == 7 and changes[-1] == ("pod-a", True, 7)
    lease = emulator.store.get(_lease_kind(), "wingsmith", "wingsmith-hangar")
    assert lease is not None and lease["spec"]["leaseTransitions"] == 6
    clock.tick(2)
    assert a.step().term == 7, "renewals keep the moved term"
    assert a.advance(5).term == 7, "a fence older than its term changes nothing"


def test_a_fenced_pod_that_lost_the_lease_steps_down_and_writes_nothing(
    api_client: Any, emulator: KubeEmulator
) -> None:
    clock, changes = Clock(), []
    a = elector(api_client, "pod-a", clock, changes)
    b = elector(api_client, "pod-b", clock, changes)
    assert a.step().leading
    clock.tick(16)
    assert b.step().term == 2  # b took the expired Lease over; a has not noticed yet
    writes = len(emulator.mutating_requests())

    stale = a.advance(2)

    assert not stale.leading and ("pod-a", False, 2) in changes
    assert len(emulator.mutating_requests()) == writes
    lease = emulator.store.get(_lease_kind(), "wingsmith", "wingsmith-hangar")
    assert lease is not None and lease["spec"]["holderIdentity"] == "pod-b"
