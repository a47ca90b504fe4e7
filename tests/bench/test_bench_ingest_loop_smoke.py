"""Smoke run of `python -m bench.ingest_loop` (docs/benchmark.md "Observations validated off
the loop"): both ways convert the same batches to the same records (it asserts so) and it
prints the loop's CPU per batch for each. The figures themselves are not asserted (shared,
noisy machines)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rollout", "nodes"])
def test_ingest_loop_benchmark_completes_and_prints_its_figures(kind: str) -> None:
    run = subprocess.run(
        [
            *(sys.executable, "-m", "bench.ingest_loop"),
            *("--streams", "20", "--batches", "2", "--repeat", "1", "--kind", kind),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    figures = json.loads(run.stdout)
    assert (figures["streams"], figures["kind"]) == (20, kind)
    for way in ("loop", "thread"):
        assert set(figures[way]) == {
            "loop_cpu_us_per_batch",
            "process_cpu_us_per_batch",
            "wall_s",
            "timer_lag_p99_ms",
            "timer_lag_max_ms",
        }, figures
