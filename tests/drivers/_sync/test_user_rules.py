# Generated from tests/drivers/_async/test_user_rules.py by tools/unasync.py: do not edit.
"""Rules of the public API that a user meets directly, on both drivers against a real
redis-server: how a call's waiting options replace the constructor's, what a reentrant
level may do at the outermost exit, which ids are refused before anything is sent, and
which prefixes are accepted.  (What ``run`` accepts as a body, and where a sync
ReentrantLock may run, differ by runtime: ``tests/drivers/test_user_rules_asyncio.py``,
``tests/drivers/test_user_rules_threads.py``; the prefixes refused at construction:
``tests/test_user_rules.py``.)"""

from __future__ import annotations

from typing import Any, TypeAlias

import pytest
import redis

from distlock import LockNotAcquiredError, UsageError, ValidationError
from distlock import Lock, ReentrantHandle, ReentrantLock, Semaphore
from tests.drivers.rules import KINDS, Recorder

from .concurrency import Redis

#: A constructor's long wait: a call that failed to replace it would block this long.
LONG_WAIT_MS = 2_000

#: Any primitive: a Semaphore or a ReentrantLock is no Lock.
Primitive: TypeAlias = Lock | ReentrantLock | Semaphore


def primitive(kind: str, client: Any, **options: Any) -> Primitive:
    if kind == "semaphore":
        return Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return ReentrantLock(client, **options)
    return Lock(client, **options)


#: (primitive, how the lock is taken): only a Lock takes several keys at once.
CALLS = [(kind, how) for kind in KINDS for how in ("acquire", "hold", "run")] + [
    ("lock", "run_many")
]




def nothing(_: object) -> None:
    return None


def key_of(h: Any) -> str:
    return str(h.key)


def enter(locks: Primitive, id: str) -> None:
    """Enter and leave ``locks.hold(id)``."""
    with locks.hold(id):
        pass


# -- 1. a call's waiting options replace the constructor's as a whole ----------------------

#: (constructor's waiting options, the call's): the call asks to fail fast each time.
FAIL_FAST_CALLS = [
    ({"retries": 3, "retry_delay_ms": 1}, {"wait_ms": 0}),
    ({"retries": 3, "retry_delay_ms": 1}, {"retry_delay_ms": 1}),
    ({"wait_ms": LONG_WAIT_MS}, {"retries": 0}),
    ({"wait_ms": LONG_WAIT_MS}, {"retry_delay_ms": 5}),
]


def got_it(locks: Primitive, how: str, call: dict[str, Any]) -> bool:
    """Whether the call got the lock, taken by ``how``."""
    if how == "acquire":
        handle = locks.acquire("k", **call)
        if handle is None:
            return False
        handle.release()
        return True
    try:
        if how == "hold":
            with locks.hold("k", **call):
                pass
        elif how == "run":
            locks.run("k", nothing, **call)
        else:
            assert isinstance(locks, Lock)
            locks.run_many(["k", "other"], nothing, **call)
    except LockNotAcquiredError:
        return False
    return True


@pytest.mark.parametrize(("kind", "how"), CALLS)
@pytest.mark.parametrize(("made", "call"), FAIL_FAST_CALLS)
def test_call_waiting_options_replace_the_constructors(
    url: str, kind: str, how: str, made: dict[str, Any], call: dict[str, Any]
) -> None:
    trace = Recorder()
    client = Redis.from_url(url)
    with primitive(kind, client, prefix="rules-wait") as holder, primitive(
        kind, client, prefix="rules-wait", trace=trace, **made
    ) as locks:
        held = holder.acquire("k")
        assert held is not None
        try:
            assert not got_it(locks, how, call)
        finally:
            held.release()
    # One attempt, refused; no retry and no block in the queue.
    assert trace.count("AcquireReply") == 1
    assert trace.count("Block") == 0
    client.close()


def test_what_a_waiting_call_leaves_out_is_the_default_not_the_constructors(
    url: str,
) -> None:
    client = Redis.from_url(url)
    with Lock(client, prefix="rules-wait", retries=5, retry_delay_ms=7) as locks:
        for _ in range(2):  # the second time from the options kept for these keywords
            handle = locks.acquire("free", retries=1)
            assert handle is not None
            config = handle._section.config
            assert (config.retries, config.retry_delay_ms, config.wait_ms) == (1, 100, 0)
            assert handle.release()
        # Options that say nothing of waiting keep the constructor's waiting.
        handle = locks.acquire("free", ttl_ms=5_000)
        assert handle is not None
        config = handle._section.config
        assert (config.retries, config.retry_delay_ms, config.ttl_ms) == (5, 7, 5_000)
        assert handle.release()
        assert (locks.defaults.retries, locks.defaults.retry_delay_ms) == (5, 7)
    client.close()


# -- 2. the outermost hold's exit with an inner level open --------------------------------


def test_outermost_hold_exit_with_an_inner_level_open_is_refused(
    url: str, r: redis.Redis
) -> None:
    client = Redis.from_url(url)
    with ReentrantLock(client, prefix="rules-rl") as locks:
        levels: list[ReentrantHandle] = []

        def leave_an_inner_level_open() -> None:
            with locks.hold("k") as outer:
                levels.append(outer)
                inner = locks.acquire("k")
                assert inner is not None and inner.depth == 2
                levels.append(inner)

        with pytest.raises(UsageError, match=r"level 2\b.*release the inner"):
            leave_an_inner_level_open()
        outer, inner = levels
        # Nothing was freed: the key is ours, its renewal still armed, nothing signalled.
        assert outer.held and inner.held
        assert r.hget("rules-rl:k", outer.token) == b"2"
        assert outer._armed_at is not None
        assert not outer.signal.aborted
        # The block is over: a loss now would have no body to cancel.
        assert outer._holding is None
        # Still this caller's: a re-entry, not a refusal.
        again = locks.acquire("k")
        assert again is not None and again.depth == 3
        assert again.release()
        # What the message says to do frees the key.
        assert inner.release()
        assert outer.release()
        assert r.exists("rules-rl:k") == 0
        assert outer._armed_at is None
    client.close()


def test_outermost_run_exit_with_an_inner_level_open_is_refused(
    url: str, r: redis.Redis
) -> None:
    client = Redis.from_url(url)
    with ReentrantLock(client, prefix="rules-rl") as locks:
        levels: list[ReentrantHandle] = []

        def body(handle: ReentrantHandle) -> None:
            levels.append(handle)
            inner = locks.acquire("k")
            assert inner is not None
            levels.append(inner)

        with pytest.raises(UsageError, match="still open"):
            locks.run("k", body)
        outer, inner = levels
        assert r.exists("rules-rl:k") == 1 and outer.held
        assert inner.release() and outer.release()
        assert r.exists("rules-rl:k") == 0
    client.close()


# -- 3. an id that cannot be sent ----------------------------------------------------------

BAD_IDS = ["a\ud800", "\udcff", "x\udfff\ud800y"]


@pytest.mark.parametrize("decoded", [False, True], ids=["bytes", "decoded"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", BAD_IDS)
def test_unencodable_id_is_a_validation_error_before_any_command(
    url: str, r: redis.Redis, kind: str, bad: str, decoded: bool
) -> None:
    trace = Recorder()
    client = Redis.from_url(url, decode_responses=decoded)
    with primitive(kind, client, prefix="rules-id", trace=trace) as locks:
        with pytest.raises(ValidationError, match="UTF-8"):
            locks.acquire(bad)
        with pytest.raises(ValidationError, match="UTF-8"):
            enter(locks, bad)
        with pytest.raises(ValidationError, match="UTF-8"):
            locks.run(bad, nothing)
        with pytest.raises(ValidationError, match="UTF-8"):
            locks.key(bad)
        if isinstance(locks, Lock):
            with pytest.raises(ValidationError, match="UTF-8"):
                locks.run_many(["ok", bad], nothing)
        assert trace.actions == []
        assert r.dbsize() == 0
        # A non-ASCII id that is valid text is a key as any other.
        assert locks.run("caf\u00e9", key_of) == "rules-id:caf\u00e9"
    assert trace.count("Acquire") == 1  # that one lock's, the only command sent
    assert r.keys("rules-id:*") == []
    client.close()


# -- 4. the default prefix and lookalikes of distlock's own --------------------------------


def test_the_default_prefix_and_lookalikes_are_accepted(url: str) -> None:
    assert Lock(url).prefix == "lock"
    assert Semaphore(url, limit=1).prefix == "sem"
    client = Redis.from_url(url)
    for prefix in ("distlocks", "my-distlock", "Distlock", "app:distlock"):
        with Lock(client, prefix=prefix) as locks:
            assert locks.run("k", key_of) == f"{prefix}:k"
    client.close()
