"""Smoke run of `python -m bench.rejects` (docs/benchmark.md): it completes and prints every
figure. The figures themselves are not asserted (shared, noisy machines)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rejects_benchmark_completes_and_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.rejects", "--seconds", "0.5", "--nodes", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "this hub: /healthz while idle and under 100 rejects/s" in run.stdout
    assert re.search(r"idle +p50 +[0-9.]+ ms +p99 +[0-9.]+ ms", run.stdout), run.stdout
    assert re.search(r"loaded +p50 +[0-9.]+ ms", run.stdout), run.stdout
    sent = re.search(r"loaded/idle p50: [0-9.]+x +\((\d+) rejects sent\)", run.stdout)
    assert sent and int(sent.group(1)) > 0, run.stdout
