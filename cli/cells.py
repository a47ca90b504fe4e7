"""One value as a table cell shows it: "-" for a missing one (`null`, an empty string, a
`status` the cluster has not reported yet), booleans as "true"/"false" as in the JSON,
timestamps to the second. Pure; used by the tables (cli/columns.py, cli/output.py) and the
pages drawn for people (describe, authority review).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MISSING = "-"


JsonObject = dict[str, Any]


Cell = Callable[[JsonObject], str]


_FRACTION = re.compile(r"\.\d+(?=Z$|[+-]\d\d:\d\d$)")


def text(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def timestamp(value: Any) -> str:
    """RFC 3339 to the second: the hub's nanoseconds are noise in a table."""
    return _FRACTION.sub("", value) if isinstance(value, str) and value else MISSING


def field(*path: str) -> Cell:
    """The value at a dotted path; "-" when any step is null (an unreported `status`)."""

    def cell(item: JsonObject) -> str:
        value: Any = item
        for key in path:
            if not isinstance(value, dict):
                return MISSING
            value = value.get(key)
        return text(value)

    return cell
