"""Which failures are the store's own (disk full, I/O error, database locked or unavailable),
as opposed to a value it refuses (too large an integer, a broken constraint).

The service asks this to decide who a failed write is told to: the hub's own fault is asked
for again; a refused value is reported to whoever sent it. Only the store knows the drivers'
exception types.
"""

from __future__ import annotations

import sqlite3

import psycopg

from hub import errors
from hub.store.port import IntegrityError


def is_storage_fault(error: BaseException) -> bool:
    if isinstance(error, IntegrityError):
        return False  # the value's fault: a constraint refused it
    return isinstance(
        error,
        errors.StoreError
        | sqlite3.OperationalError
        | sqlite3.InternalError
        | psycopg.OperationalError,
    )
