"""A throwaway PostgreSQL server from the machine's own packages, for tests and benchmarks.

    with PgServer.start() as server:
        url = server.create_database("t1")   # postgresql:///t1?host=/tmp/...&user=postgres

It listens only on a unix socket in a private temp directory (no TCP port), with durability
off (fsync, synchronous_commit, full_page_writes: a test database need not survive a power
loss), and is stopped and deleted when the context ends. Starting it takes about a second.

`initdb` refuses to run as root; run as root (CI, containers), the server runs as the
unprivileged `postgres` user (the Debian package creates it) through `runuser`.

`python -m tools.pgserver` starts one and prints its URL until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

START_TIMEOUT_S = 30.0


class PgServerUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (install the `postgresql` package)."""


def bin_dir() -> str:
    """The newest installed PostgreSQL's bin directory."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if found:
        return os.path.dirname(found[-1])
    on_path = shutil.which("postgres") or shutil.which("initdb")
    if on_path:
        return os.path.dirname(os.path.realpath(on_path))
    raise PgServerUnavailable("PostgreSQL server binaries not found: apt-get install -y postgresql")


@dataclass
class PgServer:
    root: str
    socket_dir: str
    process: subprocess.Popen[bytes]
    user: str

    @classmethod
    @contextlib.contextmanager
    def start(cls) -> Iterator[PgServer]:
        server = cls._start()
        try:
            yield server
        finally:
            server.stop()

    @classmethod
    def _start(cls) -> PgServer:
        binaries = bin_dir()
        as_root = os.geteuid() == 0
        user = "postgres" if as_root else pwd.getpwuid(os.geteuid()).pw_name
        root = tempfile.mkdtemp(prefix="wingsmith-pg-")
        data, sockets = os.path.join(root, "data"), os.path.join(root, "socket")
        os.mkdir(sockets)
        if as_root:
            entry = pwd.getpwnam(user)
            for path in (root, sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        prefix = ["runuser", "-u", user, "--"] if as_root else []
        try:
            subprocess.run(
                [
                    *prefix,
                    os.path.join(binaries, "initdb"),
                    "-D",
                    data,
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "--no-locale",
                    "-E",
                    "UTF8",
                ],
                check=True,
                capture_output=True,
            )
        except subprocess.CalledProcessError as e:
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"initdb failed: {e.stderr.decode(errors='replace')}") from e
        log_file = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115 (kept open)
        process = subprocess.Popen(
            [
                *prefix,
                os.path.join(binaries, "postgres"),
                "-D",
                data,
                "-k",
                sockets,
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log_file.close()
        server = cls(root=root, socket_dir=sockets, process=process, user=user)
        server._wait_ready()
        return server

    def url(self, database: str = "postgres") -> str:
        return f"postgresql:///{database}?host={self.socket_dir}&user=postgres"

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                log = self.log()
                self.stop()
                raise RuntimeError(f"postgres exited at start: {log[-2000:]}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        try:
            with open(os.path.join(self.root, "server.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            # runuser forwards the signal; SIGINT is PostgreSQL's fast shutdown.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def main() -> None:
    with PgServer.start() as server:
        print(server.url(), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    sys.exit(0)


if __name__ == "__main__":
    main()
