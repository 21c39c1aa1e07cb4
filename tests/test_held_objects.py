"""A held lock's timer is only an entry in a shared bucket: the sync driver's scheduler (a
timer thread) and asyncio's loop timers, each the runtime's own, run each live item once, in
instant order.  What else a held lock no longer carries, on both drivers, is in
``tests/drivers/_async/test_held_objects.py``."""

from __future__ import annotations

import asyncio
import math
import threading

from distlock._clock import now_ms
from distlock._scheduler import Scheduler


class _Item:
    __slots__ = ("_armed_at", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._armed_at: float | None = None


def test_an_armed_item_runs_once_and_a_disarmed_or_rearmed_entry_never_runs() -> None:
    ran: list[str] = []
    done, blocked, go = threading.Event(), threading.Event(), threading.Event()

    def on_due(item: _Item) -> None:
        ran.append(item.name)
        if item.name == "last":
            done.set()

    def block(_arg: object) -> None:
        blocked.set()
        go.wait(30)

    scheduler = Scheduler("test-timer", on_due)
    try:
        # Every instant below is long past: the timer thread is held in a callback while
        # they are armed, or it could run ``moved``'s first entry before the second arm.
        scheduler.call_at(0.0, block)
        assert blocked.wait(30)
        dropped, moved, kept, last = _Item("dropped"), _Item("moved"), _Item("kept"), _Item("last")
        scheduler.arm(0.0, dropped)
        scheduler.disarm(dropped)
        scheduler.arm(0.0, moved)
        scheduler.arm(1.0, moved)  # a second arm: only this entry is live
        scheduler.arm(2.0, kept)
        scheduler.arm(3.0, last)  # all due at once: run in instant order
        go.set()
        assert done.wait(30)
        assert ran == ["moved", "kept", "last"]
        assert kept._armed_at is None  # spent: a late disarm counts nothing
    finally:
        go.set()
        scheduler.close()


def test_items_armed_for_one_instant_share_one_bucket_and_each_runs_once_in_arm_order() -> None:
    ran: list[str] = []
    done, blocked, go = threading.Event(), threading.Event(), threading.Event()

    def on_due(item: _Item) -> None:
        ran.append(item.name)
        if item.name == "last":
            done.set()

    def block(_arg: object) -> None:
        blocked.set()
        go.wait(30)

    scheduler = Scheduler("test-timer", on_due)
    try:
        # The timer thread is held in a callback while the items are armed: they all
        # come up together once it lets go.
        scheduler.call_at(0.0, block)
        assert blocked.wait(30)
        first, twice, dropped, last = (_Item(n) for n in ("first", "twice", "dropped", "last"))
        for item in (first, twice, dropped):
            scheduler.arm(0.0, item)
        scheduler.disarm(twice)
        scheduler.arm(0.0, twice)  # in the bucket twice now: it must still run once
        scheduler.disarm(dropped)
        scheduler.arm(0.0, last)
        assert scheduler._heap == [0.0]  # one instant, however many items
        assert scheduler._due == {0.0: [first, twice, dropped, twice, last]}
        go.set()
        assert done.wait(30)
        assert ran == ["first", "twice", "last"]
    finally:
        go.set()
        scheduler.close()


def test_a_disarm_of_its_buckets_last_entry_takes_it_out_at_once() -> None:
    """A body that ends before its first heartbeat leaves nothing in the scheduler: no dead
    entry for a compaction or the timer thread to step over."""
    scheduler = Scheduler("test-timer")
    try:
        later = 1e12  # never comes up during the test
        alone, first, second = (_Item(n) for n in ("alone", "first", "second"))
        scheduler.arm(later, alone)
        scheduler.disarm(alone)
        assert scheduler._due == {later: []} and scheduler._heap == [later]
        scheduler.arm(later, first)
        scheduler.arm(later, second)
        scheduler.disarm(second)
        assert scheduler._due == {later: [first]}
        assert scheduler._entries == 1 and scheduler._cancelled == 0
        scheduler.arm(later, second)
        scheduler.disarm(first)  # not the last: dead where it is, counted for compaction
        assert scheduler._due == {later: [first, second]}
        assert scheduler._entries == 2 and scheduler._cancelled == 1
    finally:
        scheduler.close()


def _asleep(scheduler: Scheduler) -> bool:
    """Whether the timer thread waits on its condition (it sets ``_wake_at`` before it
    waits, under the lock this takes, and resets it when it wakes)."""
    with scheduler._lock:
        return scheduler._wake_at != -math.inf


def test_a_cycle_that_ends_before_its_heartbeat_does_not_wake_the_timer_thread() -> None:
    """Lock cycles arm their handle for one instant and disarm it before it comes: the
    thread, once asleep, must stay asleep through every later cycle.  (It used to drop an
    instant whose bucket was empty and go idle, so the next cycle's arm pushed the instant
    again and woke it: a GIL hand-off per lock cycle.)"""
    scheduler = Scheduler("test-timer")
    wakes: list[int] = []
    try:
        later = now_ms() + 3_600_000.0  # an hour away: never comes up during the test
        item = _Item("cycle")
        scheduler.arm(later, item)  # starts the thread
        scheduler.disarm(item)
        settled = threading.Event()
        for _ in range(30_000):
            if _asleep(scheduler):
                break
            settled.wait(0.001)
        assert _asleep(scheduler), "the timer thread never went to sleep"
        notify = scheduler._cond.notify

        def counted(n: int = 1) -> None:
            wakes.append(n)
            notify(n)

        scheduler._cond.notify = counted  # type: ignore[method-assign]
        for _ in range(100):
            scheduler.arm(later, item)
            scheduler.disarm(item)
        assert wakes == []
        assert scheduler._heap == [later]
    finally:
        scheduler.close()


def test_compaction_keeps_each_live_item_once_in_order_and_drops_empty_instants() -> None:
    scheduler = Scheduler("test-timer")
    try:
        later = 1e12  # never comes up during the test (monotonic ms: decades away)
        items = [_Item(str(i)) for i in range(200)]
        for item in items:
            scheduler.arm(later, item)
        scheduler.disarm(items[1])
        scheduler.arm(later, items[1])  # live again, in the bucket twice
        scheduler.arm(later + 1, items[2])  # moved: its entry at ``later`` is dead
        for item in items[3:150]:
            scheduler.disarm(item)  # past the threshold: the next arm compacts
        # Compacts before it arms: items[0] was live until this very arm.
        scheduler.arm(later + 2, items[0])
        assert scheduler._due == {
            later: [items[0], items[1], *items[150:]],
            later + 1: items[2],
            later + 2: items[0],
        }
        assert sorted(scheduler._heap) == [later, later + 1, later + 2]
        assert scheduler._entries == 52 + 1 + 1
    finally:
        scheduler.close()


def test_loop_timers_run_each_live_item_once_in_instant_order() -> None:
    from distlock._loop_timers import LoopTimers

    async def main() -> list[str]:
        ran: list[str] = []
        done = asyncio.Event()

        def on_due(item: _Item) -> None:
            ran.append(item.name)
            if item.name == "last":
                done.set()

        timers = LoopTimers(on_due)
        dropped, moved, twice, kept, last = (
            _Item(n) for n in ("dropped", "moved", "twice", "kept", "last")
        )
        # All long past, armed with no await between them: they come up in one callback.
        timers.arm(0.0, dropped)
        timers.disarm(dropped)
        assert timers._due[0.0] == []  # the last entry of its bucket goes at once
        timers.arm(0.0, moved)
        timers.arm(1.0, moved)  # a second arm: only this entry is live
        timers.arm(1.0, twice)
        timers.arm(1.0, twice)  # in the bucket twice now: it must still run once
        timers.arm(2.0, kept)
        timers.arm(3.0, last)
        assert timers._due[1.0] == [moved, twice, twice]
        assert twice._armed_at is timers._due[1.0].when  # one float per instant
        await asyncio.wait_for(done.wait(), 30)
        assert kept._armed_at is None  # spent: a late disarm counts nothing
        assert timers._due == {} and timers._heap == []
        timers.close()
        return ran

    assert asyncio.run(main()) == ["moved", "twice", "kept", "last"]


def test_loop_timers_compact_to_the_live_items_and_close_disarms_them() -> None:
    from distlock._loop_timers import LoopTimers

    async def main() -> None:
        timers = LoopTimers(lambda item: None)
        later = 1e12  # never comes up during the test
        items = [_Item(str(i)) for i in range(200)]
        for item in items:
            timers.arm(later, item)
        timers.arm(later + 1, items[2])  # moved: its entry at ``later`` is dead
        for item in items[3:150]:
            timers.disarm(item)  # past the threshold: the next arm compacts
        # Compacts before it arms: items[0] was live until this very arm.
        timers.arm(later + 2, items[0])
        assert timers._due == {
            later: [items[0], items[1], *items[150:]],
            later + 1: [items[2]],
            later + 2: [items[0]],
        }
        assert sorted(timers._heap) == [later, later + 1, later + 2]
        assert timers._entries == 52 + 1 + 1
        timers.close()
        assert all(item._armed_at is None for item in items)

    asyncio.run(main())
