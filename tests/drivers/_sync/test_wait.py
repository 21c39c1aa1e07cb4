# Generated from tests/drivers/_async/test_wait.py by tools/unasync.py: do not edit.
"""Waiting for a held lock, against a real redis-server, on both drivers (the sync twin is
written from this module by ``tools/unasync.py``; a cancelled or timed-out asyncio waiter
is in ``tests/drivers/test_wait_asyncio.py``, a KeyboardInterrupt in
``tests/drivers/test_wait_threads.py``).

Every outcome here is decided by Redis state or by the order of events, never by how long
something took: a waiter is known to be waiting when its place is in the key's queue and
its connection is blocked (``CLIENT LIST``), and a TTL that must run out is a second long.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from distlock import LockNotAcquiredError
from distlock._core.commands import Command, Op
from distlock._protocol import encode, queue_keys
from distlock import Lock, LockGroup, LockHandle, ReentrantHandle, ReentrantLock
from tests.garbage import collector_saves_all
from tests.redis_server import RedisServer
from tests.waiting import FOREVER_MS, blocked_clients, calls, queue, waiting_keys

from .concurrency import Event, Task, client_for, gather, sleep, spawn, until


def wait_locks(server: RedisServer, **kwargs: Any) -> Lock:
    options: dict[str, Any] = {"ttl_ms": 30_000, **kwargs}
    return Lock(client_for(server), prefix="w", **options)


def start_waiting(r: redis.Redis, key: str, fn: Any, *args: Any, **kwargs: Any) -> Task[Any]:
    """Start ``fn(*args, **kwargs)`` and return once its place is in the queue and it is
    blocked."""
    before = len(queue(r, key))
    blocked = len(blocked_clients(r))
    task = spawn(fn, *args, **kwargs)
    until(lambda: len(queue(r, key)) == before + 1, f"a waiter queued on {key}")
    until(lambda: len(blocked_clients(r)) == blocked + 1, "the waiter's BLPOP")
    return task


def nothing(h: object) -> None:
    return None


def fail(h: object) -> None:
    pytest.fail("no lock, no body")


def actions(trace: list[dict[str, Any]]) -> list[str]:
    return [t["action"] for t in trace]


# -- the deadline ----------------------------------------------------------------------


def test_acquire_returns_none_after_wait_ms_with_one_block(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        r.config_resetstat()
        assert locks.acquire("k", wait_ms=300) is None
        stats = calls(r)
        # Promptly: one block for the rest of the wait, then one last attempt (which leaves
        # the queue if refused); no retry period, no spin.
        assert stats["evalsha"] == 2 and stats["blpop"] == 1
        assert waiting_keys(r) == []
        assert r.get("w:k") == holder.token.encode()


def test_hold_and_run_raise_not_acquired_after_wait_ms(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server) as locks:
        assert locks.acquire("k") is not None
        with pytest.raises(LockNotAcquiredError) as caught:
            with locks.hold("k", wait_ms=200):
                pytest.fail("the body must not run without the lock")
        assert caught.value.key == "w:k"
        with pytest.raises(LockNotAcquiredError):
            locks.run("k", fail, wait_ms=200)
    assert waiting_keys(r) == []


def test_the_lock_s_default_wait_applies_and_a_call_overrides_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server, wait_ms=200) as locks:
        assert locks.acquire("k") is not None
        r.config_resetstat()
        assert locks.acquire("k") is None
        assert calls(r)["blpop"] == 1
        r.config_resetstat()
        assert locks.acquire("k", wait_ms=0) is None
        assert "blpop" not in calls(r) and calls(r)["evalsha"] == 1


# -- wake-up on release, and on expiry ---------------------------------------------------


def test_a_release_hands_the_key_to_a_renewed_waiter(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    trace: list[dict[str, Any]] = []
    inside, leave = Event(), Event()
    handles: list[LockHandle] = []
    with wait_locks(redis_server, ttl_ms=FOREVER_MS, trace=trace.append) as locks:
        holder = locks.acquire("k")
        assert holder is not None

        def section() -> None:
            with locks.hold("k", wait_ms=FOREVER_MS, ttl_ms=45_000) as handle:
                handles.append(handle)
                inside.set()
                leave.wait()

        waiter = start_waiting(r, "w:k", section)
        r.config_resetstat()
        assert holder.release() is True
        inside.wait()
        got = handles[0]
        # Handed the key by the release (the holder's TTL was a minute away), not by a
        # re-check, with a new fence.
        wakes = [t for t in trace if t["action"] == "Wake"]
        assert [(w["woken"], w["fence"]) for w in wakes] == [(True, got.fence)]
        assert got.fence > holder.fence
        assert r.get("w:k") == got.token.encode()
        # Handed with the short TTL a dead waiter would cost the queue; the live waiter's
        # first renewal, sent at once, gives it the TTL it asked for, not the holder's.
        until(lambda: any(t["action"] == "RenewReply" for t in trace), "the first renewal")
        assert 40_000 < r.pttl("w:k") <= 45_000
        # The handover cost the waiter no attempt: the release's script and the renewal.
        assert calls(r)["evalsha"] == 2
        leave.set()
        waiter.result()
    assert waiting_keys(r) == []


def test_a_release_wakes_a_waiter_that_is_not_renewed(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """A manual handle is never renewed, so a key handed to it could not outlive the short
    handed TTL: it is woken instead, and takes the key with its own TTL."""
    trace: list[dict[str, Any]] = []
    with wait_locks(redis_server, ttl_ms=FOREVER_MS, trace=trace.append) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        waiter = start_waiting(
            r, "w:k", locks.acquire, "k", wait_ms=FOREVER_MS, ttl_ms=45_000
        )
        assert holder.release() is True
        got = waiter.result()
        assert isinstance(got, LockHandle) and got.held and got.fence > holder.fence
        wakes = [t for t in trace if t["action"] == "Wake"]
        assert [(w["woken"], w.get("fence")) for w in wakes] == [(True, None)]
        assert 40_000 < r.pttl("w:k") <= 45_000
        assert got.release() is True
    assert waiting_keys(r) == []


def test_a_waiter_s_transitions_woken_and_timed_out(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The same transitions on both drivers: woken by a release, then timed out."""
    # A manual handle is woken by the release, not handed the key: it attempts again.
    woken = ["Acquire", "AcquireReply", "Block", "Wake", "Acquire", "AcquireReply"]
    timed_out = ["Acquire", "AcquireReply", "Block", "Wake", "Acquire", "AcquireReply"]
    trace: list[dict[str, Any]] = []
    with (
        Lock(client_for(redis_server), prefix="tw", ttl_ms=FOREVER_MS) as holders,
        Lock(client_for(redis_server), prefix="tw", trace=trace.append) as locks,
    ):
        holder = holders.acquire("k")
        assert holder is not None
        waiter = start_waiting(r, "tw:k", locks.acquire, "k", wait_ms=FOREVER_MS)
        holder.release()
        handle = waiter.result()
        assert isinstance(handle, LockHandle)
        assert actions(trace) == woken
        assert handle.release()
        trace.clear()
        holder = holders.acquire("k")
        assert holder is not None
        assert locks.acquire("k", wait_ms=100) is None
        assert actions(trace) == timed_out
        assert holder.release()
    assert waiting_keys(r) == []


def test_a_wait_leaves_no_reference_cycle(redis_server: RedisServer, r: redis.Redis) -> None:
    """A wait's objects are freed when it ends, by reference counting (as a hold's are:
    see ``test_lock``): woken by a hand-off, and timed out."""
    with wait_locks(redis_server, ttl_ms=FOREVER_MS) as locks:

        def waits() -> None:
            holder = locks.acquire("k")
            assert holder is not None
            waiter = start_waiting(r, "w:k", locks.acquire, "k", wait_ms=FOREVER_MS)
            assert holder.release() is True
            got = waiter.result()
            assert got is not None
            del waiter
            assert locks.acquire("k", wait_ms=1) is None
            assert got.release() is True

        waits()  # connections, scripts
        with collector_saves_all() as garbage:
            for _ in range(3):
                waits()
        assert garbage == []
    assert waiting_keys(r) == []


def test_a_holder_that_died_is_waited_out_at_its_expiry(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    trace: list[dict[str, Any]] = []
    with wait_locks(redis_server) as locks, wait_locks(
        redis_server, trace=trace.append
    ) as waiting:
        dead = locks.acquire("k", ttl_ms=1_000)  # never released: its holder "died"
        assert dead is not None
        got = waiting.acquire("k", wait_ms=FOREVER_MS)
        assert got is not None and got.fence > dead.fence
        # Nobody released: the block ended at the re-check, the holder's expiry.
        assert [t["woken"] for t in trace if t["action"] == "Wake"] == [False]
        got.release()
    assert waiting_keys(r) == []


def test_contended_hold_is_two_round_trips(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    trace: list[dict[str, Any]] = []
    inside = Event()

    def body(h: LockHandle) -> None:
        inside.set()

    with wait_locks(redis_server) as locks, wait_locks(
        redis_server, trace=trace.append
    ) as waiting:
        holder = locks.acquire("k")
        assert holder is not None
        r.config_resetstat()
        waiter = start_waiting(r, "w:k", waiting.run, "k", body, wait_ms=FOREVER_MS)
        holder.release()
        waiter.result()
    assert inside.is_set()
    # Before its body: the waiter's attempt and its BLPOP, which answers with the key.
    assert actions(trace)[:4] == ["Acquire", "AcquireReply", "Block", "Wake"]
    assert [t for t in trace if t["action"] == "Acquire"] == trace[:1]
    assert calls(r)["blpop"] == 1


def test_contended_manual_acquire_is_three_round_trips(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        r.config_resetstat()
        waiter = start_waiting(r, "w:k", locks.acquire, "k", wait_ms=FOREVER_MS)
        holder.release()
        got = waiter.result()
        assert isinstance(got, LockHandle)
        stats = calls(r)
        # A manual handle is woken, not handed the key: attempt, BLPOP, attempt; and the
        # holder's release.
        assert stats["evalsha"] == 3 and stats["blpop"] == 1


def test_waiting_costs_nothing_when_the_lock_is_free(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server) as locks:
        locks.run("warm", nothing, wait_ms=1_000)
        r.config_resetstat()
        for _ in range(10):
            locks.run("cheap", nothing, wait_ms=1_000)
        stats = calls(r)
        assert stats["evalsha"] == 20 and "blpop" not in stats


# -- order ---------------------------------------------------------------------------------


def test_waiters_get_the_lock_in_the_order_they_began_waiting(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    order: list[int] = []

    def body(n: int) -> Callable[[LockHandle], Any]:
        def record(h: LockHandle) -> None:
            order.append(n)

        return record

    with wait_locks(redis_server) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        waiters = [
            start_waiting(r, "w:k", locks.run, "k", body(n), wait_ms=FOREVER_MS)
            for n in range(5)
        ]
        holder.release()
        for w in waiters:
            w.result()
    assert order == [0, 1, 2, 3, 4]
    assert waiting_keys(r) == []


def test_no_waiter_starves_while_others_keep_succeeding(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # Each worker comes straight back for the lock after each turn: a newcomer queues
    # behind those already waiting, so every worker gets every turn it asked for.
    turns: dict[int, int] = {n: 0 for n in range(4)}
    with wait_locks(redis_server) as locks:

        def worker(n: int) -> Callable[[], Any]:
            def body(h: LockHandle) -> None:
                turns[n] += 1
                sleep(0)

            def work() -> None:
                for _ in range(10):
                    locks.run("k", body, wait_ms=FOREVER_MS)

            return work

        results = gather(*(worker(n) for n in range(4)))
    assert results == [None] * 4
    assert turns == {0: 10, 1: 10, 2: 10, 3: 10}
    assert waiting_keys(r) == []


def test_a_fail_fast_caller_takes_a_free_key_while_others_wait(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # A waiter at the head of the queue who has not yet come back for the free key.
    queue_key, places, _ = queue_keys("w:k")
    now_ms = int(r.time()[0]) * 1000
    r.rpush(queue_key, "someone")
    r.hset(places, "someone", now_ms + FOREVER_MS)
    with wait_locks(redis_server) as locks:
        # A waiting caller respects the queue: the key is free, but not its turn.
        assert locks.acquire("k", wait_ms=200) is None
        # A fail-fast caller does not wait, and so does not queue either.
        taken = locks.acquire("k")
        assert taken is not None and queue(r, "w:k") == [b"someone"]
        assert taken.release() is True
    # Its release woke the head of the queue.
    assert r.lrange(queue_keys("w:k")[2] + "someone", 0, -1) == [b"1"]


def test_a_waiter_that_died_loses_its_place(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    queue_key, places, _ = queue_keys("w:k")
    now_ms = int(r.time()[0]) * 1000
    r.rpush(queue_key, "dead")
    r.hset(places, "dead", now_ms + 1_000)  # its place runs out in a second
    with wait_locks(redis_server) as locks:
        got = locks.acquire("k", wait_ms=FOREVER_MS)
        assert got is not None and queue(r, "w:k") == []


# -- a failure while blocked ---------------------------------------------------------------


def test_a_connection_error_while_blocked_withdraws(fresh_redis: RedisServer) -> None:
    r = redis.Redis(port=fresh_redis.port)
    trace: list[dict[str, Any]] = []
    with (
        Lock(client_for(fresh_redis), prefix="w") as holders,
        Lock(client_for(fresh_redis), prefix="w", trace=trace.append) as locks,
    ):
        assert holders.acquire("k") is not None
        waiter = start_waiting(r, "w:k", locks.acquire, "k", wait_ms=FOREVER_MS)
        r.client_kill_filter(_type="normal", skipme=True)  # the waiter's connection drops
        with pytest.raises(redis.ConnectionError):
            waiter.result()
        assert waiting_keys(r) == []
        # The same transitions as an asyncio waiter cancelled while blocked.
        assert actions(trace) == [
            "Acquire", "AcquireReply", "Block", "Withdraw", "WithdrawReply",
        ]
    r.close()


# -- groups --------------------------------------------------------------------------------


def test_a_group_times_out_as_a_whole_and_names_the_missing_key(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server) as locks:
        assert locks.acquire("b") is not None
        with pytest.raises(LockNotAcquiredError) as caught:
            with locks.hold_many(["c", "b", "a"], wait_ms=300):
                pytest.fail("no body without every lock")
        assert caught.value.key == "w:b"
    assert r.get("w:a") is None and r.get("w:c") is None  # "a" was taken, then given back
    assert waiting_keys(r) == []


def test_a_group_waits_for_its_missing_key(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(group: LockGroup) -> list[str]:
        return group.keys

    with wait_locks(redis_server) as locks:
        holder = locks.acquire("b")
        assert holder is not None
        waiter = start_waiting(
            r, "w:b", locks.run_many, ["a", "b"], body, wait_ms=FOREVER_MS
        )
        holder.release()
        assert waiter.result() == ["w:a", "w:b"]


# -- the reentrant lock --------------------------------------------------------------------


def test_a_reentrant_waiter_is_handed_the_key_and_a_reentry_never_waits(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    events: list[dict[str, Any]] = []
    with ReentrantLock(
        client_for(redis_server), prefix="rw", ttl_ms=FOREVER_MS, trace=events.append
    ) as locks:
        outer = locks.acquire("k")
        assert outer is not None
        r.config_resetstat()
        inner = locks.acquire("k", wait_ms=FOREVER_MS)  # the same holder: a re-entry
        assert isinstance(inner, ReentrantHandle) and inner.depth == 2
        assert "blpop" not in calls(r)

        def another_holder() -> int:
            with locks.hold("k", wait_ms=FOREVER_MS) as h:
                # Handed over by the outermost exit: a new hash at depth 1, a new fence.
                assert r.hgetall("rw:k") == {h.token.encode(): b"1", b"fence": b"%d" % h.fence}
                assert h.fence > outer.fence
                entered = locks.acquire("k")
                assert entered is not None and entered.depth == 2
                entered.release()
                return h.depth

        waiter = start_waiting(r, "rw:k", another_holder)
        assert inner.release() is True
        assert outer.release() is True
        assert waiter.result() == 1
        # The outermost exit handed the key over: the waiter's wake-up carried the fence,
        # and it sent no attempt but the one that queued it.  Counted in its trace, not
        # in Redis's statistics, where the handed key's first renewal may or may not come
        # before the waiter's re-entry makes it unneeded.
        (woken,) = [e for e in events if e["action"] == "Wake"]
        assert woken.get("fence", 0) > 0
        waiter_actions = [e["action"] for e in events if e["client"] == woken["client"]]
        assert waiter_actions.count("Acquire") == 1
        assert locks.acquire("k", wait_ms=100) is not None
    assert waiting_keys(r) == []


def test_a_reentrant_waiter_times_out(redis_server: RedisServer, r: redis.Redis) -> None:
    with ReentrantLock(client_for(redis_server), prefix="rw") as locks:
        assert locks.acquire("k") is not None
        waiter = spawn(locks.acquire, "k", wait_ms=200)
        assert waiter.result() is None
    assert waiting_keys(r) == []


# -- the scripts, one by one ---------------------------------------------------------------


def _script(r: redis.Redis, command: Command) -> Any:
    script, keys, args = encode(command)
    return r.eval(script.source, len(keys), *keys, *args)


def _place(r: redis.Redis, key: str, token: str, life_ms: int) -> None:
    queue_key, places, _ = queue_keys(key)
    r.rpush(queue_key, token)
    r.hset(places, token, int(r.time()[0]) * 1000 + life_ms)


def test_a_resent_waiting_attempt_that_was_granted_is_granted_again(
    r: redis.Redis,
) -> None:
    attempt = Command(Op.ACQUIRE, "w:k", "mine", 10_000, queue_ms=5_000)
    fence, _ = _script(r, attempt)
    assert fence > 0
    _place(r, "w:k", "later", FOREVER_MS)  # someone queued since
    # The client library resends the attempt whose reply was lost: still ours, same fence.
    assert _script(r, attempt) == [fence, 0]
    assert queue(r, "w:k") == [b"later"]


def test_a_withdrawing_head_hands_its_wake_up_on(r: redis.Redis) -> None:
    _place(r, "w:k", "first", FOREVER_MS)
    _place(r, "w:k", "second", FOREVER_MS)
    wake = queue_keys("w:k")[2]
    r.rpush(wake + "first", "1")  # a release woke "first", which then stops waiting
    assert _script(r, Command(Op.WITHDRAW, "w:k", "first", 10_000)) == 1
    assert queue(r, "w:k") == [b"second"]
    assert r.exists(wake + "first") == 0 and r.lrange(wake + "second", 0, -1) == [b"1"]
    # Withdrawing from behind the head wakes nobody.
    _place(r, "w:k", "third", FOREVER_MS)
    assert _script(r, Command(Op.WITHDRAW, "w:k", "third", 10_000)) == 1
    assert r.llen(wake + "second") == 1 and queue(r, "w:k") == [b"second"]


def test_a_release_passes_over_expired_places_to_the_first_live_waiter(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_locks(redis_server) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        _place(r, "w:k", "gone", -1)  # its place has already run out
        _place(r, "w:k", "alive", FOREVER_MS)
        assert holder.release() is True
    wake = queue_keys("w:k")[2]
    assert queue(r, "w:k") == [b"alive"] and r.lrange(wake + "alive", 0, -1) == [b"1"]
    assert 0 < r.pttl(wake + "alive") <= FOREVER_MS


def test_a_waiting_attempt_on_the_other_kind_of_key_is_refused_not_an_error(
    r: redis.Redis,
) -> None:
    r.hset("w:k", mapping={"tok": 1, "fence": 1})  # a ReentrantLock's hash
    r.pexpire("w:k", 5_000)
    fence, recheck = _script(r, Command(Op.ACQUIRE, "w:k", "t", 10_000, queue_ms=1_000))
    assert fence == 0 and 0 < recheck <= 5_000
    assert queue(r, "w:k") == [b"t"]
