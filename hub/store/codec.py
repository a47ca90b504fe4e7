"""JSON text columns: canonical encoding shared by the store modules."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def loads(text: str) -> Any:
    return json.loads(text)
