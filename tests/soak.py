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
from tests.model import COUNTS, machine_for


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
                text = "".join(traceback.format_exception_only(type(e), e)).strip()
                notes = "\n".join(getattr(e, "__notes__", []))
                key = text.splitlines()[-1] if text else repr(e)
                first = key not in found
                found.setdefault(key, f"{text}\n{notes}")
                print(f"\n=== violation{' (new)' if first else ''}: {key}", flush=True)
                print(text, flush=True)
                print(notes, flush=True)
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


if __name__ == "__main__":
    sys.exit(main())
