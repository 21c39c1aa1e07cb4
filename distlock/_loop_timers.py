"""The timers of one asyncio ``Lock``: its handles, kept by instant, driven by one
event-loop timer.

A loop timer per section would cost a ``TimerHandle`` (with a copy of the context) per
lock cycle and a push into the loop's heap, whose entries compare in Python.  Here, as in
the sync driver's timer thread (:class:`distlock._scheduler.Scheduler`), a handle is armed
by putting it in the bucket of its instant: a heap of the distinct instants, and for each
the handles due then.  Renewals wake on a grid (see ``distlock._core.lease.RENEW_STEPS``),
so the thousands of locks a service may hold share a few instants, and a held lock costs
one reference in a bucket: no timer object, no bound method, no heap entry of its own.

The handle keeps the instant it is armed for (``_armed_at``, the float its bucket's
handles share); an entry is live while it does, so disarming is clearing that slot, and a
dead entry is dropped when its instant comes up or when dead entries dominate.  The loop
timer is moved only when the earliest instant moves earlier; when it fires, every handle
due runs in that one callback, so renewals due together are sent together.

Instants are the core's milliseconds (``time.monotonic()`` in ms), whatever clock the
loop keeps, so the instant a section computed is the bucket's own float.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections.abc import Callable
from typing import Any

from distlock._clock import now_ms
from distlock._scheduler import Armed

log = logging.getLogger("distlock")


class _Bucket(list[Armed]):
    """The handles armed for one instant, and that instant: the one float they all keep."""

    __slots__ = ("when",)

    def __init__(self, when: float, items: tuple[Armed, ...]) -> None:
        super().__init__(items)
        self.when = when


class LoopTimers:
    __slots__ = ("_dead", "_due", "_entries", "_handle", "_handle_at", "_heap", "_loop", "_on_due")

    def __init__(self, on_due: Callable[[Any], None]) -> None:
        #: What an armed handle's instant runs (one callback for all of them).
        self._on_due = on_due
        #: The distinct instants that have a bucket, as a heap: exactly the keys of _due.
        self._heap: list[float] = []
        self._due: dict[float, _Bucket] = {}
        #: Entries in buckets, live or not, and those known dead (a hint for compaction).
        self._entries = 0
        self._dead = 0
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = math.inf
        self._loop: asyncio.AbstractEventLoop | None = None

    def arm(self, when: float, item: Armed) -> None:
        """Run ``on_due(item)`` on the running loop at ``when`` (``time.monotonic()`` ms),
        unless :meth:`disarm` or another ``arm`` of ``item`` comes first."""
        if self._dead > 64 and self._dead * 2 > self._entries:
            self._compact()
        bucket = self._due.get(when)
        if bucket is None:
            self._due[when] = _Bucket(when, (item,))
            heapq.heappush(self._heap, when)
        else:
            when = bucket.when
            bucket.append(item)
        if item._armed_at is not None:
            self._dead += 1  # its entry at the instant it leaves is dead
        item._armed_at = when
        self._entries += 1
        loop = asyncio.get_running_loop()
        if when < self._handle_at or loop is not self._loop:
            self._wake(loop, when)

    def disarm(self, item: Armed) -> None:
        """Forget ``item``'s entry: at once if it is the last of its bucket, else lazily."""
        when = item._armed_at
        if when is None:
            return
        item._armed_at = None
        bucket = self._due.get(when)
        # A body that ends before its first heartbeat (the common case) armed nothing
        # since: its entry is the last of its bucket and goes now, leaving nothing for a
        # compaction or the instant's callback to step over.
        if bucket and bucket[-1] is item:
            bucket.pop()
            self._entries -= 1
        else:
            self._dead += 1

    def _compact(self) -> None:
        due: dict[float, _Bucket] = {}
        for when, bucket in self._due.items():
            live = [item for item in dict.fromkeys(bucket) if item._armed_at == when]
            if live:
                due[bucket.when] = _Bucket(bucket.when, tuple(live))
        self._due = due
        self._heap = list(due)
        heapq.heapify(self._heap)
        self._entries = sum(map(len, due.values()))
        self._dead = 0

    def _wake(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._loop = loop
        self._handle_at = when
        self._handle = loop.call_later(
            max(0.0, (when - now_ms()) / 1000.0), self._fire
        )

    def _fire(self) -> None:
        # No loop timer is moved while the callbacks arm: once, after them, if need be.
        self._handle, self._handle_at = None, -math.inf
        try:
            self._run_due(now_ms())
        finally:
            self._handle_at = math.inf
            if self._heap and self._loop is not None:
                self._wake(self._loop, self._heap[0])

    def _run_due(self, now: float) -> None:
        while self._heap and self._heap[0] <= now:  # an arm may compact: a new list
            when = heapq.heappop(self._heap)
            bucket = self._due.pop(when)
            self._entries -= len(bucket)
            for item in bucket:
                # Checked as each runs: an earlier callback may have disarmed or moved it
                # (an item armed twice at one instant is in the bucket twice: it runs once).
                if item._armed_at != when:
                    self._dead = max(0, self._dead - 1)
                    continue
                item._armed_at = None  # spent: a late disarm must not count it
                try:
                    self._on_due(item)
                except Exception:
                    log.exception("distlock timer callback failed")

    def close(self) -> list[Armed]:
        """Drop every timer (the Lock is closing); return the items that were armed (each
        once): the Lock's open sections, which its close must end."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._handle_at = None, math.inf
        live: dict[int, Armed] = {}
        for when, bucket in self._due.items():
            for item in bucket:
                if item._armed_at == when:
                    live[id(item)] = item
        for bucket in self._due.values():
            for item in bucket:
                item._armed_at = None
        self._heap.clear()
        self._due.clear()
        self._entries = self._dead = 0
        return list(live.values())
