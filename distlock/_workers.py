"""Threads for the sync driver's background round trips, shared by every Lock of a process.

A call that finds no idle thread gets a new one, up to ``limit`` threads; past it, calls
queue for the next thread that is free.  The limit keeps the threads of a process from
growing with the number of Lock objects (or with a burst of renewals); a hang holds up
at most the threads it occupies, and never a deadline: those are the timer thread's, which
declares a section lost when its renewals do not come back in time.  Threads are made on
demand and exit after a while idle, so a quiet process costs no thread at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger("distlock")


class Workers:
    """Run callables in the background: on an idle thread, or on a new one."""

    def __init__(
        self, name: str, idle_seconds: float = 10.0, limit: int | None = None
    ) -> None:
        self._name = name
        self._idle_seconds = idle_seconds
        #: The most threads at once (None: one per call in flight).
        self._limit = limit
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Callable[[], object]] = deque()
        self._idle = 0
        self._threads = 0
        self._alive: set[threading.Thread] = set()
        self._closed = False

    def submit(self, fn: Callable[[], object]) -> None:
        with self._cond:
            if self._closed:
                return  # closing: background work of a closed Lock is moot
            self._queue.append(fn)
            if self._idle >= len(self._queue):
                self._cond.notify()
                return
            if self._limit is not None and self._threads >= self._limit:
                return  # a busy thread takes it when it is free
            self._threads += 1
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{self._threads}", daemon=True
            )
            self._alive.add(thread)
        thread.start()

    @property
    def threads(self) -> int:
        """Threads alive now (busy or idle)."""
        with self._cond:
            return self._threads

    def _work(self) -> None:
        cond = self._cond
        with cond:
            while True:
                if self._queue:
                    fn = self._queue.popleft()
                    cond.release()
                    try:
                        fn()
                    except Exception:
                        log.exception("distlock background call failed")
                    finally:
                        cond.acquire()
                    continue
                if self._closed:
                    break
                self._idle += 1
                started = time.monotonic()
                cond.wait(self._idle_seconds)
                self._idle -= 1
                if (
                    not self._queue
                    and time.monotonic() - started >= self._idle_seconds
                ):
                    break
            self._threads -= 1
            self._alive.discard(threading.current_thread())

    def after_fork(self) -> None:
        """In a child made by ``os.fork``: none of the parent's threads is there, and its
        queued calls are the parent's.  Start afresh, with a new condition."""
        self._cond = threading.Condition(threading.Lock())
        self._queue = deque()
        self._idle = 0
        self._threads = 0
        self._alive = set()
        self._closed = False

    def close(self) -> None:
        """Drop queued calls and wait for every thread to finish its current call."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
            threads = list(self._alive)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()
