"""``handle.signal``: aborts with the :class:`LockLeaseLostError` the moment the loss is known."""

from __future__ import annotations

import asyncio
import threading

from distlock.errors import LockLeaseLostError


class _SignalBase:
    __slots__ = ("_reason",)

    def __init__(self) -> None:
        self._reason: LockLeaseLostError | None = None

    @property
    def aborted(self) -> bool:
        """True once the lease is known lost."""
        return self._reason is not None

    @property
    def reason(self) -> LockLeaseLostError | None:
        """The loss, once known; the same instance ``run`` raises."""
        return self._reason

    def raise_if_aborted(self) -> None:
        """Raise the loss if it is known: a cheap check to put between steps of long work."""
        if self._reason is not None:
            raise self._reason

    def __repr__(self) -> str:
        state = f"aborted: {self._reason.reason.name}" if self._reason else "live"
        return f"<{type(self).__name__} {state}>"


#: Guards the lazy creation of a sync signal's Event against a concurrent fire.
_EVENT_GUARD = threading.Lock()


class LeaseSignal(_SignalBase):
    """The signal of a sync handle. Thread-safe: fired by the renewal scheduler's thread.

    >>> signal = LeaseSignal()
    >>> signal.aborted, signal.wait(timeout=0)
    (False, False)
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        super().__init__()
        # Created on the first wait(): most sections end without anyone waiting on them.
        self._event: threading.Event | None = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the loss is known or ``timeout`` seconds pass; True if aborted."""
        with _EVENT_GUARD:
            if self._reason is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def _fire(self, reason: LockLeaseLostError) -> bool:
        """Abort with ``reason`` unless already aborted; True if this call aborted it."""
        with _EVENT_GUARD:
            if self._reason is not None:
                return False
            self._reason = reason
            event = self._event
        if event is not None:
            event.set()
        return True


class AsyncLeaseSignal(_SignalBase):
    """The signal of an asyncio handle. Fired on the event loop's thread.

    ``await signal.wait()`` returns once the loss is known; combine it with
    ``asyncio.wait`` or a ``TaskGroup`` to stop work that does not take cancellation.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        super().__init__()
        # Made on the first wait(): an asyncio.Event (a deque of waiters and a loop
        # binding) per lock cycle was a large part of a cycle's cost, and almost no
        # section is waited on.  Both ends run on the loop's thread, so no guard.
        self._event: asyncio.Event | None = None

    async def wait(self) -> bool:
        """Wait until the loss is known; returns True."""
        if self._reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return True

    def _fire(self, reason: LockLeaseLostError) -> bool:
        """Abort with ``reason`` unless already aborted; True if this call aborted it."""
        if self._reason is not None:
            return False
        self._reason = reason
        if self._event is not None:
            self._event.set()
        return True
