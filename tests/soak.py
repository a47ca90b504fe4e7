"""Soak: the model-based invariant test (tests/model.py) for as long as asked.

    python -m tests.soak --minutes 30 [--backend sqlite|postgres] [--hubs 1|2] [--steps 40]

Runs batches of fresh random sequences until the time is up; a sequence that breaks an
invariant is shrunk by hypothesis to the shortest one that still breaks it, printed with its
violations, and the soak goes on with new sequences. At the end it prints the figures:
sequences, steps, violations (distinct by their first line) and minutes (docs/operations.md
"Soak"). Exit status 1 when any violation was found.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests import stores
from tests.model import COUNTS, VIOLATIONS, machine_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--backend", choices=stores.BACKENDS, default="sqlite")
    parser.add_argument("--hubs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30, help="steps per sequence, at most")
    parser.add_argument("--batch", type=int, default=5, help="sequences per hypothesis run")
    args = parser.parse_args(argv)
    if args.hubs > 1 and args.backend != "postgres":
        parser.error("several hubs share a PostgreSQL store: --backend postgres")
    start = time.monotonic()
    deadline = start + args.minutes * 60
    found: dict[str, str] = {}
    try:
        while time.monotonic() < deadline:
            try:
                run_state_machine_as_test(
                    machine_for(args.backend, args.hubs),
                    settings=settings(
                        max_examples=args.batch,
                        stateful_step_count=args.steps,
                        deadline=None,
                        database=None,
                        phases=[Phase.generate, Phase.shrink],
                        suppress_health_check=list(HealthCheck),
                        print_blob=True,
                    ),
                )
            except Exception as e:  # a violation (or an error), shrunk: report and go on
                # As first met, with the sequence's calls (even when hypothesis could not
                # replay it to shrink: a real fleet's timing differs run to run).
                for text, trace in VIOLATIONS:
                    key = text.splitlines()[0]
                    if key not in found:
                        found[key] = text
                        print(f"\n=== violation (new): {text}", flush=True)
                        print("    sequence as run:\n      " + "\n      ".join(trace), flush=True)
                VIOLATIONS.clear()
                for cause in _leaves(e):
                    text = "".join(traceback.format_exception_only(type(cause), cause)).strip()
                    key = _first_violation(text)
                    if not type(cause).__name__.startswith("Flaky"):
                        found.setdefault(key, text)
                    print(f"\n=== shrunk: {key}", flush=True)
                    print(text, flush=True)
                print("\n".join(getattr(e, "__notes__", [])), flush=True)
            elapsed = (time.monotonic() - start) / 60
            print(
                f"... {COUNTS['sequences']} sequences, {COUNTS['steps']} steps,"
                f" {len(found)} distinct violations, {elapsed:.1f} min",
                flush=True,
            )
    finally:
        stores.stop_pg_server()
    minutes = (time.monotonic() - start) / 60
    print(
        f"\nsoak {args.backend} x{args.hubs}: {COUNTS['sequences']} sequences,"
        f" {COUNTS['steps']} steps, {len(found)} distinct violations, {minutes:.1f} minutes"
    )
    for key in found:
        print(f"  - {key}")
    return 1 if found else 0


def _leaves(error: BaseException) -> list[BaseException]:
    """The failures themselves: hypothesis wraps one that replayed differently (a real
    fleet's timing) in a group."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _first_violation(text: str) -> str:
    """A violation's kind for counting: its first line, numbers and names kept."""
    for line in text.splitlines():
        if ": " in line and not line.startswith(("Traceback", "  ")):
            return line.split(": ", 1)[1] if line.startswith("tests.") else line
    return text.splitlines()[0] if text else "?"


if __name__ == "__main__":
    sys.exit(main())
