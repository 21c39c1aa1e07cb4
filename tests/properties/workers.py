"""Calls run where a holder lives: on a thread of its own, or inside a task of an event
loop running on another thread; the state machines drive them one call at a time."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, Final

#: Upper bound for one call (a hang, never a timing claim).
WAIT: Final = 30.0


class ThreadWorker:
    """Runs calls on a thread of its own, one at a time."""

    def __init__(self) -> None:
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, done = item
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

    def call(self, fn: Callable[[], Any]) -> Any:
        done: Future[Any] = Future()
        self._calls.put((fn, done))
        return done.result(WAIT)

    def close(self) -> None:
        self._calls.put(None)
        self._thread.join(WAIT)


class TaskWorker:
    """Runs calls inside one task of an event loop running on another thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls: asyncio.Queue[tuple[Callable[[], Awaitable[Any]], Future[Any]] | None]
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start serving from a new task: a child of the task that calls this."""
        self.calls = asyncio.Queue()
        self.task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        while (item := await self.calls.get()) is not None:
            fn, done = item
            try:
                done.set_result(await fn())
            except BaseException as exc:
                done.set_exception(exc)

    def call(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        done: Future[Any] = Future()
        self.loop.call_soon_threadsafe(self.calls.put_nowait, (fn, done))
        return done.result(WAIT)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.calls.put_nowait, None)


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT)
        self.loop.close()
