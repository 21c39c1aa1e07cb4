"""Sections: one ``run`` of a lock with a body, recorded from the attempt to its outcome.

Bodies simulate work by waiting on the handle's signal (that sleep is the work, not a
synchronisation); an oblivious body keeps working after the signal fires, a cooperative
one stops and raises the signal's reason.  A watcher (a thread, or a task in asyncio)
records the instant each signal fires.  On a ReentrantLock a body can re-enter the key
and do its work at depth :data:`INNER_DEPTH`.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from distlock import (
    LockLeaseLostError,
    LockNotAcquiredError,
    PermitHandle,
    ReadLock,
    ReentrantLock,
    WriteLock,
)
from distlock.asyncio import PermitHandle as AsyncPermitHandle
from distlock.asyncio import ReadLock as AsyncReadLock
from distlock.asyncio import ReentrantLock as AsyncReentrantLock
from distlock.asyncio import WriteLock as AsyncWriteLock
from distlock.options import AsyncHoldOptions, HoldOptions
from distlock.tools.chaos.clients import AnyAsyncHandle, AnyAsyncLock, AnyHandle, AnyLock
from distlock.tools.chaos.params import RETRIES, TRIAL_TIMEOUT, Params
from distlock.tools.chaos.recorder import Level, Recorder, Section, now

#: Depth of the inner level a reentrant victim's body opens and spends its time in.
INNER_DEPTH = 2

_usleep = ctypes.PyDLL(None).usleep  # PyDLL: the GIL stays held during the call
_usleep.argtypes = [ctypes.c_uint]
_usleep.restype = ctypes.c_int


def hold_gil(ms: float) -> None:
    """Block in a C call that keeps the GIL: no other thread of this process runs."""
    _usleep(int(ms * 1000))


@dataclass
class Body:
    """What a section does while it holds the lock."""

    ms: float
    #: Stop when the signal fires and raise its reason (else keep working, oblivious).
    cooperative: bool = False
    #: Starve the section's timers at the start of the body: hold the GIL (sync) or block
    #: the event loop with ``time.sleep`` (asyncio).
    starve_ms: float = 0.0
    at_start: Callable[[Section], None] | None = None
    at_end: Callable[[Section], None] | None = None


def rw_role(lock: AnyLock | AnyAsyncLock) -> str | None:
    """``"read"`` or ``"write"`` for a side of a read-write lock, else None."""
    if isinstance(lock, ReadLock | AsyncReadLock):
        return "read"
    if isinstance(lock, WriteLock | AsyncWriteLock):
        return "write"
    return None


def fence(handle: AnyHandle | AnyAsyncHandle) -> int | None:
    """The handle's fence: a semaphore's permits have none."""
    return None if isinstance(handle, PermitHandle | AsyncPermitHandle) else handle.fence


class Sections:
    """Runs and records the sections of one scenario's key."""

    def __init__(self, params: Params, recorder: Recorder) -> None:
        self.params = params
        self.recorder = recorder

    def _new(
        self, role: str, wait_ms: int | None = None, ttl_ms: int | None = None
    ) -> Section:
        params = self.params
        return self.recorder.new_section(role, params.key, ttl_ms or params.ttl_ms, wait_ms)

    def _renew_hook(self, section: Section) -> Callable[[BaseException], None]:
        def hook(exc: BaseException) -> None:
            section.renew_errors += 1
            self.recorder.changed()

        return hook

    def run_sync(
        self,
        lock: AnyLock,
        role: str,
        body: Body,
        *,
        retries: int,
        retry_delay_ms: float,
        nest: bool = False,
        wait_ms: int | None = None,
        ttl_ms: int | None = None,
    ) -> Section:
        """One ``run``; with ``nest`` (a ReentrantLock), the body re-enters the key and does
        its work at depth 2; with ``wait_ms``, it waits for the key that long.  ``ttl_ms``:
        the lock's, when not the scenario's."""
        section = self._new(role, wait_ms, ttl_ms)
        section.rw = rw_role(lock)
        reenter = None
        if nest:
            assert isinstance(lock, ReentrantLock), "only a ReentrantLock is re-entered"
            reenter = lock
        options: HoldOptions = {
            "retries": retries,
            "retry_delay_ms": retry_delay_ms,
            "on_renew_error": self._renew_hook(section),
        }
        if wait_ms is not None:
            options["wait_ms"] = wait_ms
        try:
            lock.run(
                self.params.key_id,
                lambda handle: self._sync_body(section, body, handle, reenter),
                **options,
            )
        except LockLeaseLostError as exc:
            self.recorder.settle(section, "lost", exc)
        except LockNotAcquiredError as exc:
            self.recorder.settle(section, "not_acquired", exc)
        except Exception as exc:
            self.recorder.settle(section, "error", exc)
        else:
            self.recorder.settle(section, "ok")
        return section

    def _sync_body(
        self,
        section: Section,
        body: Body,
        handle: AnyHandle,
        reenter: ReentrantLock | None = None,
    ) -> None:
        rec = self.recorder
        rec.enter(section, handle.token, fence(handle), handle.signal.aborted)
        started = now()
        watcher = threading.Thread(
            target=self._watch_sync,
            args=(section, handle),
            name=f"watch-{section.seq}",
            daemon=True,
        )
        watcher.start()
        try:
            if reenter is None:
                self._sync_work(section, body, handle, started)
            else:
                self._sync_nested(section, body, handle, started, reenter)
        finally:
            rec.leave(section)
            watcher.join(timeout=5)

    def _check_level(
        self,
        level: Level,
        outer: AnyHandle | AnyAsyncHandle,
        inner: AnyHandle | AnyAsyncHandle,
    ) -> None:
        """The inner handle is the next level of the outer one, sharing what it must."""
        depth = getattr(inner, "depth", None)
        if depth != level.depth:
            level.problems.append(f"re-entry opened depth {depth}, want {level.depth}")
        theirs = (inner.token, fence(inner), inner.signal)
        if theirs != (outer.token, fence(outer), outer.signal):
            level.problems.append("the inner level's token, fence or signal is not the outer's")

    def _sync_nested(
        self,
        section: Section,
        body: Body,
        handle: AnyHandle,
        started: float,
        lock: ReentrantLock,
    ) -> None:
        """``with lock.hold(key)`` inside the body: a re-entry, where the work is done."""
        rec = self.recorder
        level = rec.reenter(section, INNER_DEPTH)
        try:
            with lock.hold(self.params.key_id) as inner:
                rec.level_entered(level)
                self._check_level(level, handle, inner)
                try:
                    self._sync_work(section, body, inner, started)
                finally:
                    rec.level_left(level)
        except LockLeaseLostError as exc:
            rec.level_settled(level, "lost", exc)
            raise
        except BaseException as exc:
            rec.level_settled(level, "error", exc)
            raise
        rec.level_settled(level, "ok")

    def _sync_work(
        self, section: Section, body: Body, handle: AnyHandle, started: float
    ) -> None:
        """The body's work (``started``: when the outermost body began)."""
        if body.at_start is not None:
            body.at_start(section)
        if body.starve_ms:
            section.starved_from = now()
            hold_gil(body.starve_ms)
            section.starved_until = now()
        left = body.ms / 1000.0 - (now() - started)
        if left > 0 and handle.signal.wait(left):
            if body.cooperative:
                handle.signal.raise_if_aborted()
            left = body.ms / 1000.0 - (now() - started)
            if left > 0:
                time.sleep(left)  # oblivious: the work goes on
        if body.at_end is not None:
            body.at_end(section)

    def _watch_sync(self, section: Section, handle: AnyHandle) -> None:
        # Bounded: a body lasts at most TRIAL_TIMEOUT.
        give_up = now() + TRIAL_TIMEOUT
        while section.end is None and now() < give_up:
            if handle.signal.wait(0.005):
                self.recorder.signal_fired(section)
                return

    async def run_async(
        self,
        lock: AnyAsyncLock,
        role: str,
        body: Body,
        *,
        retries: int,
        retry_delay_ms: float,
        cancel_on_loss: bool = True,
        nest: bool = False,
        wait_ms: int | None = None,
    ) -> Section:
        """One ``run``; with ``nest`` (a ReentrantLock), the body re-enters the key and does
        its work at depth 2; with ``wait_ms``, it waits for the key that long."""
        section = self._new(role, wait_ms)
        section.rw = rw_role(lock)
        reenter = None
        if nest:
            assert isinstance(lock, AsyncReentrantLock), "only a ReentrantLock is re-entered"
            reenter = lock
        options: AsyncHoldOptions = {
            "retries": retries,
            "retry_delay_ms": retry_delay_ms,
            "on_renew_error": self._renew_hook(section),
            "cancel_on_loss": cancel_on_loss,
        }
        if wait_ms is not None:
            options["wait_ms"] = wait_ms
        try:
            await lock.run(
                self.params.key_id,
                lambda handle: self._async_body(section, body, handle, reenter),
                **options,
            )
        except LockLeaseLostError as exc:
            self.recorder.settle(section, "lost", exc)
        except LockNotAcquiredError as exc:
            self.recorder.settle(section, "not_acquired", exc)
        except Exception as exc:
            self.recorder.settle(section, "error", exc)
        else:
            self.recorder.settle(section, "ok")
        return section

    async def _async_body(
        self,
        section: Section,
        body: Body,
        handle: AnyAsyncHandle,
        reenter: AsyncReentrantLock | None = None,
    ) -> None:
        rec = self.recorder
        rec.enter(section, handle.token, fence(handle), handle.signal.aborted)
        started = now()
        watcher = asyncio.create_task(self._watch_async(section, handle), name="chaos-watch")
        try:
            if reenter is None:
                await self._async_work(section, body, handle, started)
            else:
                await self._async_nested(section, body, handle, started, reenter)
        except asyncio.CancelledError:
            # cancel_on_loss: the cancellation is how the loss reaches the body.
            rec.signal_fired(section)
            raise
        finally:
            rec.leave(section)
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def _async_nested(
        self,
        section: Section,
        body: Body,
        handle: AnyAsyncHandle,
        started: float,
        lock: AsyncReentrantLock,
    ) -> None:
        """``async with lock.hold(key)`` inside the body: a re-entry, where the work is done.
        A loss cancels the body at this level; each level's exit must turn that into
        ``LockLeaseLostError``."""
        rec = self.recorder
        level = rec.reenter(section, INNER_DEPTH)
        try:
            async with lock.hold(self.params.key_id) as inner:
                rec.level_entered(level)
                self._check_level(level, handle, inner)
                try:
                    await self._async_work(section, body, inner, started)
                except asyncio.CancelledError:
                    rec.signal_fired(section)
                    raise
                finally:
                    rec.level_left(level)
        except LockLeaseLostError as exc:
            rec.level_settled(level, "lost", exc)
            raise
        except BaseException as exc:
            rec.level_settled(level, "error", exc)
            raise
        rec.level_settled(level, "ok")

    async def _async_work(
        self, section: Section, body: Body, handle: AnyAsyncHandle, started: float
    ) -> None:
        """The body's work (``started``: when the outermost body began)."""
        if body.at_start is not None:
            body.at_start(section)
        if body.starve_ms:
            section.starved_from = now()
            time.sleep(body.starve_ms / 1000.0)  # noqa: ASYNC251 (blocks the loop on purpose)
            section.starved_until = now()
        left = body.ms / 1000.0 - (now() - started)
        fired = False
        if left > 0:
            try:
                fired = await asyncio.wait_for(handle.signal.wait(), left)
            except TimeoutError:
                fired = False
        if fired:
            if body.cooperative:
                handle.signal.raise_if_aborted()
            left = body.ms / 1000.0 - (now() - started)
            if left > 0:
                await asyncio.sleep(left)
        if body.at_end is not None:
            body.at_end(section)

    async def _watch_async(self, section: Section, handle: AnyAsyncHandle) -> None:
        await handle.signal.wait()
        self.recorder.signal_fired(section)

    def poll_until_entered(
        self,
        lock: AnyLock,
        stop: threading.Event,
        role: str = "intruder",
        body: Body | None = None,
    ) -> Section | None:
        """Poll for the key (5 ms apart) until taken or ``stop`` (the trial's victims are
        done); then run ``body`` (by default a short cooperative one)."""
        for _ in range(int(TRIAL_TIMEOUT / 0.1)):
            if stop.is_set():
                return None
            section = self.run_sync(
                lock,
                role,
                body or Body(self.params.ttl_ms * 0.75, cooperative=True),
                retries=RETRIES,
                retry_delay_ms=5,
            )
            if section.entered:
                return section
        return None
