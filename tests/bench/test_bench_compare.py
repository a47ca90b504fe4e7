"""`python -m bench --compare`: what moved since the recorded figures (bench/compare.py).

Figures files are built here from `Figure`s the way `python -m bench --json` writes them, so
the comparison is checked on known moves; the CLI is run for real on such files.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

from bench import compare, report
from bench.report import Figure, SizeResult

ROOT = pathlib.Path(__file__).resolve().parents[2]


def figures_file(
    *, connect_s: float, bare_connect_s: float, rate: float, rss: float
) -> dict[str, Any]:
    result = SizeResult(
        agents=200,
        figures=[
            Figure("connect_s", "connect + first sync", connect_s, "s", bare_connect_s, "bare"),
            Figure("admission_decisions_per_s", "admission decisions", rate, "/s"),
            Figure("hub_rss_per_agent_kib", "hub RSS per connected agent", rss, "KiB"),
        ],
    )
    meta = {"command": "python -m bench", "cpus": 2, "platform": "test", "python": "3.11"}
    return json.loads(report.dumps(report.as_json([result], meta)))


def test_a_figure_with_a_baseline_is_compared_by_its_ratio_not_its_value() -> None:
    recorded = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    # Twice as slow, on a machine twice as slow: the ratio to the bare stream is the same.
    same_ratio = figures_file(connect_s=4.0, bare_connect_s=2.0, rate=1000, rss=100)
    assert compare.compare(recorded, same_ratio) == []

    # As slow as before, on a machine twice as fast: the hub's share doubled.
    worse = figures_file(connect_s=2.0, bare_connect_s=0.5, rate=1000, rss=100)
    (move,) = compare.compare(recorded, worse)
    assert (move.key, move.basis, move.recorded, move.current) == ("connect_s", "ratio", 2.0, 4.0)
    assert move.worse


def test_moves_are_printed_both_ways_and_a_rate_is_better_when_higher() -> None:
    recorded = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    current = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1500, rss=130)
    moves = {m.key: m for m in compare.compare(recorded, current)}
    assert set(moves) == {"admission_decisions_per_s", "hub_rss_per_agent_kib"}
    assert not moves["admission_decisions_per_s"].worse
    assert moves["hub_rss_per_agent_kib"].worse
    assert moves["hub_rss_per_agent_kib"].basis == "value"

    text = compare.render(list(moves.values()), recorded, current)
    assert "WORSE" in text and "better" in text and "+30%" in text and "+50%" in text


def test_a_move_within_the_threshold_is_not_printed() -> None:
    recorded = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    current = figures_file(connect_s=2.3, bare_connect_s=1.0, rate=850, rss=119)
    assert compare.compare(recorded, current) == []
    assert len(compare.compare(recorded, current, threshold=0.1)) == 3


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_compares_two_files_and_exits_3_when_a_figure_got_worse(
    tmp_path: pathlib.Path,
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(figures_file(connect_s=2, bare_connect_s=1, rate=1000, rss=100)))
    new.write_text(json.dumps(figures_file(connect_s=2, bare_connect_s=1, rate=500, rss=100)))

    worse = run_cli("--compare", str(old), "--against", str(new))
    assert worse.returncode == 3, worse.stderr
    assert "WORSE" in worse.stdout and "admission decisions" in worse.stdout

    better = run_cli("--compare", str(new), "--against", str(old))
    assert better.returncode == 0, better.stderr
    assert "better" in better.stdout


def test_the_cli_says_what_is_wrong_with_a_figures_file(tmp_path: pathlib.Path) -> None:
    missing = run_cli("--compare", str(tmp_path / "nope.json"), "--against", str(tmp_path / "x"))
    assert missing.returncode == 2
    assert "no such figures file" in missing.stderr
    junk = tmp_path / "junk.json"
    junk.write_text('{"figures": []}')
    wrong = run_cli("--compare", str(junk), "--against", str(junk))
    assert wrong.returncode == 2 and "not the figures" in wrong.stderr
    alone = run_cli("--against", str(junk))
    assert alone.returncode == 2 and "--against needs --compare" in alone.stderr


def test_every_recorded_figures_file_can_be_compared_with_itself() -> None:
    recorded = sorted((ROOT / "bench" / "recorded").glob("*.json"))
    assert recorded, "bench/recorded/ holds no figures file"
    for path in recorded:
        data = compare.load(path)
        assert compare.sizes_of(data), f"{path.name} holds no fleet size"
        assert data["meta"].get("command") and data["meta"].get("cpus"), (
            f"{path.name} lacks the command and machine it was recorded with"
        )
        assert compare.compare(data, data) == []


def test_an_incomplete_run_or_a_size_only_one_run_has_is_said_not_passed_over() -> None:
    recorded = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    broken = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    broken["sizes"][0]["error"] = "the hub exited with 1"
    text = compare.render(compare.compare(recorded, broken), recorded, broken)
    assert "this run incomplete at 200 agents: the hub exited with 1" in text

    other_size = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    other_size["sizes"][0]["agents"] = 2000
    text = compare.render(compare.compare(recorded, other_size), recorded, other_size)
    assert "200 agents only in recorded: not compared" in text
    assert "2000 agents only in this run: not compared" in text


def test_the_machine_lines_say_the_load_when_a_run_recorded_it() -> None:
    """A run on a busy machine reads differently: its load average (start, end) is shown;
    a file recorded before it was kept shows none."""
    recorded = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    current = figures_file(connect_s=2.0, bare_connect_s=1.0, rate=1000, rss=100)
    current["meta"]["load_average"] = [7.5, 11.25]
    text = compare.render(compare.compare(recorded, current), recorded, current)
    assert "this run: python -m bench  (2 CPUs, test, Python 3.11, load 7.5 -> 11.25)" in text
    assert "recorded: python -m bench  (2 CPUs, test, Python 3.11)" in text
