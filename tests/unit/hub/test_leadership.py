"""Who leads a cluster (hub/sync/leadership.py): claims by Lease term, grants to read-only node
agents, fencing, and the node list every new leader is sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hub.sync.leadership import Leadership


@dataclass
class Session:
    """What the stream session does with what leadership tells it: records it."""

    name: str
    fences: list[int] = field(default_factory=list)
    grants: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)

    def fence(self, term: int, reason: str) -> None:
        self.fences.append(term)

    def grant(self, term: int, node_ids: Sequence[str]) -> None:
        self.grants.append((term, tuple(node_ids)))


class Store:
    """The persisted newest term and the leader mark, as the service keeps them."""

    def __init__(self, term: int = 0) -> None:
        self.term = term
        self.marked: str | None = None
        self.nodes: tuple[str, ...] = ("n1", "n2")

    def persist(self, cluster_id: str, term: int) -> int:
        self.term = max(self.term, term)
        return self.term

    def mark(self, cluster_id: str, session_id: str | None) -> None:
        self.marked = session_id

    def leadership(self) -> Leadership:
        return Leadership(persist=self.persist, mark=self.mark, node_ids=lambda c: self.nodes)


def test_a_claim_is_confirmed_with_the_nodes_the_hub_holds() -> None:
    store = Store()
    leadership, a = store.leadership(), Session("a")

    assert leadership.claim("east", a, session_id="a", term=1)

    assert a.grants == [(1, ("n1", "n2"))] and store.marked == "a"


def test_a_newer_claim_fences_the_leader_and_an_older_one_is_fenced() -> None:
    store = Store()
    leadership, a, b = store.leadership(), Session("a"), Session("b")
    leadership.claim("east", a, session_id="a", term=1)

    assert leadership.claim("east", b, session_id="b", term=2)
    assert a.fences == [2] and leadership.leads("east", b)
    assert not leadership.claim("east", a, session_id="a", term=1)
    assert a.fences == [2, 2] and store.marked == "b"


def test_echoing_the_term_it_leads_with_changes_nothing() -> None:
    store = Store()
    leadership, a = store.leadership(), Session("a")
    leadership.claim("east", a, session_id="a", term=3)

    assert leadership.claim("east", a, session_id="a", term=3)
    assert len(a.grants) == 1 and a.fences == []


def test_a_read_only_session_standing_alone_is_granted_a_term_past_the_newest() -> None:
    store = Store(term=7)  # terms survive restarts and recreated Leases: never go back
    leadership, a = store.leadership(), Session("a")

    leadership.stand("east", a, session_id="a")

    assert a.grants == [(8, ("n1", "n2"))] and store.term == 8 and store.marked == "a"


def test_while_one_leads_others_stand_and_the_longest_standing_is_granted_next() -> None:
    store = Store()
    leadership = store.leadership()
    a, b, c = Session("a"), Session("b"), Session("c")
    for session in (a, b, c):
        leadership.stand("east", session, session_id=session.name)
    assert [len(s.grants) for s in (a, b, c)] == [1, 0, 0]

    leadership.release("east", a)  # a's stream closed

    assert b.grants == [(2, ("n1", "n2"))] and c.grants == [] and store.marked == "b"
    leadership.release("east", c)  # a follower leaving changes nothing
    assert leadership.leads("east", b) and store.marked == "b"
    leadership.release("east", b)
    assert leadership.term("east") == 0 and store.marked is None, "no one left to grant"


def test_a_stale_grant_claimed_on_reconnect_is_fenced_and_the_session_stands_again() -> None:
    store = Store()
    leadership, a, b = store.leadership(), Session("a"), Session("b")
    leadership.stand("east", a, session_id="a")  # term 1
    leadership.release("east", a)  # a's stream broke ...
    leadership.stand("east", b, session_id="b")  # ... and b was granted term 2

    a2 = Session("a")  # a reconnects, still believing it leads term 1
    assert not leadership.claim("east", a2, session_id="a2", term=1)
    leadership.stand("east", a2, session_id="a2")

    assert a2.fences == [2] and a2.grants == [] and leadership.leads("east", b)
    leadership.release("east", b)
    assert a2.grants == [(3, ("n1", "n2"))]


def test_a_lease_claim_supersedes_a_granted_leader() -> None:
    store = Store()
    leadership, granted, holder = store.leadership(), Session("g"), Session("h")
    leadership.stand("east", granted, session_id="g")

    assert leadership.claim("east", holder, session_id="h", term=5)
    assert granted.fences == [5] and leadership.leads("east", holder)
