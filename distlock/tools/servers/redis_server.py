"""``redis-server`` processes started and owned here, on free loopback ports.

Started without persistence (``--save '' --appendonly no``) so a restart loses every key,
which is exactly the "Redis lost the key" fault the chaos tool makes the lock surface.
Paused, killed and stopped by pid, never by port or name, so no other Redis on the machine
is ever touched.
The chaos tool, the benchmarks and the test suite (``tests/redis_server.py``) start their
servers with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class ServerNotFound(RuntimeError):
    """A server binary the tool needs is not installed."""


def redis_server_binary() -> str:
    """``redis-server`` on PATH, or a :class:`ServerNotFound` saying what to install."""
    found = shutil.which("redis-server")
    if found is None:
        raise ServerNotFound(
            "redis-server not found on PATH: install Redis (Debian/Ubuntu: "
            "`apt-get install redis-server`, macOS: `brew install redis`), "
            "or pass --redis URL to test a Redis you run"
        )
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 10 s; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class RedisServer:
    """One redis-server child process. ``restart()`` keeps the port and loses the data."""

    def __init__(
        self, port: int | None = None, binary: str | None = None, args: tuple[str, ...] = ()
    ) -> None:
        self.binary = binary or redis_server_binary()
        #: More command-line options (a Cluster node's, a replica's); kept across restarts.
        self.args = args
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="distlock-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> RedisServer:
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"redis-server on port {self.port} is already running")
        self.proc = subprocess.Popen(
            [
                self.binary,
                *("--port", str(self.port)),
                *("--bind", self.host),
                *("--save", ""),
                *("--appendonly", "no"),
                *("--dir", str(self.dir)),
                *("--daemonize", "no"),
                *("--protected-mode", "no"),
                *("--loglevel", "warning"),
                *self.args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.paused = False
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 10.0) -> None:
        # Polling a port for readiness is the one wait with no event to block on.
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode} on port {self.port}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout}s")

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("redis-server is not running")
        return self.proc.pid

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing and expires nothing."""
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def kill(self) -> float | None:
        """SIGKILL: the data is gone (no persistence).  Returns once the process has exited,
        with the instant (monotonic seconds) the signal was sent, None if none ran.

        From that instant on the server serves no request that was not already in it:
        a pending SIGKILL ends the process on its next entry to the kernel, and a request
        sent later must be read by a system call first."""
        if self.proc is None:
            return None
        if self.paused:
            self.resume()
        self.proc.kill()
        sent = time.monotonic()
        self.proc.wait(timeout=10)
        self.proc = None
        return sent

    def restart(self) -> None:
        """Kill and start again on the same port, empty: Redis lost every key."""
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            if self.paused:
                self.resume()
            stop_process(self.proc)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
