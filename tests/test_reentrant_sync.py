"""The sync ReentrantLock against a real redis-server.

Losses are forced deterministically: the key is deleted behind the holder's back and the
next renewal (every 100 ms here, with a 30 s TTL) or a manual extend finds it gone; no
outcome depends on a short TTL running out.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from distlock import (
    Lock,
    LockClosedError,
    LockHandle,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ReentrantHandle,
    ReentrantLock,
    UsageError,
)
from distlock._protocol import R_ENTER

WAIT = 10.0
TTL = 30_000
QUICK = 100  # heartbeat: a deleted key is noticed within one


@pytest.fixture
def locks(r: redis.Redis) -> Iterator[ReentrantLock]:
    with ReentrantLock(r, prefix="re", ttl_ms=TTL, heartbeat_ms=QUICK) as made:
        yield made


def depth_in_redis(r: redis.Redis, handle: ReentrantHandle) -> int | None:
    raw = r.hget(handle.key, handle.token)
    return None if raw is None else int(raw)


def test_nested_hold_run_acquire(locks: ReentrantLock, r: redis.Redis) -> None:
    with locks.hold("a") as outer:
        assert outer.depth == 1 and depth_in_redis(r, outer) == 1
        assert int(r.hget("re:a", "fence") or 0) == outer.fence

        def body(inner: ReentrantHandle) -> int:
            assert (inner.token, inner.fence, inner.signal) == (
                outer.token,
                outer.fence,
                outer.signal,
            )
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


def test_another_thread_is_refused_then_waits(locks: ReentrantLock, r: redis.Redis) -> None:
    refused = threading.Event()

    def watch(event: dict[str, Any]) -> None:
        if event["action"] == "AcquireReply" and not event["granted"]:
            refused.set()

    got: list[Any] = []
    with locks.hold("a") as outer:
        thread = threading.Thread(target=lambda: got.append(locks.acquire("a")))
        thread.start()
        thread.join(WAIT)
        assert got == [None]  # fails fast: another thread is another holder
        with pytest.raises(LockNotAcquiredError):
            _in_thread(lambda: locks.run("a", print))
        waiter = ReentrantLock(r, prefix="re", ttl_ms=TTL, trace=watch)
        results: list[Any] = []
        thread = threading.Thread(
            target=lambda: results.append(waiter.acquire("a", retries=10_000, retry_delay_ms=5))
        )
        thread.start()
        assert refused.wait(WAIT)  # a second object is another holder, even on this thread
        assert outer.depth == 1
    thread.join(WAIT)
    (handle,) = results
    assert isinstance(handle, ReentrantHandle) and handle.fence > outer.fence
    assert handle.release() is True
    waiter.close()


def _in_thread(fn: Any) -> None:
    """Run ``fn`` on another thread and re-raise what it raised here."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(WAIT)
    if errors:
        raise errors[0]


def test_second_object_same_thread_is_refused(locks: ReentrantLock, r: redis.Redis) -> None:
    other = ReentrantLock(r, prefix="re", ttl_ms=TTL)
    with locks.hold("a"):
        assert other.acquire("a") is None
        with pytest.raises(LockNotAcquiredError):
            other.run("a", lambda h: None)
    other.close()


def test_loss_at_depth_two_surfaces_at_every_level(locks: ReentrantLock, r: redis.Redis) -> None:
    trace: list[str] = []
    lost = ReentrantLock(
        r, prefix="re", ttl_ms=TTL, heartbeat_ms=QUICK, trace=lambda e: trace.append(e["action"])
    )
    seen: list[str] = []
    with pytest.raises(LockLeaseLostError) as outer_exc, lost.hold("a") as outer:  # noqa: PT012
        with pytest.raises(LockLeaseLostError) as inner_exc, lost.hold("a") as inner:  # noqa: PT012
            r.delete(inner.key)
            assert inner.signal.wait(WAIT)
            assert not inner.held and not outer.held
            before = len(trace)
            # A re-entry after a known loss raises at once and sends nothing.
            with pytest.raises(LockLeaseLostError):
                lost.acquire("a")
            with pytest.raises(LockLeaseLostError), lost.hold("a"):
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


def test_reenter_rejected_is_the_loss(locks: ReentrantLock, r: redis.Redis) -> None:
    outer = locks.acquire("a")
    assert outer is not None
    r.delete(outer.key)
    with pytest.raises(LockLeaseLostError) as exc:
        locks.acquire("a")
    assert exc.value.reason is LossReason.REENTER_REJECTED
    assert outer.signal.aborted
    assert outer.release() is False


def test_leave_rejected_is_the_loss(locks: ReentrantLock, r: redis.Redis) -> None:
    outer = locks.acquire("a")
    assert outer is not None
    inner = locks.acquire("a")
    assert inner is not None and inner.depth == 2
    r.delete(outer.key)
    assert inner.release() is False
    assert outer.signal.aborted
    assert outer.signal.reason is not None
    assert outer.signal.reason.reason is LossReason.LEAVE_REJECTED
    with pytest.raises(LockLeaseLostError), outer:
        pass


def test_manual_levels_exit_innermost_first(locks: ReentrantLock, r: redis.Redis) -> None:
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


def test_cross_kind_refusal_without_wrongtype(r: redis.Redis) -> None:
    plain = Lock(r, prefix="x", ttl_ms=TTL)
    reentrant = ReentrantLock(r, prefix="x", ttl_ms=TTL)
    # A Lock holds the key: the ReentrantLock is refused.
    held = plain.acquire("k")
    assert held is not None
    assert reentrant.acquire("k") is None
    with pytest.raises(LockNotAcquiredError):
        reentrant.run("k", lambda h: None)
    assert held.release() is True
    # A ReentrantLock holds it: the Lock is refused.
    rheld = reentrant.acquire("k")
    assert rheld is not None and r.type("x:k") == b"hash"
    assert plain.acquire("k") is None
    with pytest.raises(LockNotAcquiredError):
        plain.run("k", lambda h: None)
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
    with pytest.raises(LockLeaseLostError) as exc:  # noqa: PT012, SIM117
        with ReentrantLock(r, prefix="x", ttl_ms=TTL, heartbeat_ms=QUICK) as quick:
            with quick.hold("k") as handle:
                r.delete("x:k")
                assert plain.acquire("k") is not None
                assert handle.signal.wait(WAIT)
    assert exc.value.reason is LossReason.RENEW_REJECTED
    plain.close()
    reentrant.close()


def test_fences_increase_across_kinds(r: redis.Redis) -> None:
    plain = Lock(r, prefix="f", ttl_ms=TTL)
    reentrant = ReentrantLock(r, prefix="f", ttl_ms=TTL)
    fences = [plain.run("k", lambda h: h.fence)]
    fences.append(reentrant.run("k", lambda h: h.fence))
    fences.append(plain.run("k", lambda h: h.fence))
    fences.append(reentrant.run("k", lambda h: reentrant.run("k", lambda i: i.fence)))
    assert fences == sorted(set(fences))
    plain.close()
    reentrant.close()


def test_closed_lock_refuses_every_entry_point(r: redis.Redis) -> None:
    locks = ReentrantLock(r, prefix="c", ttl_ms=TTL)
    outer = locks.acquire("k")
    assert outer is not None
    locks.close()
    entries: list[Callable[[], object]] = [
        lambda: locks.acquire("k"),  # a re-entry
        lambda: locks.acquire("other"),
        lambda: locks.run("k", lambda h: None),
        lambda: locks.hold("other").__enter__(),
        lambda: locks.hold("k").__enter__(),
    ]
    for enter in entries:
        with pytest.raises(LockClosedError):
            enter()
    assert outer.release() is True


def test_interrupt_in_body_and_in_reentry_leaves_no_key(r: redis.Redis) -> None:
    class Interrupting(redis.Redis):
        """Raises KeyboardInterrupt instead of sending the first re-entry (the request
        may or may not have run: the flow must cope either way)."""

        armed = True

        def execute_command(self, *args: Any, **options: Any) -> Any:
            if args[:2] == ("EVALSHA", R_ENTER.sha) and self.armed:
                self.armed = False
                raise KeyboardInterrupt
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    client = Interrupting(port=r.connection_pool.connection_kwargs["port"])
    locks = ReentrantLock(client, prefix="i", ttl_ms=TTL)
    with pytest.raises(KeyboardInterrupt), locks.hold("k") as outer, locks.hold("k"):
        pass
    assert outer.depth == 1
    assert r.exists("i:k") == 0
    with pytest.raises(KeyboardInterrupt), locks.hold("k"), locks.hold("k"):
        raise KeyboardInterrupt
    assert r.exists("i:k") == 0
    assert len(locks._holders) == 0
    locks.close()
    client.close()


def test_dead_threads_are_not_kept(locks: ReentrantLock, r: redis.Redis) -> None:
    handles: list[Any] = []
    thread = threading.Thread(target=lambda: handles.append(locks.acquire("gone")))
    thread.start()
    thread.join(WAIT)
    assert len(locks._holders) == 1
    del thread
    gc.collect()
    assert len(locks._holders) == 0  # the thread's entry went with it
    # Its handle still releases (it is not another holder's to re-enter).
    assert handles[0].release() is True


def test_a_reentrant_lock_is_no_lock_with_groups(locks: ReentrantLock) -> None:
    """One key at a time: no ``hold_many``/``run_many`` attributes (not ones that raise),
    and so no ``Lock``; its handles are lock handles, fence and all."""
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
