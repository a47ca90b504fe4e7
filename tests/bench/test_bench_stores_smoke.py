"""Smoke run of `python -m bench --store postgres --hubs 2` (docs/benchmark.md) at a tiny size.

It checks that the fleet benchmark runs on SQLite with one hub, then on a throwaway PostgreSQL
with one and with two hubs (worker i's agents streaming to hub i % 2, so changes cross hubs),
and prints the three side by side with the bare upserts of both databases. The figures
themselves are not asserted (shared, noisy machines).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from bench.__main__ import parse_args

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETUPS = ["SQLite, 1 hub", "PostgreSQL, 1 hub", "PostgreSQL, 2 hubs"]
# What a store or a second hub changes: the cross-hub fan-out and the ingest writes.
CROSS_HUB = ["connect_s", "fanout_one_p50_ms", "fanout_all_p99_ms", "ingest_records_per_s"]


@pytest.mark.slow
def test_store_comparison_runs_every_setup_and_prints_them_side_by_side(
    tmp_path: pathlib.Path,
) -> None:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [
            sys.executable, "-m", "bench", "--store", "postgres", "--hubs", "2",
            "--agents", "4", "--skip", "admission", "reconnect", "baselines",
            "--json", str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"

    side_by_side = run.stdout[run.stdout.index("side by side") :]
    header = side_by_side.splitlines()[1]
    assert [s for s in SETUPS if s in header] == SETUPS, header
    for bare in ("bare SQLite batched upsert", "bare PostgreSQL batched upsert"):
        assert bare in side_by_side, f"the table lacks {bare!r}"

    data = json.loads(out.read_text())
    assert [size["setup"] for size in data["sizes"]] == SETUPS
    for size in data["sizes"]:
        assert size["error"] == "", f"{size['setup']}: {size['error']}"
        missing = [k for k in CROSS_HUB if size["figures"][k]["value"] is None]
        assert not missing, f"{size['setup']}: figures without a value: {missing}"
    rates = data["bare_store_upserts"]["4"]
    assert rates["bare SQLite batched upsert"] > 0
    assert rates["bare PostgreSQL batched upsert"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--hubs", "2"], "--hubs needs --store postgres"),
        (["--store", "postgres", "--hubs", "0"], "--hubs must be at least 1, got 0"),
    ],
)
def test_hub_counts_that_cannot_run_are_refused_with_what_to_change(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_postgres_runs_two_hubs_unless_told() -> None:
    assert parse_args(["--store", "postgres"]).hubs == 2
    assert parse_args(["--store", "postgres", "--hubs", "3"]).hubs == 3
