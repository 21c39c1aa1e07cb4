"""The timers of one asyncio ``Lock``: a heap of its own, driven by one event-loop timer.

A loop timer per section would cost a ``TimerHandle`` (with a copy of the context) per
lock cycle and a push into the loop's heap, whose entries compare in Python; a lock cycle
arms one timer and cancels it, so that was most of the cost of arming.  Here arming is a
push of a tuple (compared in C) and cancelling is a flag (:class:`Timer` of the sync
scheduler, whose entries are dropped lazily the same way).  The loop timer is moved only
when the earliest entry moves earlier; when it fires, every entry due then runs in that
one callback, so renewals due together are sent together.

Instants are the core's milliseconds (``time.monotonic()`` in ms), whatever clock the
loop keeps, so the instant a section computed is the heap entry's own float.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from distlock._scheduler import Timer

log = logging.getLogger("distlock")


class LoopTimers:
    __slots__ = ("_cancelled", "_handle", "_handle_at", "_heap", "_loop", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        #: Dead entries (a hint for compaction, kept by Timer.cancel()).
        self._cancelled = 0
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = math.inf
        self._loop: asyncio.AbstractEventLoop | None = None

    def call_at(self, when: float, fn: Callable[[Any], None], arg: Any) -> Timer:
        """Run ``fn(arg)`` on the running loop at ``when`` (``time.monotonic()`` ms)."""
        timer = Timer(self, fn, arg)
        heap = self._heap
        dead = self._cancelled
        if dead > 64 and dead * 2 > len(heap):
            self._heap = heap = [e for e in heap if not e[2].cancelled]
            heapq.heapify(heap)
            self._cancelled = 0
        heapq.heappush(heap, (when, next(self._seq), timer))
        loop = asyncio.get_running_loop()
        if when < self._handle_at or loop is not self._loop:
            self._wake(loop, when)
        return timer

    def _wake(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._loop = loop
        self._handle_at = when
        self._handle = loop.call_later(
            max(0.0, (when - time.monotonic() * 1000.0) / 1000.0), self._fire
        )

    def _fire(self) -> None:
        self._handle, self._handle_at = None, math.inf
        heap = self._heap
        now = time.monotonic() * 1000.0
        due: list[Timer] = []
        while heap and heap[0][0] <= now:
            timer = heapq.heappop(heap)[2]
            if timer.cancelled:
                self._cancelled = max(0, self._cancelled - 1)
                continue
            timer.cancelled = True  # fired: a late cancel() must not count it again
            due.append(timer)
        for timer in due:
            fn = timer.fn
            if fn is None:
                continue
            try:
                fn(timer.arg)
            except Exception:
                log.exception("distlock timer callback failed")
        # The callbacks may have armed earlier timers of their own (and moved the handle).
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._cancelled = max(0, self._cancelled - 1)
        if heap and heap[0][0] < self._handle_at and self._loop is not None:
            self._wake(self._loop, heap[0][0])

    def close(self) -> None:
        """Drop every timer (the Lock is closing)."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._handle_at = None, math.inf
        for _when, _seq, timer in self._heap:
            timer.cancel()
        self._heap.clear()
        self._cancelled = 0
