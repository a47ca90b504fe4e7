"""`port.undone`: a block's writes undone inside a transaction that stays open (the dry run's
before and after), on each backend."""

from __future__ import annotations

import pytest

from hub.store import port, projects


class _Boom(Exception):
    pass


def _project(conn: port.Transaction, name: str) -> None:
    projects.insert(conn, name=name, quotas={"H100-80GB": 8}, now=1.0)


def test_writes_in_the_block_are_undone_and_the_transaction_goes_on(store_url: str) -> None:
    store = port.open_store(store_url)
    try:
        with store.write() as conn:
            _project(conn, "kept")
            with port.undone(conn):
                _project(conn, "undone")
                assert projects.get(conn, "undone") is not None, "the block reads its writes"
            assert projects.get(conn, "undone") is None
            assert projects.get(conn, "kept") is not None, "written before the block: kept"
            _project(conn, "after")
        with store.read() as conn:
            assert sorted(p.name for p in projects.list_page(conn, after="", limit=10)) == [
                "after",
                "kept",
            ]
    finally:
        store.close()


def test_a_block_that_raises_leaves_its_writes_to_the_transaction_rollback(
    store_url: str,
) -> None:
    store = port.open_store(store_url)
    try:
        with pytest.raises(_Boom), store.write() as conn, port.undone(conn):
            _project(conn, "never")
            raise _Boom
        with store.read() as conn:
            assert projects.get(conn, "never") is None
    finally:
        store.close()
