"""What every dashboard answer carries and what its templates format: the security headers,
and the template globals and filters (links, times, stacked bars, the applied manifest).

Pure functions of their arguments; hub/ui/dashboard.py registers them on the Jinja
environment.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

import yaml

PREFIX = "/ui"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def secure(headers: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)


def static_url(name: str) -> str:
    return f"{PREFIX}/static/{name}"


def quote(text: object) -> str:
    return urllib.parse.quote(str(text), safe="")


def manifest(applied: Mapping[str, Any] | None) -> str:
    """The applied object's body (canonical JSON) as the YAML manifest people read."""
    if not applied or applied.get("truncated") or not applied.get("body"):
        return ""
    try:
        document = json.loads(str(applied["body"]))
    except ValueError:
        return str(applied["body"])
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def when(value: object) -> str:
    """RFC 3339 to the second, or "never"."""
    if not isinstance(value, str) or not value:
        return "never"
    head, _, _ = value.partition(".")
    return head.removesuffix("Z") + "Z" if "." in value else value


def bar(parts: Mapping[str, object], total: object) -> list[dict[str, Any]]:
    """Segments of a stacked bar in percent of `total`: [{name, value, x, width}]."""
    whole = total if isinstance(total, int) and total > 0 else 0
    segments: list[dict[str, Any]] = []
    x = 0.0
    for name, value in parts.items():
        count = value if isinstance(value, int) and value > 0 else 0
        width = 100.0 * count / whole if whole else 0.0
        segments.append({"name": name, "value": count, "x": round(x, 3), "width": round(width, 3)})
        x += width
    return segments


def digest_bar(
    live_digests: Mapping[str, int], target: str, converged: bool = False
) -> list[dict[str, Any]]:
    """Replicas per serving digest as a stacked bar: the target digest first.

    `converged`: the hub's rollout state says no replica runs another config. An adopted
    deployment whose pod template the hub keeps runs the target whatever digest label its
    pods carry (none, or an older one): the hub's word decides the colour, not the label, so
    the bar never shows an older version beside "converged"."""
    ordered = sorted(live_digests.items(), key=lambda kv: (kv[0] != target, kv[0]))
    total = sum(v for _, v in ordered)
    segments = bar(dict(ordered), total)
    for segment in segments:
        segment["target"] = converged or segment["name"] == target
    return segments
