"""Does the hub's memory grow with fuzzed requests? Two identical fuzz rounds against one hub.

    .venv/bin/python -m tests.fuzz_memory --examples 60 [--out DIR]

Starts the real hub command (`hub.app.main`, SQLite, tune_gc included) in a subprocess with
tracemalloc on, seeds it like tests/integration/test_fuzz.py, then sends the REST fuzz of that
file (every route, derandomized: round 2 sends exactly the requests of round 1) twice. After a
warm-up and after each round the hub writes its RSS, tracemalloc's traced total and the top
growth since the last snapshot by line (SIGUSR1). A leak grows in both rounds; a cache or an
allocator keeping freed arenas grows in the first and then stays (docs/operations.md "Memory
after a fuzz"). Prints requests, 5xx, tracebacks and ERROR lines in the hub's log, and the
audit records of refused calls.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from typing import Any

from tests.harness import ADMIN_TOKEN


def serve(argv: list[str]) -> None:
    """The hub process: tracemalloc on, SIGUSR1 appends a snapshot report to REPORT."""
    report = pathlib.Path(os.environ["FUZZ_MEMORY_REPORT"])
    tracemalloc.start(8)
    state: dict[str, Any] = {"previous": None}

    def snapshot(*_: object) -> None:
        gc.collect()
        current = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        rss = _rss()
        traced, peak = tracemalloc.get_traced_memory()
        top: list[str] = []
        if state["previous"] is not None:
            for stat in current.compare_to(state["previous"], "lineno")[:12]:
                top.append(str(stat))
        state["previous"] = current
        entry = {
            "rss": rss,
            "traced": traced,
            "peak": peak,
            "top": top,
            "pymalloc_arenas": _pymalloc_arenas(),
            "heap": _heap_bytes(),
            "threads": threading.active_count(),
        }
        # What glibc holds freed but not returned: give it back, and measure again.
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        entry["rss_after_trim"] = _rss()
        entry["heap_after_trim"] = _heap_bytes()
        with report.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")

    signal.signal(signal.SIGUSR1, snapshot)
    from hub import app

    app.main(argv)


def _rss() -> int:
    return next(
        int(line.split()[1]) * 1024
        for line in pathlib.Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )


def _pymalloc_arenas() -> int:
    """pymalloc's current arenas (256 KiB each), from sys._debugmallocstats."""
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(write)
        os.close(saved)
    with os.fdopen(read) as handle:
        text = handle.read()
    for line in text.splitlines():
        if line.startswith("# arenas allocated current"):
            return int(line.split("=")[-1].strip().replace(",", ""))
    return -1


def _heap_bytes() -> dict[str, int]:
    """Resident kB by mapping kind: the brk heap, anonymous mappings, files."""
    kinds = {"heap": 0, "anon": 0, "file": 0}
    current = "anon"
    for line in pathlib.Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if not head:
            continue
        if "-" in head[0] and len(head) >= 5:
            name = head[5] if len(head) > 5 else ""
            current = "heap" if name == "[heap]" else ("file" if name.startswith("/") else "anon")
        elif head[0] == "Rss:":
            kinds[current] += int(head[1])
    return kinds


def _rest(port: int, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {ADMIN_TOKEN}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"{}")


def _fuzz_round(port: int, examples: int) -> tuple[int, int]:
    """Every route's REST fuzz of tests/integration/test_fuzz.py; (requests, 5xx)."""
    from hypothesis import HealthCheck, settings

    from tests.integration import test_fuzz as fz

    client = fz._Http(port)
    counts = {"requests": 0, "5xx": 0}
    fuzz = settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    for route in fz.ROUTES:
        _fuzz_route(client, route, fuzz, counts)
    return counts["requests"], counts["5xx"]


def _fuzz_route(client: Any, route: Any, fuzz: Any, counts: dict[str, int]) -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from tests.integration import test_fuzz as fz

    if True:

        @fuzz
        @given(
            values=st.lists(
                fz.texts,
                min_size=len(route.path_variables),
                max_size=len(route.path_variables),
            ),
            body=fz._body_strategy(route),
            query=fz._query_strategy(route),
            headers=st.sampled_from(fz.HEADER_SETS),
            suffix=st.sampled_from(["", "", "", "/", "%0A", "/..", ":verb", "//"]),
        )
        def run(
            values: list[str],
            body: bytes | None,
            query: list[tuple[str, str]],
            headers: dict[str, bytes | None],
            suffix: str,
        ) -> None:
            path = fz._path(route, values) + suffix
            if query:
                path += "?" + "&".join(f"{fz._quote(k)}={fz._quote(v)}" for k, v in query)
            status, _ = client.send(route.http_method, path, body, headers)
            counts["requests"] += 1
            counts["5xx"] += status >= 500

        run()


def _refusals(port: int) -> int:
    total, token = 0, ""
    while True:
        page = _rest(port, "GET", f"/v1/audit?page_size=1000&page_token={token}")
        total += sum(1 for r in page["records"] if r["outcome"] != "OK")
        token = page.get("next_page_token", "")
        if not token:
            return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=60, help="per route and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="fuzz-memory-"))
    out.mkdir(parents=True, exist_ok=True)
    report, ready, log = out / "report.jsonl", out / "ready.json", out / "hub.log"
    report.unlink(missing_ok=True)
    ready.unlink(missing_ok=True)
    for stale in out.glob("fuzz.db*"):
        stale.unlink()
    env = {**os.environ, "WINGSMITH_ADMIN_TOKEN": ADMIN_TOKEN, "FUZZ_MEMORY_REPORT": str(report)}
    hub_args = [
        "--db", str(out / "fuzz.db"), "--init-db", "--grpc-listen", "127.0.0.1:0",
        "--http-listen", "127.0.0.1:0", "--ready-file", str(ready),
    ]  # fmt: skip
    with log.open("w") as log_handle:
        hub = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz_memory", "serve", *hub_args],
            env=env,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
        )
        try:
            while not ready.exists() or not ready.read_text().strip():
                if hub.poll() is not None:
                    raise SystemExit(f"the hub exited: see {log}")
                time.sleep(0.2)
            port = int(json.loads(ready.read_text())["http"].rpartition(":")[2])
            _rest(
                port,
                "POST",
                "/v1/projects",
                {"name": "fz-seed-project", "quotas": {"H100-80GB": 8}},
            )
            _rest(port, "POST", "/v1/clusters", {"cluster_id": "fz-seed-cluster"})

            def mark() -> dict[str, Any]:
                lines = report.read_text().splitlines() if report.exists() else []
                hub.send_signal(signal.SIGUSR1)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    now = report.read_text().splitlines() if report.exists() else []
                    if len(now) > len(lines):
                        return dict(json.loads(now[-1]))
                    time.sleep(0.2)
                raise SystemExit("no snapshot from the hub")

            _fuzz_round(port, max(1, args.examples // 10))  # warm-up: imports, caches
            marks = [mark()]
            rounds = []
            for _ in range(args.rounds):
                started = time.monotonic()
                rounds.append((*_fuzz_round(port, args.examples), time.monotonic() - started))
                marks.append(mark())
            refusals = _refusals(port)
        finally:
            hub.send_signal(signal.SIGINT)
            hub.wait(timeout=60)
    text = log.read_text()
    mib = 1024 * 1024
    for i, (requests, errors5, seconds) in enumerate(rounds, 1):
        print(f"round {i}: {requests} requests, {errors5} 5xx, {seconds:.0f} s")
    names = ["after warm-up", *(f"after round {i}" for i in range(1, len(marks)))]
    for name, entry in zip(names, marks, strict=True):
        print(f"{name}: RSS {entry['rss'] / mib:.1f} MiB, traced {entry['traced'] / mib:.1f} MiB")
        for line in entry["top"][:8]:
            print("    " + line)
    print(f"tracebacks in the hub's log: {text.count('Traceback')}")
    print(f"ERROR lines in the hub's log: {text.count(' ERROR ')}")
    print(f"audit records of refused calls: {refusals}")
    print(f"(files in {out})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2:])
    else:
        main()
