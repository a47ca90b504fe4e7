"""Who leads a cluster (hub/sync/leadership.py): claims by Lease term, grants to read-only node
agents, fencing, and the node list every new leader is sent."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from hub.sync.leadership import Leadership


def on_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Leadership decides on an event loop (its writes are awaited): run the test on one."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


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

    def next_term(self, cluster_id: str) -> int:
        self.term += 1
        return self.term

    def mark(self, cluster_id: str, session_id: str | None) -> None:
        self.marked = session_id

    def leadership(self) -> Leadership:
        return Leadership(
            persist=self.persist,
            next_term=self.next_term,
            mark=self.mark,
            node_ids=lambda c: self.nodes,
        )


@on_loop
async def test_a_claim_is_confirmed_with_the_nodes_the_hub_holds() -> None:
    store = Store()
    leadership, a = store.leadership(), Session("a")

    assert await leadership.claim("east", a, session_id="a", term=1)

    assert a.grants == [(1, ("n1", "n2"))] and store.marked == "a"


@on_loop
async def test_a_newer_claim_fences_the_leader_and_an_older_one_is_fenced() -> None:
    store = Store()
    leadership, a, b = store.leadership(), Session("a"), Session("b")
    await leadership.claim("east", a, session_id="a", term=1)

    assert await leadership.claim("east", b, session_id="b", term=2)
    assert a.fences == [2] and leadership.leads("east", b)
    assert not await leadership.claim("east", a, session_id="a", term=1)
    assert a.fences == [2, 2] and store.marked == "b"


@on_loop
async def test_echoing_the_term_it_leads_with_changes_nothing() -> None:
    store = Store()
    leadership, a = store.leadership(), Session("a")
    await leadership.claim("east", a, session_id="a", term=3)

    assert await leadership.claim("east", a, session_id="a", term=3)
    assert len(a.grants) == 1 and a.fences == []


@on_loop
async def test_a_read_only_session_standing_alone_is_granted_a_term_past_the_newest() -> None:
    store = Store(term=7)  # terms survive restarts and recreated Leases: never go back
    leadership, a = store.leadership(), Session("a")

    await leadership.stand("east", a, session_id="a")

    assert a.grants == [(8, ("n1", "n2"))] and store.term == 8 and store.marked == "a"


@on_loop
async def test_while_one_leads_others_stand_and_the_longest_standing_is_granted_next() -> None:
    store = Store()
    leadership = store.leadership()
    a, b, c = Session("a"), Session("b"), Session("c")
    for session in (a, b, c):
        await leadership.stand("east", session, session_id=session.name)
    assert [len(s.grants) for s in (a, b, c)] == [1, 0, 0]

    await leadership.release("east", a)  # a's stream closed

    assert b.grants == [(2, ("n1", "n2"))] and c.grants == [] and store.marked == "b"
    await leadership.release("east", c)  # a follower leaving changes nothing
    assert leadership.leads("east", b) and store.marked == "b"
    await leadership.release("east", b)
    assert leadership.term("east") == 0 and store.marked is None, "no one left to grant"


@on_loop
async def test_a_stale_grant_claimed_on_reconnect_is_fenced_and_the_session_stands_again() -> None:
    store = Store()
    leadership, a, b = store.leadership(), Session("a"), Session("b")
    await leadership.stand("east", a, session_id="a")  # term 1
    await leadership.release("east", a)  # a's stream broke ...
    await leadership.stand("east", b, session_id="b")  # ... and b was granted term 2

    a2 = Session("a")  # a reconnects, still believing it leads term 1
    assert not await leadership.claim("east", a2, session_id="a2", term=1)
    await leadership.stand("east", a2, session_id="a2")

    assert a2.fences == [2] and a2.grants == [] and leadership.leads("east", b)
    await leadership.release("east", b)
    assert a2.grants == [(3, ("n1", "n2"))]


@on_loop
async def test_a_lease_claim_supersedes_a_granted_leader() -> None:
    store = Store()
    leadership, granted, holder = store.leadership(), Session("g"), Session("h")
    await leadership.stand("east", granted, session_id="g")

    assert await leadership.claim("east", holder, session_id="h", term=5)
    assert granted.fences == [5] and leadership.leads("east", holder)


# -- decisions whose writes wait (the store's lock held elsewhere) -------------------------------


class Held:
    """A writer whose writes wait until `free()`: the store's lock held by another writer."""

    def __init__(self) -> None:
        self._free = asyncio.Event()
        self.waiting = 0

    async def run(self, call: Callable[[], Any]) -> Any:
        self.waiting += 1
        await self._free.wait()
        self.waiting -= 1
        return call()

    def free(self) -> None:
        self._free.set()


def held_leadership(store: Store, held: Held) -> Leadership:
    return Leadership(
        persist=store.persist,
        next_term=store.next_term,
        mark=store.mark,
        node_ids=lambda c: store.nodes,
        run=held.run,
    )


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0)


@on_loop
async def test_a_newer_claim_made_while_a_claim_is_written_is_decided_after_it() -> None:
    store, held = Store(), Held()
    leadership, a, b = held_leadership(store, held), Session("a"), Session("b")
    claim_a = asyncio.create_task(leadership.claim("east", a, session_id="a", term=5))
    claim_b = asyncio.create_task(leadership.claim("east", b, session_id="b", term=6))
    await until(lambda: held.waiting == 1)

    assert a.grants == b.grants == [] and leadership.pending("east")
    assert store.term == 0, "nothing written while the lock is held"
    held.free()

    assert await claim_a and await claim_b
    assert a.grants == [(5, ("n1", "n2"))] and a.fences == [6]
    assert b.grants == [(6, ("n1", "n2"))] and store.marked == "b" and store.term == 6
    assert not leadership.pending("east")


@on_loop
async def test_an_older_claim_waiting_behind_a_newer_one_is_fenced() -> None:
    store, held = Store(), Held()
    leadership, a, b = held_leadership(store, held), Session("a"), Session("b")
    newer = asyncio.create_task(leadership.claim("east", b, session_id="b", term=6))
    older = asyncio.create_task(leadership.claim("east", a, session_id="a", term=5))
    await until(lambda: held.waiting == 1)
    held.free()

    assert await newer and not await older
    assert a.grants == [] and a.fences == [6] and leadership.leads("east", b)
    assert store.marked == "b" and store.term == 6, "terms never go back"


@on_loop
async def test_a_claim_whose_stream_closed_meanwhile_is_written_then_released() -> None:
    store, held = Store(), Held()
    leadership = held_leadership(store, held)
    a, c = Session("a"), Session("c")
    claim = asyncio.create_task(leadership.claim("east", a, session_id="a", term=3))
    await until(lambda: held.waiting == 1)
    standing = asyncio.create_task(leadership.stand("east", c, session_id="c"))

    claim.cancel()  # a's stream closed while its claim waited for the store
    leadership.release_soon("east", a)
    held.free()
    await standing
    await until(lambda: not leadership.pending("east"))

    assert a.grants == [(3, ("n1", "n2"))], "the claim was decided whole, though cancelled"
    assert c.grants == [(4, ("n1", "n2"))] and leadership.leads("east", c)
    assert store.marked == "c" and store.term == 4


@on_loop
async def test_a_newer_term_heard_from_another_hub_during_a_claim_fences_it_after() -> None:
    store, held = Store(), Held()
    leadership, a = held_leadership(store, held), Session("a")
    claim = asyncio.create_task(leadership.claim("east", a, session_id="a", term=5))
    await until(lambda: held.waiting == 1)

    leadership.newer_term_elsewhere("east", 7)  # persisted by another hub meanwhile
    held.free()
    await claim
    await until(lambda: not leadership.pending("east"))

    assert a.grants == [(5, ("n1", "n2"))] and a.fences == [7]
    assert not leadership.leads("east", a)
