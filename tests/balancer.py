"""Hub processes behind a real HAProxy (the Debian package), for tests of several hubs.

`HubProcess`: `python -m hub` on a PostgreSQL URL, killable (SIGKILL) and restartable on the
same ports, so the balancer's configuration never changes. `Balancer`: HAProxy in TCP mode
with two frontends (gRPC and REST) round-robin over the hubs, health-checked every 200 ms,
retrying a refused connection on another hub (`option redispatch`). Its listening sockets are
opened here on 127.0.0.1 port 0 and handed to HAProxy (`bind fd@N`): no port is guessed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness import ADMIN_TOKEN, wait_until


@dataclass
class HubProcess:
    url: str
    workdir: Path
    name: str
    grpc_port: int = 0
    http_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, *, timeout: float = 30.0) -> HubProcess:
        ready = self.workdir / f"{self.name}.ready.json"
        ready.unlink(missing_ok=True)
        log = open(self.workdir / f"{self.name}.log", "ab")  # noqa: SIM115 (the child's)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hub",
                "--db",
                self.url,
                "--grpc-listen",
                f"127.0.0.1:{self.grpc_port}",
                "--http-listen",
                f"127.0.0.1:{self.http_port}",
                "--ready-file",
                str(ready),
                "--stale-after",
                "10",
                "--heartbeat-interval",
                "1",
                "--log-level",
                "WARNING",
            ],
            env={**os.environ, "WINGSMITH_ADMIN_TOKEN": ADMIN_TOKEN},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_until(lambda: ready.exists() and ready.read_text(), timeout=timeout, what="hub up")
        bound = json.loads(ready.read_text())
        self.grpc_port = int(bound["grpc"].rsplit(":", 1)[1])
        self.http_port = int(bound["http"].rsplit(":", 1)[1])
        return self

    def kill(self) -> None:
        """SIGKILL: no clean stop, its rows stay until the other hubs sweep them."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        """SIGTERM: a clean stop (streams closed, its rows removed)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def log(self) -> str:
        path = self.workdir / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


def haproxy_path() -> str:
    found = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None
    )
    if not found:
        raise AssertionError("haproxy not found: apt-get install -y haproxy (.ci/run does)")
    return found


@dataclass
class Balancer:
    hubs: list[HubProcess]
    grpc_port: int = 0
    http_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _dir: str = ""
    _sockets: list[socket.socket] = field(default_factory=list, repr=False)

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> Balancer:
        grpc_sock, http_sock = _listener(), _listener()
        self._sockets = [grpc_sock, http_sock]
        self.grpc_port, self.http_port = grpc_sock.getsockname()[1], http_sock.getsockname()[1]
        self._dir = tempfile.mkdtemp(prefix="wingsmith-haproxy-")
        config = Path(self._dir) / "haproxy.cfg"
        config.write_text(self._config(grpc_sock.fileno(), http_sock.fileno()))
        with open(Path(self._dir) / "haproxy.log", "wb") as log:
            self.process = subprocess.Popen(
                [haproxy_path(), "-db", "-f", str(config)],
                pass_fds=(grpc_sock.fileno(), http_sock.fileno()),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_until(self._answers, timeout=10, what="haproxy forwarding to a hub")
        return self

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"haproxy exited: {self.log()}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.http_port), timeout=1) as sock,
        ):
            sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            return sock.recv(12).startswith(b"HTTP/1.")
        return False

    def _config(self, grpc_fd: int, http_fd: int) -> str:
        def servers(kind: str) -> str:
            return "\n".join(
                f"    server {hub.name} 127.0.0.1:"
                f"{hub.grpc_port if kind == 'grpc' else hub.http_port}"
                " check inter 200ms fall 1 rise 1"
                for hub in self.hubs
            )

        return f"""global
    maxconn 4096
    stats socket {Path(self._dir) / "stats.sock"} mode 600
defaults
    mode tcp
    timeout connect 1s
    timeout client 1h
    timeout server 1h
    retries 3
    option redispatch
frontend grpc_in
    bind fd@{grpc_fd}
    default_backend hubs_grpc
backend hubs_grpc
    balance roundrobin
{servers("grpc")}
frontend http_in
    bind fd@{http_fd}
    default_backend hubs_http
backend hubs_http
    balance roundrobin
{servers("http")}
"""

    def sessions(self, backend: str = "hubs_http") -> dict[str, int]:
        """Hub name -> connections HAProxy has sent it on `backend` since it started (the
        `stot` column of `show stat` on its stats socket)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(Path(self._dir) / "stats.sock"))
            sock.sendall(b"show stat\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        lines = b"".join(chunks).decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line]
        return {
            row["svname"]: int(row["stot"] or 0)
            for row in rows
            if row.get("pxname") == backend and row["svname"] not in ("FRONTEND", "BACKEND")
        }

    def log(self) -> str:
        path = Path(self._dir) / "haproxy.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for sock in self._sockets:
            sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def wait_for(condition: Any, *, timeout: float, what: str) -> float:
    """Seconds until `condition()` held (fails past `timeout`)."""
    started = time.monotonic()
    wait_until(condition, timeout=timeout, what=what)
    return time.monotonic() - started
