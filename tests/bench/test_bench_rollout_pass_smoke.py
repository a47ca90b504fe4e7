"""Smoke run of `python -m bench.rollout_pass` (docs/benchmark.md): it completes and prints
every figure. The figures themselves are not asserted (shared, noisy machines)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_rollout_pass_benchmark_completes_and_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.rollout_pass", "--clusters", "20"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "one rollout in waves over 20 clusters" in run.stdout
    assert re.search(r"whole deployments \(baseline\) +[0-9.]+ ms", run.stdout), run.stdout
    assert re.search(r"four columns \(the pass\) +[0-9.]+ ms", run.stdout), run.stdout
    assert re.search(r"baseline/pass: [0-9.]+x", run.stdout), run.stdout
