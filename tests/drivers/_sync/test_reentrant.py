# Generated from tests/drivers/_async/test_reentrant.py by tools/unasync.py: do not edit.
"""A ReentrantLock against a real redis-server, on both drivers: the holder is the current
task or thread.  Cancellation is in ``tests/drivers/test_reentrant_asyncio.py``, a
KeyboardInterrupt in ``tests/drivers/test_reentrant_threads.py``.

Losses are forced deterministically: the key is deleted behind the holder's back and the
next renewal (every 100 ms here, with a 30 s TTL) or a manual extend finds it gone; no
outcome depends on a short TTL running out.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
import redis

from distlock import (
    LockClosedError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    UsageError,
)
from distlock import Lock, LockHandle, ReentrantHandle, ReentrantLock
from tests.redis_server import RedisServer

from .concurrency import UNCANCELLED, Event, client_for, signalled, sleep, spawn

TTL = 30_000
QUICK = 100  # heartbeat: a deleted key is noticed within one


def reentrant_locks(server: RedisServer, **kwargs: Any) -> ReentrantLock:
    return ReentrantLock(client_for(server), prefix="re", ttl_ms=TTL, heartbeat_ms=QUICK, **kwargs)


def depth_in_redis(r: redis.Redis, handle: ReentrantHandle) -> int | None:
    raw = r.hget(handle.key, handle.token)
    return None if raw is None else int(raw)


def nothing(handle: object) -> None:
    return None


def fence_of(handle: LockHandle) -> int:
    return handle.fence


def test_nested_hold_run_acquire(redis_server: RedisServer, r: redis.Redis) -> None:
    with reentrant_locks(redis_server) as locks:
        with locks.hold("a") as outer:
            assert outer.depth == 1 and depth_in_redis(r, outer) == 1
            assert int(r.hget("re:a", "fence") or 0) == outer.fence

            def body(inner: ReentrantHandle) -> int:
                assert (inner.token, inner.fence) == (outer.token, outer.fence)
                assert inner.signal is outer.signal
                assert depth_in_redis(r, outer) == 2
                third = locks.acquire("a")
                assert third is not None and third.depth == 3
                assert depth_in_redis(r, outer) == 3
                assert third.release() is True
                assert third.release() is False  # a manual inner handle released twice
                assert depth_in_redis(r, outer) == 2
                return inner.depth

            assert locks.run("a", body) == 2
            # The inner exit kept the key; only the outermost exit frees it.
            assert depth_in_redis(r, outer) == 1
            assert r.pttl("re:a") > 0
        assert r.exists("re:a") == 0
        assert len(locks._holders) == 0


def test_another_task_or_thread_is_refused_then_waits(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    refused = Event()

    def watch(event: dict[str, Any]) -> None:
        if event["action"] == "AcquireReply" and not event["granted"]:
            refused.set()

    with reentrant_locks(redis_server) as locks:
        waiter = reentrant_locks(redis_server, trace=watch)
        with locks.hold("a") as outer:
            # Another task or thread does not inherit the holder's identity: refused, fast.
            assert spawn(locks.acquire, "a").result() is None
            with pytest.raises(LockNotAcquiredError):
                spawn(locks.run, "a", nothing).result()
            # With retries, it waits, and gets the key once the holder has left; a second
            # object is another holder too, even on the holder's own task or thread.
            child = spawn(waiter.run, "a", fence_of, retries=10_000, retry_delay_ms=5)
            refused.wait()
            assert outer.depth == 1
        assert child.result() > outer.fence
        waiter.close()


def test_second_object_same_task_is_refused(redis_server: RedisServer) -> None:
    with (
        reentrant_locks(redis_server) as locks,
        reentrant_locks(redis_server) as other,
        locks.hold("a"),
    ):
        assert other.acquire("a") is None
        with pytest.raises(LockNotAcquiredError):
            other.run("a", nothing)


def test_loss_at_depth_two_surfaces_at_every_level(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    trace: list[str] = []
    lost = reentrant_locks(redis_server, trace=lambda e: trace.append(e["action"]), **UNCANCELLED)
    seen: list[str] = []
    with pytest.raises(LockLeaseLostError) as outer_exc:  # noqa: PT012
        with lost.hold("a") as outer:
            with pytest.raises(LockLeaseLostError) as inner_exc:  # noqa: PT012
                with lost.hold("a") as inner:
                    r.delete(inner.key)
                    signalled(inner.signal)
                    assert not inner.held and not outer.held
                    before = len(trace)
                    # A re-entry after a known loss raises at once and sends nothing.
                    for _ in range(2):
                        with pytest.raises(LockLeaseLostError):
                            lost.acquire("a")
                        with pytest.raises(LockLeaseLostError):
                            with lost.hold("a"):
                                seen.append("entered")
                    assert not any(a.startswith("Reenter") for a in trace[before:])
            assert inner_exc.value.reason is LossReason.RENEW_REJECTED
            raise inner_exc.value
    assert outer_exc.value is inner_exc.value
    assert seen == []
    # The inner exit of a lost section still writes its depth (Leave), and Redis answers 0.
    assert "Leave" in trace and "LeaveReply" in trace
    assert len(lost._holders) == 0
    lost.close()


def test_reenter_rejected_is_the_loss(redis_server: RedisServer, r: redis.Redis) -> None:
    with reentrant_locks(redis_server) as locks:
        outer = locks.acquire("a")
        assert outer is not None
        r.delete(outer.key)
        with pytest.raises(LockLeaseLostError) as exc:
            locks.acquire("a")
        assert exc.value.reason is LossReason.REENTER_REJECTED
        assert outer.signal.aborted
        assert outer.release() is False


def test_leave_rejected_is_the_loss(redis_server: RedisServer, r: redis.Redis) -> None:
    with reentrant_locks(redis_server) as locks:
        outer = locks.acquire("a")
        assert outer is not None
        inner = locks.acquire("a")
        assert inner is not None and inner.depth == 2
        r.delete(outer.key)
        assert inner.release() is False  # LeaveReply 0: the loss
        assert outer.signal.aborted
        assert outer.signal.reason is not None
        assert outer.signal.reason.reason is LossReason.LEAVE_REJECTED
        # A re-entry raises that loss itself.
        with pytest.raises(LockLeaseLostError) as exc:
            locks.acquire("a")
        assert exc.value is outer.signal.reason
        with pytest.raises(LockLeaseLostError):
            with outer:
                pass
        assert outer.release() is False
        assert len(locks._holders) == 0


def test_manual_levels_exit_innermost_first(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with reentrant_locks(redis_server) as locks:
        outer = locks.acquire("a")
        assert outer is not None
        second = locks.acquire("a")
        third = locks.acquire("a")
        assert second is not None and third is not None
        with pytest.raises(UsageError):
            second.release()
        with pytest.raises(UsageError):
            outer.release()
        assert third.release() and second.release()
        assert depth_in_redis(r, outer) == 1
        assert outer.extend(TTL) is True
        assert outer.release() is True and r.exists("re:a") == 0
        assert outer.release() is False
        assert len(locks._holders) == 0


def test_cross_kind_refusal_without_wrongtype(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = client_for(redis_server)
    plain = Lock(client, prefix="x", ttl_ms=TTL)
    reentrant = ReentrantLock(client, prefix="x", ttl_ms=TTL)
    # A Lock holds the key: the ReentrantLock is refused.
    held = plain.acquire("k")
    assert held is not None
    assert reentrant.acquire("k") is None
    with pytest.raises(LockNotAcquiredError):
        reentrant.run("k", nothing)
    assert held.release() is True
    # A ReentrantLock holds it: the Lock is refused.
    rheld = reentrant.acquire("k")
    assert rheld is not None and r.type("x:k") == b"hash"
    assert plain.acquire("k") is None
    with pytest.raises(LockNotAcquiredError):
        plain.run("k", nothing)
    assert rheld.release() is True
    # Renew / extend / release paths meet the other kind's key: answered 0, never an error.
    mine = plain.acquire("k")
    assert mine is not None
    r.delete("x:k")
    other = reentrant.acquire("k")
    assert other is not None
    assert mine.extend(TTL) is False
    assert mine.release() is False
    assert r.type("x:k") == b"hash"
    assert other.release() is True
    theirs = reentrant.acquire("k")
    assert theirs is not None
    r.delete("x:k")
    again = plain.acquire("k")
    assert again is not None and r.type("x:k") == b"string"
    assert theirs.extend(TTL) is False
    assert theirs.release() is False
    assert again.release() is True
    # Under hold, the heartbeat's renewal meets the other kind and reports the loss.
    quick = ReentrantLock(client, prefix="x", ttl_ms=TTL, heartbeat_ms=QUICK, **UNCANCELLED)
    with pytest.raises(LockLeaseLostError) as exc:  # noqa: PT012
        with quick.hold("k") as handle:
            r.delete("x:k")
            assert plain.acquire("k") is not None
            signalled(handle.signal)
    assert exc.value.reason is LossReason.RENEW_REJECTED
    quick.close()
    plain.close()
    reentrant.close()
    client.close()


def test_fences_increase_across_kinds(redis_server: RedisServer) -> None:
    client = client_for(redis_server)
    plain = Lock(client, prefix="f", ttl_ms=TTL)
    reentrant = ReentrantLock(client, prefix="f", ttl_ms=TTL)

    def nested(handle: ReentrantHandle) -> int:
        return reentrant.run("k", fence_of)

    fences = [plain.run("k", fence_of)]
    fences.append(reentrant.run("k", fence_of))
    fences.append(plain.run("k", fence_of))
    fences.append(reentrant.run("k", nested))
    assert fences == sorted(set(fences))
    plain.close()
    reentrant.close()
    client.close()


def test_closed_lock_refuses_every_entry_point(redis_server: RedisServer) -> None:
    locks = reentrant_locks(redis_server)
    outer = locks.acquire("k")
    assert outer is not None
    locks.close()
    entries: list[Callable[[], object]] = [
        lambda: locks.acquire("k"),  # a re-entry
        lambda: locks.acquire("other"),
        lambda: locks.run("k", nothing),
        lambda: locks.hold("other").__enter__(),
        lambda: locks.hold("k").__enter__(),
    ]
    for enter in entries:
        with pytest.raises(LockClosedError, match="this ReentrantLock is closed"):
            enter()
    assert outer.release() is True


def test_finished_tasks_and_threads_are_not_kept(redis_server: RedisServer) -> None:
    with reentrant_locks(redis_server) as locks:
        task = spawn(locks.acquire, "gone")
        handle = task.result()
        assert handle is not None and len(locks._holders) == 1
        del task
        sleep(0)  # the loop lets go of the task it last woke us with
        gc.collect()
        assert len(locks._holders) == 0  # the holder's entry went with it
        # Its handle still releases (it is not another holder's to re-enter).
        assert handle.release() is True


def test_a_reentrant_lock_is_no_lock_with_groups(redis_server: RedisServer) -> None:
    """One key at a time: no ``hold_many``/``run_many`` attributes (not ones that raise),
    and so no ``Lock``; its handles are lock handles, fence and all."""
    with reentrant_locks(redis_server) as locks:
        assert not isinstance(locks, Lock)
        for name in ("hold_many", "run_many"):
            assert not hasattr(ReentrantLock, name) and not hasattr(locks, name)
            with pytest.raises(AttributeError):
                getattr(locks, name)
        with locks.hold("a") as handle:
            assert isinstance(handle, LockHandle) and handle.fence > 0
            seen = locks.owner("a")
            assert seen is not None and seen.fence == handle.fence
            assert locks.locked("a") is True
        assert locks.force_unlock("a") is False
