"""After a reconnect the observer resends only what the hub does not hold as last sent."""

from __future__ import annotations

import time

from agent.cluster.simulated.cluster import SimulatedCluster
from agent.observe import Observer
from agent.simulation import node_sources


def _observer() -> Observer:
    cluster = SimulatedCluster(
        "nodes=3,gpus=2,class=H100-80GB", cluster_id="east", clock=time.monotonic
    )
    return Observer(cluster=cluster, nodes=node_sources(cluster))


def test_items_the_hub_holds_at_their_sent_time_are_not_sent_again() -> None:
    observer = _observer()
    first = observer.collect({}, cluster_level=True)
    assert len(first.nodes) == 3
    observer.mark_sent(first, at_ns=100)

    # The hub holds two nodes as sent; the third it lost (an older time) or never got.
    held = {("node", "east-node-0"): 100, ("node", "east-node-1"): 100, ("node", "east-node-2"): 7}
    observer.resume(held)
    again = observer.collect({}, cluster_level=True)
    assert [n.node_id for n in again.nodes] == ["east-node-2"]
    assert again.discovered_complete, "discovered DGDs go again, as the complete set"


def test_a_node_unknown_to_the_hub_or_never_stamped_is_sent_again() -> None:
    observer = _observer()
    observer.mark_sent(observer.collect({}, cluster_level=True), at_ns=100)
    observer.resume({("node", "east-node-0"): 100})
    assert {n.node_id for n in observer.collect({}, cluster_level=True).nodes} == {
        "east-node-1",
        "east-node-2",
    }
    # reset() forgets every stamp: everything goes again.
    observer.reset()
    observer.resume({("node", n): 100 for n in ("east-node-0", "east-node-1", "east-node-2")})
    assert len(observer.collect({}, cluster_level=True).nodes) == 3
