"""Figures, and how they are printed: a table for people and JSON for tools.

A `Figure` is one measured value beside the building-block limit it is compared with (the
baseline), their ratio, and the target it is held to. `met` is None where a figure has no
target. Ratios are always hub / baseline, so for a time a ratio of 3 means "three times
slower than the bare building block", and for a rate 0.5 means "half as fast".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Comparison = Literal["<=", ">=", "=="]


@dataclass(frozen=True)
class Target:
    """`value <op> bound`, e.g. Target("<=", 2000, "p99 <= 2 s")."""

    op: Comparison
    bound: float
    text: str

    def met(self, value: float | None) -> bool | None:
        if value is None or math.isnan(value):
            return False
        if self.op == "<=":
            return value <= self.bound
        if self.op == ">=":
            return value >= self.bound
        return value == self.bound


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    value: float | None
    unit: str
    baseline: float | None = None
    baseline_title: str = ""
    targets: tuple[Target, ...] = ()
    # Ratio targets compare value / baseline (e.g. ">= 0.5 of the bare SQLite rate").
    ratio_targets: tuple[Target, ...] = ()
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        checks = [t.met(self.value) for t in self.targets]
        checks += [t.met(self.ratio) for t in self.ratio_targets]
        if not checks:
            return None
        return all(bool(c) for c in checks)

    @property
    def target_text(self) -> str:
        return "; ".join(t.text for t in (*self.targets, *self.ratio_targets))

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = [asdict(t) for t in self.targets]
        data["ratio_targets"] = [asdict(t) for t in self.ratio_targets]
        data["ratio"] = self.ratio
        data["met"] = self.met
        data["target"] = self.target_text
        return data


@dataclass
class SizeResult:
    """Everything measured at one fleet size."""

    agents: int
    figures: list[Figure] = field(default_factory=list)
    # Which store and how many hubs, where a run compares them ("PostgreSQL, 2 hubs").
    setup: str = ""
    # Raw measurements behind the figures (per phase timings, CPU, counts).
    details: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def figure(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if magnitude >= 100_000:
        text = f"{value:,.0f}"
    elif magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 0.01 or magnitude == 0:
        text = f"{value:.2f}"
    else:
        text = f"{value:.2g}"
    return f"{text} {unit}".strip()


def table(results: Sequence[SizeResult]) -> str:
    """One block per size: figure | value | baseline | ratio | target | met."""
    header = ("figure", "value", "baseline (bare limit)", "ratio", "target", "met")
    lines: list[str] = []
    for result in results:
        rows = [header]
        for f in result.figures:
            baseline = fmt(f.baseline, f.unit) if f.baseline is not None else "-"
            if f.baseline is not None and f.baseline_title:
                baseline = f"{baseline} ({f.baseline_title})"
            met = "-" if f.met is None else ("yes" if f.met else "NO")
            ratio = "-" if f.ratio is None else f"{f.ratio:.2f}x"
            rows.append((f.title, fmt(f.value, f.unit), baseline, ratio, f.target_text, met))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        setup = f", {result.setup}" if result.setup else ""
        lines.append(f"== {result.agents} agents{setup} ==")
        if result.error:
            lines.append(f"!! incomplete: {result.error}")
        for index, row in enumerate(rows):
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append("")
    return "\n".join(lines)


def store_table(results: Sequence[SizeResult], bare: dict[str, float]) -> str:
    """`--store postgres`: each figure of every setup of one size side by side, with its ratio
    to the first setup's (SQLite, one hub); then the bare store baselines of the same run."""
    first = results[0]
    header = ("figure", *(f"{r.setup}" for r in results))
    rows = [header]
    for f in first.figures:
        cells = [f.title, fmt(f.value, f.unit)]
        for other in results[1:]:
            g = other.figure(f.key)
            value = g.value if g is not None else None
            ratio = (
                f" ({value / f.value:.2f}x)"
                if value is not None
                and f.value
                and not math.isnan(value)
                and not math.isnan(f.value)
                else ""
            )
            cells.append(fmt(value, f.unit) + ratio)
        rows.append(tuple(cells))
    base = next(iter(bare.values()), None)
    for title, rate in bare.items():
        ratio = f" ({rate / base:.2f}x)" if base else ""
        rows.append((title, fmt(rate, "rows/s") + ratio, *([""] * (len(results) - 1))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"== {first.agents} agents: the stores and hubs side by side (ratio to the first) =="]
    for result in results:
        if result.error:
            lines.append(f"!! {result.setup} incomplete: {result.error}")
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def as_json(results: Sequence[SizeResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "meta": meta,
        "sizes": [
            {
                "agents": r.agents,
                "setup": r.setup,
                "error": r.error,
                "figures": {f.key: f.as_json() for f in r.figures},
                "details": r.details,
            }
            for r in results
        ],
    }


def dumps(data: dict[str, Any]) -> str:
    """Strict JSON: NaN (a percentile of nothing) becomes null."""
    return json.dumps(_plain(data), indent=2, allow_nan=False)


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
