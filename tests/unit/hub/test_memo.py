"""The bounded memo behind ingest's checked values (hub/sync/memo.py): it never holds more
than its limit, by count or by weight, frees random places to make room, and keeps nothing
heavier than its whole limit."""

from __future__ import annotations

import pytest

from hub.sync.memo import Memo


def test_it_answers_what_it_was_given_and_nothing_else() -> None:
    memo: Memo[str, int] = Memo(4)
    memo.put("a", 1)
    memo.put("a", 2)  # a key kept stays as it was: its value was checked once
    assert memo.get("a") == 1
    assert memo.get("b") is None
    assert len(memo) == 1 and memo.weight == 1


def test_by_weight_it_frees_random_places_until_a_value_fits() -> None:
    places: list[int] = []

    def draw(n: int) -> int:
        places.append(n)
        return 0  # always the first place

    memo: Memo[str, str] = Memo(10, draw=draw)
    for key in "abc":
        memo.put(key, key * 3, weight=3)
    assert memo.weight == 9
    memo.put("d", "dddd", weight=4)  # needs 3 more: one value out
    assert places == [3]
    assert memo.get("a") is None and memo.get("d") == "dddd"
    assert memo.weight == 10 and len(memo) == 3
    memo.put("e", "e" * 9, weight=9)  # needs 9 of 10: every other value out
    assert memo.weight <= 10 and memo.get("e") == "e" * 9
    assert [memo.get(k) for k in "bcd"] == [None, None, None]


def test_a_value_heavier_than_the_limit_is_not_kept() -> None:
    memo: Memo[str, str] = Memo(8)
    memo.put("small", "s", weight=2)
    memo.put("huge", "h" * 9, weight=9)
    assert memo.get("huge") is None
    assert memo.get("small") == "s" and memo.weight == 2


def test_many_values_keep_it_within_its_limit() -> None:
    memo: Memo[int, int] = Memo(100)
    for n in range(10_000):
        memo.put(n, n, weight=1 + n % 7)
        assert memo.weight <= 100
    assert sum(1 for n in range(10_000) if memo.get(n) is not None) == len(memo)


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Memo(0)
