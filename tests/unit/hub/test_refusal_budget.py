"""The bound on refusal records: so many a minute per caller and call, the rest summarized."""

from __future__ import annotations

from hub.model import AuditRecord
from hub.service import access


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refusal(actor: str = "admin", action: str = "CreateProject", n: int = 0) -> AuditRecord:
    return AuditRecord(
        time=float(n),
        actor=actor,
        role="admin",
        edge="rest",
        action=action,
        target="project",
        outcome="INVALID_ARGUMENT",
        message=f"malformed JSON body #{n}",
    )


def test_beyond_the_per_key_budget_refusals_are_counted_then_summarized_once() -> None:
    clock = Clock()
    budget = access.RefusalBudget(clock)
    admitted = [budget.admit(refusal(n=n))[0] for n in range(25)]
    assert admitted == [True] * access.REFUSALS_PER_KEY + [False] * 15
    assert budget.unwritten_total == 15
    assert budget.ended() == []  # the minute has not ended
    clock.now += access.REFUSAL_WINDOW_S
    (summary,) = budget.ended()
    assert summary.action == "CreateProject" and summary.actor == "admin"
    assert summary.message.startswith("15 more refusals like this within 60 s")
    assert summary.message.endswith("malformed JSON body #24")
    assert budget.ended() == []  # told once
    assert budget.admit(refusal(n=99))[0]  # a new minute, a new budget


def test_a_key_within_its_budget_leaves_no_summary() -> None:
    clock = Clock()
    budget = access.RefusalBudget(clock)
    assert budget.admit(refusal())[0]
    clock.now += 2 * access.REFUSAL_WINDOW_S
    written, summaries = budget.admit(refusal(action="DeleteProject"))
    assert written and summaries == []


def test_every_key_shares_one_budget_per_minute() -> None:
    clock = Clock()
    budget = access.RefusalBudget(clock)
    written = sum(
        budget.admit(refusal(actor=f"token/t{i}", action=f"A{j}"))[0]
        for i in range(100)
        for j in range(10)
    )
    assert written == access.REFUSALS_PER_MINUTE
    clock.now += access.REFUSAL_WINDOW_S
    summaries = budget.ended()
    assert sum(int(s.message.split()[0]) for s in summaries) == 1000 - written
