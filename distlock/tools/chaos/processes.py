"""Lock clients in child processes (``distlock.tools.chaos.holder``), driven line by line.

Children run ``sys.executable -m distlock.tools.chaos.holder``, with the directory holding
this very ``distlock`` package first on their path: an installed package and a checkout
alike, the child runs the same code as its parent.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from distlock.tools.chaos.recorder import Command, Recorder, Section

#: The directory holding the ``distlock`` package this module belongs to.
ROOT = Path(__file__).resolve().parents[3]


class Child:
    """``Child("hold", url, prefix, id, ttl_ms)``: one ``distlock.tools.chaos.holder`` process."""

    def __init__(self, mode: str, url: str, prefix: str, id: str, ttl_ms: int, *extra: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        fd, self._stderr_path = tempfile.mkstemp(prefix="chaos-child-", suffix=".log")
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distlock.tools.chaos.holder",
                    *(mode, url, prefix, id, str(ttl_ms)),
                    *extra,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=fd,
                cwd=ROOT,
                env=env,
            )
        finally:
            os.close(fd)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="chaos-child-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.lines.put(json.loads(raw))
            except ValueError:
                self.lines.put({"kind": "garbage", "line": raw.decode(errors="replace")})

    def expect(self, kind: str, timeout: float) -> dict[str, Any]:
        """The next line of ``kind`` (skipping others), or an AssertionError with stderr."""
        give_up = time.monotonic() + timeout
        while True:
            left = give_up - time.monotonic()
            if left <= 0:
                break
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.get("kind") == kind:
                return line
        raise AssertionError(
            f"child never said {kind} within {timeout}s (exit={self.proc.poll()}): {self.stderr()}"
        )

    def stderr(self) -> str:
        try:
            return Path(self._stderr_path).read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def kill(self) -> float:
        """SIGKILL; returns the instant it was sent."""
        at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        return at

    def finish(self, timeout: float) -> dict[str, Any]:
        """Close stdin (the child's cue to stop) and return its RESULT line."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.expect("RESULT", timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        Path(self._stderr_path).unlink(missing_ok=True)


def merge_result(recorder: Recorder, result: dict[str, Any]) -> None:
    """Add a child's sections and commands to the parent's record."""
    for raw in result["sections"]:
        recorder.add_section(Section(**raw))
    for raw in result["commands"]:
        fields = dict(raw)
        fields["args"] = tuple(fields["args"])
        recorder.command(Command(**fields))
