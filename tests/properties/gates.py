"""Redis clients whose extend calls (renewals and manual extends) can be held at a gate.

A closed gate is a client-side hang of the extend path only: acquire and release still go
through, the renewal is in flight and unanswered, and the core must notice through its
deadline.  Tests wait for "a call is blocked at the gate" as an event, never by sleeping.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis
import redis.asyncio as aredis

from distlock import _protocol as scripts


class Gate:
    """Open by default. ``close()`` holds extend calls; ``open()`` lets them all through.

    ``allow(n)`` lets exactly ``n`` more calls through and holds the ones after.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._allowance: int | None = None  # None: open
        self.blocked = 0
        self.passed = 0

    def close(self) -> None:
        self.allow(0)

    def allow(self, n: int) -> None:
        with self._cond:
            self._allowance = n
            self._cond.notify_all()

    def open(self) -> None:
        with self._cond:
            self._allowance = None
            self._cond.notify_all()

    @property
    def is_open(self) -> bool:
        with self._cond:
            return self._allowance is None

    def passage(self) -> None:
        """Called by an extend call: returns when the gate lets it through."""
        with self._cond:
            self.blocked += 1
            self._cond.notify_all()
            while self._allowance == 0:
                self._cond.wait()
            if self._allowance is not None:
                self._allowance -= 1
            self.blocked -= 1
            self.passed += 1
            self._cond.notify_all()

    def wait_blocked(self, n: int = 1, timeout: float = 30.0) -> bool:
        """Block until ``n`` calls wait at the gate (False if ``timeout`` passes first)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.blocked >= n, timeout)


def _is_extend(script_or_sha: object) -> bool:
    return script_or_sha in (scripts.EXTEND.sha, scripts.EXTEND.source)


class GatedRedis(redis.Redis):
    """A sync client whose EXTEND script calls pass through ``gate``."""

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def evalsha(self, *args: Any) -> Any:
        if args and _is_extend(args[0]):
            self.gate.passage()
        return super().evalsha(*args)

    def eval(self, *args: Any) -> Any:
        if args and _is_extend(args[0]):
            self.gate.passage()
        return super().eval(*args)


class AsyncGatedRedis(aredis.Redis):
    """An asyncio client whose EXTEND script calls pass through ``gate`` (in a thread, so
    the event loop keeps running while a renewal hangs)."""

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    async def evalsha(self, *args: Any) -> Any:
        if args and _is_extend(args[0]):
            await asyncio.to_thread(self.gate.passage)
        return await super().evalsha(*args)

    async def eval(self, *args: Any) -> Any:
        if args and _is_extend(args[0]):
            await asyncio.to_thread(self.gate.passage)
        return await super().eval(*args)
