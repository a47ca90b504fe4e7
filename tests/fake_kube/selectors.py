"""Kubernetes label selectors (the string form): `k`, `!k`, `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, joined by commas. Enough for the emulator's lists and watches."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Labels = Mapping[str, str]
Requirement = Callable[[Labels], bool]

_SET = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def parse(selector: str) -> Callable[[Labels], bool]:
    requirements = [_requirement(part) for part in _split(selector) if part.strip()]
    return lambda labels: all(r(labels) for r in requirements)


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _requirement(part: str) -> Requirement:
    part = part.strip()
    match = _SET.match(part)
    if match:
        key, op, values = match.group(1), match.group(2), match.group(3)
        allowed = {v.strip() for v in values.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in allowed
        return lambda labels: labels.get(key) not in allowed
    for op in ("!=", "==", "="):
        if op in part:
            key, value = (s.strip() for s in part.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if part.startswith("!"):
        key = part[1:].strip()
        return lambda labels: key not in labels
    return lambda labels: part in labels
