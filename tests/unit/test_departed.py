"""Which nodes the DaemonSet's leader reports absent (agent/departed.py)."""

from __future__ import annotations

from agent.departed import DepartedNodes


def test_a_node_the_hub_holds_without_a_node_object_is_reported_after_the_grace() -> None:
    departed = DepartedNodes(own_node="n1", grace_s=5.0)
    departed.learn(["n1", "n2", "gone"])

    assert departed.collect(["n1", "n2"], now=100.0) == []
    assert departed.collect(["n1", "n2"], now=104.0) == []
    assert departed.collect(["n1", "n2"], now=105.0) == ["gone"]
    assert departed.collect(["n1", "n2"], now=200.0) == [], "reported once"


def test_a_node_seen_and_then_deleted_is_reported_and_one_that_comes_back_is_not() -> None:
    departed = DepartedNodes(own_node="n1", grace_s=1.0)
    departed.collect(["n1", "n2", "n3"], now=0.0)

    departed.collect(["n1", "n3"], now=1.0)  # n2 and n3 flap: re-registered in time
    departed.collect(["n1", "n2"], now=1.5)
    assert departed.collect(["n1", "n2"], now=2.0) == []
    assert departed.collect(["n1", "n2"], now=2.5) == ["n3"]


def test_its_own_node_is_never_reported() -> None:
    departed = DepartedNodes(own_node="n1", grace_s=0.0)
    departed.learn(["n1"])

    assert departed.collect([], now=10.0) == []


def test_losing_leadership_forgets_and_an_undelivered_report_is_sent_again_at_once() -> None:
    departed = DepartedNodes(own_node="n1", grace_s=3.0)
    departed.learn(["gone"])
    assert departed.collect([], now=0.0) == []
    departed.forget()
    assert departed.collect([], now=10.0) == [] and departed.known == frozenset()

    departed.learn(["gone"])
    departed.collect([], now=20.0)
    assert departed.collect([], now=23.0) == ["gone"]
    departed.undelivered(["gone"])
    assert departed.collect([], now=23.1) == ["gone"]
