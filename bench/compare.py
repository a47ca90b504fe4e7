"""`python -m bench --compare FILE`: what moved since the recorded figures.

The recorded figures (`bench/recorded/*.json`, written by `python -m bench --json`) carry the
machine and the command they came from. A comparison pairs each figure of this run with the
recorded one of the same fleet size and setup and prints every figure that moved by more than
the threshold (20% by default), better or worse.

Absolute times depend on the machine and on what else runs on it, so a figure that has a bare
baseline measured in the same run (a bare gRPC stream, a bare SQLite upsert) is compared by its
ratio to that baseline: a busier or slower machine moves both and the ratio stays. A figure
without a baseline is compared by its value and says so ("value"): read those with the machine
lines printed above the table.

Direction: for a rate (a unit ending in "/s") higher is better; for everything else (times,
memory, bytes, CPU) lower is better.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_THRESHOLD = 0.2


@dataclass(frozen=True)
class Move:
    """One figure whose value (or ratio to its baseline) changed past the threshold."""

    agents: int
    setup: str
    key: str
    title: str
    basis: str  # "ratio" (to the bare baseline of the same run) or "value"
    recorded: float
    current: float
    higher_is_better: bool

    @property
    def change(self) -> float:
        """Relative change, current / recorded - 1 (+0.25 is 25% higher)."""
        return self.current / self.recorded - 1.0

    @property
    def worse(self) -> bool:
        return (self.change < 0) if self.higher_is_better else (self.change > 0)


class CompareError(ValueError):
    """A figures file that cannot be compared (missing, not JSON, not bench output)."""


def load(path: str | pathlib.Path) -> dict[str, Any]:
    """A figures file written by `python -m bench --json`, checked for its shape."""
    file = pathlib.Path(path)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError as e:
        raise CompareError(f"{file}: no such figures file (record one with --json)") from e
    except json.JSONDecodeError as e:
        raise CompareError(f"{file}: not JSON ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("sizes"), list):
        raise CompareError(f"{file}: not the figures of `python -m bench --json` (no 'sizes')")
    return data


def sizes_of(data: Mapping[str, Any]) -> list[int]:
    """The fleet sizes a figures file holds, in its order, each once."""
    seen: list[int] = []
    for size in data["sizes"]:
        agents = int(size["agents"])
        if agents not in seen:
            seen.append(agents)
    return seen


def _higher_is_better(unit: str) -> bool:
    return unit.endswith("/s")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return None if math.isnan(number) or math.isinf(number) or number == 0 else number


def _pairs(
    recorded: Mapping[str, Any], current: Mapping[str, Any]
) -> Iterator[tuple[int, str, Mapping[str, Any], Mapping[str, Any]]]:
    """(agents, setup, recorded figure, current figure) for every figure both runs have."""
    old = {(int(s["agents"]), s.get("setup", "")): s for s in recorded["sizes"]}
    for size in current["sizes"]:
        agents, setup = int(size["agents"]), size.get("setup", "")
        before = old.get((agents, setup))
        if before is None:
            continue
        for key, figure in size["figures"].items():
            if key in before["figures"]:
                yield agents, setup, before["figures"][key], figure


def compare(
    recorded: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[Move]:
    """Every figure that moved by more than `threshold` (0.2: 20%), by ratio where both runs
    measured the figure's baseline, else by value."""
    moves = []
    for agents, setup, before, after in _pairs(recorded, current):
        old_ratio, new_ratio = _number(before.get("ratio")), _number(after.get("ratio"))
        if old_ratio is not None and new_ratio is not None:
            basis, old, new = "ratio", old_ratio, new_ratio
        else:
            old_value, new_value = _number(before.get("value")), _number(after.get("value"))
            if old_value is None or new_value is None:
                continue
            basis, old, new = "value", old_value, new_value
        if abs(new / old - 1.0) <= threshold:
            continue
        moves.append(
            Move(
                agents=agents,
                setup=setup,
                key=str(after.get("key", "")),
                title=str(after.get("title", after.get("key", ""))),
                basis=basis,
                recorded=old,
                current=new,
                higher_is_better=_higher_is_better(str(after.get("unit", ""))),
            )
        )
    return moves


def gaps(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What could not be compared: an incomplete run, a size or setup only one run has."""
    notes = []
    for name, data in (("recorded", recorded), ("this run", current)):
        for size in data["sizes"]:
            if size.get("error"):
                notes.append(f"{name} incomplete at {size['agents']} agents: {size['error'][:200]}")
    old = {(int(s["agents"]), s.get("setup", "")) for s in recorded["sizes"]}
    new = {(int(s["agents"]), s.get("setup", "")) for s in current["sizes"]}
    for agents, setup in sorted(old ^ new):
        where = "recorded" if (agents, setup) in old else "this run"
        notes.append(
            f"{agents} agents{', ' + setup if setup else ''} only in {where}: not compared"
        )
    return notes


def _machine(meta: Mapping[str, Any]) -> str:
    load = meta.get("load_average")
    # Recorded since issue 23 (older files have none): at the run's start and end.
    loaded = f", load {load[0]} -> {load[1]}" if isinstance(load, list) and len(load) == 2 else ""
    return (
        f"{meta.get('command', '?')}  ({meta.get('cpus', '?')} CPUs, "
        f"{meta.get('platform', '?')}, Python {meta.get('python', '?')}{loaded})"
    )


def render(
    moves: list[Move],
    recorded: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    source: str = "",
) -> str:
    """The comparison as people read it: the two runs' machines, then one line a move."""
    lines = [
        f"== compared with {source or 'the recorded figures'} (moves over {threshold:.0%}) ==",
        f"recorded: {_machine(recorded.get('meta', {}))}",
        f"this run: {_machine(current.get('meta', {}))}",
    ]
    lines += [f"!! {note}" for note in gaps(recorded, current)]
    if not moves:
        lines.append("no figure moved by more than the threshold")
        return "\n".join(lines) + "\n"
    rows = [("", "figure", "size", "basis", "recorded", "now", "change")]
    for m in sorted(moves, key=lambda m: (not m.worse, m.agents, m.setup, m.key)):
        size = f"{m.agents}" + (f", {m.setup}" if m.setup else "")
        rows.append(
            (
                "WORSE" if m.worse else "better",
                m.title,
                size,
                m.basis,
                f"{m.recorded:.3g}",
                f"{m.current:.3g}",
                f"{m.change:+.0%}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
