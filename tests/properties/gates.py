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


def extends_queued(pipe: Any) -> list[str]:
    """The keys of the EXTEND script calls on a pipeline (renewals go out pipelined)."""
    return [
        str(args[3])
        for args, _options in pipe.command_stack
        if len(args) > 3 and args[0] in ("EVALSHA", "EVAL") and _is_extend(args[1])
    ]


class GatedPipeline(redis.client.Pipeline):
    """A pipeline whose EXTEND script calls pass through ``gate``, each before it is sent."""

    gate: Gate

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        for _key in extends_queued(self):
            self.gate.passage()
        return super().execute(raise_on_error)


class AsyncGatedPipeline(aredis.client.Pipeline):
    """As :class:`GatedPipeline`, for asyncio (the gate is passed in a thread)."""

    gate: Gate

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        for _key in extends_queued(self):
            await asyncio.to_thread(self.gate.passage)
        return await super().execute(raise_on_error)


class GatedRedis(redis.Redis):
    """A sync client whose EXTEND script calls pass through ``gate``, sent alone or
    pipelined."""

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> GatedPipeline:
        pipe = GatedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.gate = self.gate
        return pipe

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if len(args) > 1 and args[0] in ("EVALSHA", "EVAL") and _is_extend(args[1]):
            self.gate.passage()
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


class AsyncGatedRedis(aredis.Redis):
    """An asyncio client whose EXTEND script calls pass through ``gate`` (in a thread, so
    the event loop keeps running while a renewal hangs)."""

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> AsyncGatedPipeline:
        pipe = AsyncGatedPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.gate = self.gate
        return pipe

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if len(args) > 1 and args[0] in ("EVALSHA", "EVAL") and _is_extend(args[1]):
            await asyncio.to_thread(self.gate.passage)
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
