"""Smoke run of `python -m bench.deployment_records` (docs/benchmark.md) on both stores: it
completes and prints every figure. The figures themselves are not asserted (shared, noisy
machines)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_deployment_records_benchmark_completes_and_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.deployment_records", "--deployments", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "300 deployment records on 100 clusters" in run.stdout
    for store in ("sqlite", "postgres"):
        assert re.search(rf"^{store} +(\d+\.\d +){{4}}\d+\.\d\d$", run.stdout, re.M), run.stdout
