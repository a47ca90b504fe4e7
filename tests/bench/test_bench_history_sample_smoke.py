"""Smoke run of `python -m bench.history_sample` (docs/benchmark.md "The dashboard's history
sampler"): it seeds a small fleet, finds the same values both ways (it asserts so) and prints
a row per way of sampling. The figures themselves are not asserted (shared, noisy machines)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_history_sample_benchmark_completes_and_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.history_sample", "--clusters", "12", "--samples", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    for way in ("before: the read", "after: the read", "before: read and kept"):
        assert re.search(
            rf"\| 12 \| {way} \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 54 \|", run.stdout
        ), run.stdout
