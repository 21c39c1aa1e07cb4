"""One timer thread per process: every renewal and deadline watch of every sync ``Lock`` shares it.

A body that finishes before its first heartbeat only joins its instant's bucket and leaves it; the
thread is started on the first watched section, and ends after a while with nothing to do (so a
process whose Locks are idle, or dropped without ``close()``, keeps no thread for long).  A Lock
made per use (redis-py's habit) therefore costs no thread of its own: the number of threads does
not grow with the number of Lock objects.  ``Lock.close()`` takes only its own entries out
(:meth:`Scheduler.take`).  In a child made by ``os.fork`` the process's scheduler starts afresh
(:meth:`Scheduler.after_fork`): the parent's thread does not exist there.  Callbacks must not
block: renewal round trips go to a worker pool so a hung connection cannot delay another
section's deadline.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from distlock._clock import now_ms

log = logging.getLogger("distlock")

#: How long the timer thread waits with nothing to do before it ends.
IDLE_SECONDS = 10.0


class TimerOwner(Protocol):
    """What keeps a timer's heap: it counts the timers cancelled in it."""

    _cancelled: int


class Timer:
    """``fn(arg)`` at ``when``: the argument is kept here rather than in a closure, so that
    a held lock's timer is one small object (thousands of locks may be held at once)."""

    # No instant of its own: the heap entry that holds it has it.
    __slots__ = ("_owner", "arg", "cancelled", "fn")

    def __init__(self, owner: TimerOwner, fn: Callable[[Any], None], arg: Any) -> None:
        self._owner = owner
        self.fn: Callable[[Any], None] | None = fn
        self.arg = arg
        self.cancelled = False

    def cancel(self) -> None:
        """Lazy and lock-free (a lock cycle arms and cancels one timer each): the entry
        stays in the heap, dropped when it comes up or when dead entries dominate; it lets
        go of its callback and argument at once, so a dead entry holds no section."""
        if not self.cancelled:
            self.cancelled = True
            # fn before arg: the timer thread reads arg, then fn (see Scheduler._loop).
            self.fn = None
            self.arg = None
            self._owner._cancelled += 1  # a hint for compaction only, so no lock


class Armed(Protocol):
    """What :meth:`Scheduler.arm` wakes: it keeps the instant it is armed for, so an entry
    found at another instant (or none) is stale, and a held lock's timer is one reference
    in the scheduler's bucket of that instant and nothing else.  A sync handle's is the
    one the flows compare the section's wake-up time with (``HandleBase._armed_at``)."""

    _armed_at: float | None


class Timers(Protocol):
    """A Lock's timers, kept by instant: the sync timer thread's :class:`Scheduler`, or
    the asyncio driver's ``LoopTimers``.  Both drivers arm their handles through
    ``LockBase._arm``."""

    def arm(self, when: float, item: Armed) -> None: ...

    def disarm(self, item: Armed) -> None: ...


class Shared(list["Timer | Armed"]):
    """The timers due at one instant once a second one joins the first, and that instant:
    the one float every item armed for it keeps (each computed its own, equal, float)."""

    __slots__ = ("when",)

    def __init__(self, when: float, items: tuple[Timer | Armed, ...]) -> None:
        super().__init__(items)
        self.when = when


#: The timers due at one instant: one of them alone, or a shared list.
Bucket: TypeAlias = "Timer | Armed | Shared"


class Scheduler:
    """Timers on the client clock (``time.monotonic()`` in milliseconds, the core's clock,
    so an instant the core computed goes in as it is: no second float per armed timer),
    run by one daemon thread.

    Timers are kept by instant: a heap of the distinct instants, and for each the timers
    due then.  Renewals wake on a grid (see ``distlock._core.lease.RENEW_STEPS``), so the
    thousands of locks a service may hold share a few instants: a held lock costs one
    reference in a bucket, where a heap entry of its own (a tuple, a sequence number and
    the instant) cost some 120 bytes.  Timers due at one instant run in the order they
    were set.

    The thread sleeps until the earliest instant, even one whose timers were all cancelled;
    cancelled ones are dropped only then (or when they dominate).  So the common case, a
    timer armed and cancelled well before its time, never wakes the thread: a wake-up costs
    a GIL hand-off, which would otherwise be paid once per lock cycle.
    """

    def __init__(self, name: str, on_due: Callable[[Any], None] = lambda item: None) -> None:
        self._name = name
        #: What an :meth:`arm` entry runs when it comes up (one callback for all of them,
        #: so that no entry carries its own).
        self._on_due = on_due
        #: The distinct instants that have a bucket, as a heap: exactly the keys of _due.
        self._heap: list[float] = []
        self._due: dict[float, Bucket] = {}
        #: Timers in buckets, live or not (what compaction weighs the dead against).
        self._entries = 0
        #: The condition's own lock: ``with self._lock`` is a C call where ``with self._cond``
        #: is a Python one, and holding it is holding the condition.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._cancelled = 0
        #: When the waiting thread wakes on its own; -inf while it is not waiting.
        self._wake_at = -math.inf
        #: Run once every timer due now has run: what those timers gathered goes out together.
        self._after_due: list[Callable[[], None]] = []

    def call_at(self, when: float, fn: Callable[[Any], None], arg: Any = None) -> Timer:
        """Run ``fn(arg)`` on the timer thread at ``when`` (``time.monotonic()`` ms)."""
        timer = Timer(self, fn, arg)
        self.arm(when, timer)
        return timer

    def disarm(self, item: Armed) -> None:
        """Forget ``item``'s entry: at once if it is the last of its bucket, else lazily
        (it is dropped when its instant comes up, or by a compaction)."""
        if item._armed_at is None:
            return
        with self._lock:
            when = item._armed_at
            if when is None:  # it came up meanwhile
                return
            item._armed_at = None
            bucket = self._due.get(when)
            # A body that ends before its first heartbeat (the common case) armed nothing
            # since: its entry is the last of its bucket and goes now, leaving nothing for
            # a compaction or the timer thread to step over.  The instant keeps a bucket,
            # empty, as it keeps its place in the heap.
            if bucket is item:
                self._due[when] = Shared(when, ())
                self._entries -= 1
            elif isinstance(bucket, Shared) and bucket and bucket[-1] is item:
                bucket.pop()
                self._entries -= 1
            else:
                self._cancelled += 1

    @staticmethod
    def _dead(when: float, item: Timer | Armed) -> bool:
        if isinstance(item, Timer):
            return item.cancelled
        # An item armed again at the same instant is in the bucket twice: the first entry
        # to come up runs it and clears the mark, so the second finds it dead.
        return item._armed_at != when

    def _compact(self) -> None:
        due: dict[float, Bucket] = {}
        entries = 0
        for when, bucket in self._due.items():
            live: list[Timer | Armed] = []
            seen: set[int] = set()  # an item armed again at one instant is there twice
            for item in bucket if isinstance(bucket, Shared) else (bucket,):
                if not self._dead(when, item) and id(item) not in seen:
                    seen.add(id(item))
                    live.append(item)
            if live:
                shared = bucket.when if isinstance(bucket, Shared) else when
                due[shared] = live[0] if len(live) == 1 else Shared(shared, tuple(live))
                entries += len(live)
        self._due = due
        self._heap = list(due)
        heapq.heapify(self._heap)
        self._entries = entries
        self._cancelled = 0

    def arm(self, when: float, item: Timer | Armed) -> None:
        """Run the scheduler's ``on_due(item)`` at ``when``, unless :meth:`disarm` or
        another ``arm`` of ``item`` comes first.  ``item`` keeps the instant (the float the
        items due then share, equal to ``when``): an entry of it is live while it does.
        (A :class:`Timer` comes from :meth:`call_at`, and runs its own callback.)"""
        with self._lock:  # every arm passes here: see _lock
            if self._closed:
                raise RuntimeError(f"{self._name} is closed")
            # Compact when dead entries dominate: the filter, not the counter, decides what
            # is dead, so a miscount costs a scan, never a timer.  A few dead entries may
            # stay until they come up; the thread then drops them without running anything.
            dead = self._cancelled
            if dead > 64 and dead * 2 > self._entries:
                self._compact()
            due = self._due
            bucket = due.get(when)
            if bucket is None:
                due[when] = item
                heapq.heappush(self._heap, when)
            elif isinstance(bucket, Shared):
                when = bucket.when
                bucket.append(item)
            else:
                due[when] = Shared(when, (bucket, item))
            if not isinstance(item, Timer):
                if item._armed_at is not None:
                    self._cancelled += 1  # its entry at the instant it leaves is dead
                # Under the condition, as the loop's check-and-clear of a due entry: an
                # arm racing it is never wiped out by it.
                item._armed_at = when
            self._entries += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            elif when < self._wake_at:
                self._cond.notify()

    def after_due(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the timer thread once no more timers are due (call it from a timer
        callback: the renewals those callbacks sent are flushed together)."""
        with self._cond:
            self._after_due.append(fn)

    def _run_after_due(self) -> None:
        pending, self._after_due = self._after_due, []
        self._cond.release()
        try:
            for fn in pending:
                try:
                    fn()
                except Exception:
                    log.exception("distlock timer callback failed")
        finally:
            self._cond.acquire()

    def _loop(self) -> None:
        with self._cond:
            while not self._closed:
                heap = self._heap
                now = now_ms()
                if self._after_due and (not heap or heap[0] > now):
                    self._run_after_due()
                    continue
                if not heap:
                    # Idle: end the thread after a while; the next call_at starts another.
                    # A Lock that is never closed then costs no thread while unused.
                    self._wake_at = math.inf
                    self._cond.wait(IDLE_SECONDS)
                    self._wake_at = -math.inf
                    if not self._heap and not self._closed:
                        self._thread = None
                        return
                    continue
                if heap[0] > now:
                    # Even when only empty buckets are left (bodies that ended before their
                    # first heartbeat): dropping them now would leave the thread idle, so the
                    # next cycle's arm, at that same instant, would push it again and wake
                    # the thread (a GIL hand-off per lock cycle).  Asleep until the instant,
                    # the thread is woken by no arm for it; it drops the bucket then.
                    self._wake_at = heap[0]
                    # At most IDLE_SECONDS: the instant may be an empty bucket's, far off,
                    # and the thread must find out that nothing is left, to end.
                    self._cond.wait(min((heap[0] - now) / 1000.0, IDLE_SECONDS))
                    self._wake_at = -math.inf
                    continue
                when = heapq.heappop(heap)
                bucket = self._due.pop(when)
                items = bucket if isinstance(bucket, Shared) else (bucket,)
                self._entries -= len(items)
                for timer in items:
                    if self._closed:
                        break  # close() dropped every timer, these with the rest
                    self._run(when, timer)

    def _run(self, when: float, timer: Timer | Armed) -> None:
        """One entry of a due bucket (called, and returning, with the condition held)."""
        if not isinstance(timer, Timer):
            if timer._armed_at != when:  # disarmed, or armed again since
                self._cancelled = max(0, self._cancelled - 1)
                return
            timer._armed_at = None  # spent: a late disarm must not count it
            self._cond.release()
            try:
                self._on_due(timer)
            except Exception:
                log.exception("distlock timer callback failed")
            finally:
                self._cond.acquire()
            return
        if timer.cancelled:
            self._cancelled = max(0, self._cancelled - 1)
            return
        timer.cancelled = True  # fired: a late cancel() must not count it again
        arg = timer.arg
        fn = timer.fn  # None: a cancel() raced this pop (it clears fn, then arg)
        if fn is None:
            return
        self._cond.release()
        try:
            fn(arg)
        except Exception:
            log.exception("distlock timer callback failed")
        finally:
            self._cond.acquire()

    def take(self, owned: Callable[[Armed], bool]) -> list[Armed]:
        """Disarm every live :meth:`arm` entry whose item is ``owned``, and return those
        items (each once): what one Lock's ``close()`` takes out of the process's
        scheduler, leaving every other Lock's entries armed.  The entries stay where they
        are, dead, as after a :meth:`disarm`."""
        taken: dict[int, Armed] = {}
        with self._lock:
            for when, bucket in self._due.items():
                for item in bucket if isinstance(bucket, Shared) else (bucket,):
                    if isinstance(item, Timer) or item._armed_at != when or not owned(item):
                        continue
                    item._armed_at = None
                    self._cancelled += 1
                    taken[id(item)] = item
        return list(taken.values())

    def after_fork(self) -> None:
        """In a child made by ``os.fork``: the parent's thread is not there, nor are the
        sections it watched (a child's copies of them are not its to renew).  Start afresh,
        with a new condition (the parent's may have been held at the fork)."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread = None
        self._heap = []
        self._due = {}
        self._entries = self._cancelled = 0
        self._wake_at = -math.inf
        self._after_due = []

    def on_timer_thread(self) -> bool:
        return threading.current_thread() is self._thread

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._due.clear()
            self._entries = 0
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()


class LockTimers:
    """One sync Lock's share of the process's :class:`Scheduler`.

    ``arm``, ``disarm`` and the rest are the scheduler's own bound methods, kept here as
    attributes: an arm costs a lock cycle what it did when each Lock had a scheduler of
    its own (no call of this object's, no lock of its own).  What is the Lock's alone is
    whether it still runs timers (``running``, False once closed) and which entries are
    its own (:meth:`close` takes out those only).
    """

    __slots__ = (
        "_closed", "_scheduler", "after_due", "arm", "call_at", "disarm", "on_timer_thread",
    )

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._closed = False
        self.arm: Callable[[float, Timer | Armed], None] = scheduler.arm
        self.disarm: Callable[[Armed], None] = scheduler.disarm
        self.call_at: Callable[..., Timer] = scheduler.call_at
        self.after_due: Callable[[Callable[[], None]], None] = scheduler.after_due
        self.on_timer_thread: Callable[[], bool] = scheduler.on_timer_thread

    @property
    def running(self) -> bool:
        """The Lock's timers run: it is open and the process's timer thread is alive."""
        return not self._closed and self._scheduler.running

    def close(self, owned: Callable[[Armed], bool]) -> list[Armed]:
        """Take the Lock's own entries out (see :meth:`Scheduler.take`) and return their
        items; the thread goes on for the process's other Locks."""
        self._closed = True
        return self._scheduler.take(owned)
