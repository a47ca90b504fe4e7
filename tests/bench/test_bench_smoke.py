"""Smoke run of the fleet benchmark (`python -m bench`, docs/benchmark.md) at a tiny size.

It checks only that the benchmark completes and prints every figure, as a table and as JSON;
the figures themselves are not asserted (CI machines are shared and noisy, and the targets are
for the full sizes on a quiet machine).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from bench.figures import figures
from bench.report import Figure

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_benchmark_completes_and_prints_every_figure(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--agents", "20", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"

    expected = figures(20, {})
    for figure in expected:
        assert figure.title in run.stdout, f"the table lacks {figure.title!r}"

    data = json.loads(out.read_text())
    assert data == json.loads(run.stdout[run.stdout.index("\n{") :])
    (size,) = data["sizes"]
    assert size["agents"] == 20
    assert size["error"] == ""
    printed = size["figures"]
    assert set(printed) == {f.key for f in expected}
    missing = [key for key, figure in printed.items() if figure["value"] is None]
    assert not missing, f"figures without a value: {missing}"
    with_baseline = [f.key for f in expected if _has_baseline(f)]
    no_baseline = [key for key in with_baseline if printed[key]["baseline"] is None]
    assert not no_baseline, f"figures without their baseline: {no_baseline}"


def _has_baseline(figure: Figure) -> bool:
    return bool(figure.baseline_title)


@pytest.mark.slow
def test_read_load_benchmark_completes_and_prints_its_table() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.readload", "--clients", "2", "--seconds", "0.3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"
    rows = {line.split()[0]: line.split() for line in run.stdout.splitlines()[1:]}
    assert set(rows) == {"bare", "list", "get"}
    for read, row in rows.items():
        assert float(row[4]) > 0, f"{read}: no request completed"
        assert row[-1] == "0", f"{read}: errors"
