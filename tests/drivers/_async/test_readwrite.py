"""A ReadWriteLock against a real redis-server, on both drivers (the sync twin is written
from this module by ``tools/unasync.py``; what only asyncio has, a cancelled body or
waiter, is left out of it).

Every outcome that depends on time waits on Redis's own state: its clock passing a lease's
expiry instant, a waiter's place appearing in the key's queue, a renewal's reply.  Nothing
sleeps to let something happen.  TTLs that must not run out are 30 s; the short ones are
where an expiry is the point.  A caller that must be another holder than the test's own
(a read-write lock is not reentrant) is another task or thread (``spawn``), or another
``ReadWriteLock`` object.
"""

from __future__ import annotations

import asyncio  # unasync: async only
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import redis

from distlock import (
    LockClosedError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ReentryError,
    UpgradeError,
    UsageError,
)
from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import LONGEST_BLOCK_MS, QUEUE_GRACE_MS
from distlock._protocol import encode, fence_key, queue_keys, readers_key
from distlock.asyncio import Lock, ReadWriteLock, ReentrantLock, RoleHandle, Semaphore
from tests.redis_server import RedisServer, redis_ms
from tests.waiting import FOREVER_MS, calls

from .concurrency import (
    UNCANCELLED,
    Event,
    Task,
    client_for,
    disconnected,
    gather,
    signalled,
    spawn,
    until,
)

TTL = 30_000
QUICK = 100  # heartbeat: a lease taken away is noticed within one
KEY = "rw:k"
READERS = readers_key(KEY)
QUEUE, PLACES, WAKE = queue_keys(KEY, Kind.WRITE)


def rwlock(server: RedisServer, **kwargs: Any) -> ReadWriteLock:
    options: dict[str, Any] = {"ttl_ms": TTL, "heartbeat_ms": QUICK, **kwargs}
    return ReadWriteLock(client_for(server), **options)



async def until_redis_passes(r: redis.Redis, instant: float) -> None:
    """Until Redis's own clock is past ``instant`` (ms): a lease ending there has expired."""
    await until(lambda: redis_ms(r) > instant, "Redis's clock passing the instant")


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def queued(r: redis.Redis) -> list[str]:
    return [text(t) for t in r.lrange(QUEUE, 0, -1)]


def leases(r: redis.Redis) -> dict[str, float]:
    """Each reader's token and the instant its lease ends."""
    pairs: list[Any] = r.zrange(READERS, 0, -1, withscores=True)
    return {text(token): float(score) for token, score in pairs}


def counter(r: redis.Redis, key: str = KEY) -> int:
    return int(r.get(fence_key(key)) or 0)


def send(r: redis.Redis, command: Command) -> Any:
    """``command`` sent as a client would send it (its script, KEYS and ARGV), by hand."""
    script, keys, argv = encode(command)
    return r.eval(script.source, len(keys), *keys, *argv)


async def start_waiting(r: redis.Redis, fn: Any, *args: Any, **kwargs: Any) -> Task[Any]:
    """Start ``fn(*args, **kwargs)`` on another task or thread and return once it has a
    place in the queue; a call that ends first is reported at once."""
    before = len(queued(r))
    task = spawn(fn, *args, **kwargs)
    await until(lambda: len(queued(r)) > before or task.done(), "a waiter queued")
    if task.done():
        pytest.fail(f"returned without waiting: {await task.result()!r}")
    return task


async def nothing(h: object) -> None:
    return None


async def fence_of(h: RoleHandle) -> int:
    return h.fence


# -- readers share, a writer is alone ----------------------------------------------------------


async def test_readers_share_each_with_its_own_token_and_lease(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        # Three holders (tasks or threads): one of them asking twice would be refused.
        readers = [await spawn(rw.read.acquire, "k").result() for _ in range(3)]
        assert all(isinstance(h, RoleHandle) and h.held for h in readers)
        handles = [h for h in readers if h is not None]
        assert len({h.token for h in handles}) == 3
        assert {h.key for h in handles} == {KEY}
        # Each reader's lease is its own member of the readers' set, ending at its own
        # instant; the key lives as long as the latest of them.
        scores = leases(r)
        assert set(scores) == {h.token for h in handles}
        assert r.hgetall(KEY) == {b"rw": b"1"}
        assert r.pexpiretime(KEY) == max(scores.values())
        # Readers share the counter's value, taken as it stands.
        assert {h.fence for h in handles} == {counter(r)}
        # No writer beside them, whoever asks: fail fast, hold and run refuse.
        assert await spawn(rw.write.acquire, "k").result() is None
        with pytest.raises(LockNotAcquiredError) as refused:
            async with rw.write.hold("k"):
                pytest.fail("a writer's body ran beside readers")
        assert refused.value.key == KEY
        with pytest.raises(LockNotAcquiredError):
            await rw.write.run("k", nothing)
        assert r.zcard(READERS) == 3 and r.hget(KEY, "w") is None
        for h in handles:
            assert await h.release() is True
        assert r.exists(KEY, READERS) == 0  # gone with the last lease
        assert await rw.write.run("k", fence_of) > handles[0].fence


async def test_a_writer_is_alone(redis_server: RedisServer, r: redis.Redis) -> None:
    async with rwlock(redis_server) as rw, rwlock(redis_server) as other:
        writer = await rw.write.acquire("k")
        assert writer is not None
        fields = r.hgetall(KEY)
        assert fields[b"w"] == writer.token.encode()
        assert int(fields[b"f"]) == writer.fence == counter(r)
        assert int(fields[b"x"]) == r.pexpiretime(KEY)
        # Neither a reader nor another writer, from another object or another task.
        assert await other.read.acquire("k") is None
        assert await other.write.acquire("k") is None
        assert await spawn(rw.read.acquire, "k").result() is None
        assert await spawn(rw.write.acquire, "k").result() is None
        for side in (other.read, other.write):
            with pytest.raises(LockNotAcquiredError) as refused:
                await side.run("k", nothing)
            assert refused.value.key == KEY
            with pytest.raises(LockNotAcquiredError):
                async with side.hold("k"):
                    pytest.fail("a body ran beside the writer")
        assert r.exists(READERS) == 0 and queued(r) == []
        assert await writer.release() is True
        assert r.exists(KEY) == 0
        assert await other.read.run("k", fence_of) == writer.fence


async def test_owner_and_locked_say_what_keeps_each_role_out(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        assert await rw.owner("k") is None
        assert not await rw.read.locked("k") and not await rw.write.locked("k")
        reader = await spawn(rw.read.acquire, "k").result()
        assert reader is not None
        seen = await rw.owner("k")
        assert seen is not None
        assert (seen.kind, seen.readers, seen.token_prefix, seen.fence) == (
            "read-write", 1, None, None
        )
        # A reader keeps a writer out, not another reader.
        assert await rw.write.locked("k") and not await rw.read.locked("k")
        assert await reader.release() is True
        writer = await spawn(rw.write.acquire, "k").result()
        assert writer is not None
        seen = await rw.owner("k")
        assert seen is not None
        assert (seen.kind, seen.readers, seen.token_prefix, seen.fence) == (
            "read-write", 0, writer.token[:8], writer.fence
        )
        assert await rw.write.locked("k") and await rw.read.locked("k")
        assert await writer.release() is True
        # Another primitive's key keeps both out, and is reported as its own.
        async with Lock(client_for(redis_server), prefix="rw") as plain:
            held = await plain.acquire("k")
            assert held is not None
            assert await rw.read.locked("k") and await rw.write.locked("k")
            other = await rw.owner("k")
            assert other is not None and other.kind == "lock"
            assert await held.release() is True


async def test_a_writer_s_fence_is_above_every_fence_before_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        # The slot has no counter yet: the first reader makes one.
        assert r.exists(fence_key(KEY)) == 0
        first = await rw.read.run("k", fence_of)
        assert first >= 1 and first == counter(r)
        seen = [first]
        for _ in range(3):
            written = await rw.write.run("k", fence_of)
            assert written > max(seen)
            seen.append(written)
            read = await rw.read.run("k", fence_of)
            # A reader's value is the counter as it stands: at least the last writer's.
            assert read == counter(r) >= written
            seen.append(read)


# -- each reader's lease is its own ----------------------------------------------------------


async def test_a_dead_reader_ends_at_its_own_ttl_while_another_keeps_renewing(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    renewed = Event()

    def watch(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            renewed.set()

    async with rwlock(redis_server) as dying, rwlock(redis_server, trace=watch) as rw:
        # A manual reader is never renewed: its holder is gone once it has it.
        dead = await dying.read.acquire("k", ttl_ms=1_000)
        assert dead is not None
        ends = r.zscore(READERS, dead.token)
        assert ends is not None

        async def alive(handle: RoleHandle) -> float:
            renewed.clear()
            await renewed.wait()
            # Another reader's renewals move its own lease, not the dead one's.
            assert r.zscore(READERS, dead.token) == ends
            await until_redis_passes(r, ends)
            # A writer is still refused (the live reader holds) and the dead reader is
            # gone from the set, while the live one's lease runs on.
            assert await spawn(rw.write.acquire, "k").result() is None
            assert r.zscore(READERS, dead.token) is None
            mine = r.zscore(READERS, handle.token)
            assert mine is not None and mine > redis_ms(r)
            assert handle.held
            return mine

        assert await rw.read.run("k", alive) > ends
        assert await dead.extend() is False  # an expired reader is never renewed back
        assert await dead.release() is False
        assert r.exists(KEY, READERS) == 0


async def test_extend_moves_one_reader_s_lease_and_the_key_s_expiry(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        short = await spawn(rw.read.acquire, "k", ttl_ms=5_000).result()
        long = await spawn(rw.read.acquire, "k").result()
        assert short is not None and long is not None
        before = r.zscore(READERS, long.token)
        assert r.pexpiretime(KEY) == before
        assert await short.extend(TTL * 2) is True
        extended = r.zscore(READERS, short.token)
        assert extended is not None and before is not None and extended > before
        assert r.zscore(READERS, long.token) == before
        assert r.pexpiretime(KEY) == r.pexpiretime(READERS) == extended
        for h in (short, long):
            assert await h.release() is True
        writer = await rw.write.acquire("k")
        assert writer is not None
        x = int(r.hget(KEY, "x") or 0)
        assert await writer.extend(TTL * 2) is True
        moved = int(r.hget(KEY, "x") or 0)
        assert moved > x and r.pexpiretime(KEY) == moved
        assert await writer.release() is True


# -- writer preference and the queue ---------------------------------------------------------


async def test_a_waiting_writer_turns_away_readers_that_come_after_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    order: list[str] = []
    writing, written = Event(), Event()

    async def write(h: RoleHandle) -> int:
        order.append("writer")
        writing.set()
        await written.wait()
        return h.fence

    async def read(h: RoleHandle) -> int:
        order.append("reader")
        return h.fence

    async with rwlock(redis_server) as rw:
        first = await spawn(rw.read.acquire, "k").result()
        assert first is not None
        writer = await start_waiting(r, rw.write.run, "k", write, wait_ms=FOREVER_MS)
        # The key is a reader's: another reader would share it, but the writer waits.
        assert await spawn(rw.read.acquire, "k").result() is None
        with pytest.raises(LockNotAcquiredError):
            await spawn(rw.read.run, "k", read).result()
        reader = await start_waiting(r, rw.read.run, "k", read, wait_ms=FOREVER_MS)
        assert len(queued(r)) == 2
        assert await first.release() is True
        await writing.wait()
        # The writer holds; the reader that came after it still waits, in the queue.
        assert not reader.done() and len(queued(r)) == 1
        assert r.zcard(READERS) == 0
        written.set()
        fence = await writer.result()
        assert await reader.result() == fence  # after the writer, it reads its fence
    assert order == ["writer", "reader"]
    assert queued(r) == [] and r.exists(KEY, READERS, PLACES) == 0


async def test_readers_behind_a_writer_are_let_in_together_up_to_the_next_writer(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    log: list[tuple[str, str]] = []
    inside: dict[str, Event] = {n: Event() for n in ("r1", "r2", "w2", "r3")}
    leave: dict[str, Event] = {n: Event() for n in inside}

    def body(name: str) -> Callable[[RoleHandle], Any]:
        async def section(h: RoleHandle) -> str:
            log.append(("in", name))
            inside[name].set()
            await leave[name].wait()
            log.append(("out", name))
            return name

        return section

    async with rwlock(redis_server) as rw:
        first = await rw.write.acquire("k")
        assert first is not None
        # The queue, in arrival order: r1 r2 w2 r3.
        tasks = {
            name: await start_waiting(
                r, (rw.write if name.startswith("w") else rw.read).run, "k", body(name),
                wait_ms=FOREVER_MS,
            )
            for name in ("r1", "r2", "w2", "r3")
        }
        assert await first.release() is True
        # Both readers ahead of the next writer are let in, at once: each is inside
        # while the other is.
        await inside["r1"].wait()
        await inside["r2"].wait()
        assert r.zcard(READERS) == 2
        assert not tasks["w2"].done() and not tasks["r3"].done()
        leave["r1"].set()
        leave["r2"].set()
        await inside["w2"].wait()
        assert r.zcard(READERS) == 0 and not tasks["r3"].done()
        leave["w2"].set()
        await inside["r3"].wait()
        leave["r3"].set()
        for name, task in tasks.items():
            assert await task.result() == name
    entered = [name for what, name in log if what == "in"]
    assert set(entered[:2]) == {"r1", "r2"} and entered[2:] == ["w2", "r3"]
    # Both readers were in before either left; the writer after both left; r3 after it.
    position = {event: i for i, event in enumerate(log)}
    assert max(position["in", "r1"], position["in", "r2"]) < min(
        position["out", "r1"], position["out", "r2"]
    )
    assert position["in", "w2"] > max(position["out", "r1"], position["out", "r2"])
    assert position["in", "r3"] > position["out", "w2"]
    assert queued(r) == [] and r.exists(KEY, READERS, PLACES) == 0


async def test_writers_are_served_in_arrival_order(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    order: list[int] = []
    fences: list[int] = []

    def body(n: int) -> Callable[[RoleHandle], Any]:
        async def section(h: RoleHandle) -> None:
            order.append(n)
            fences.append(h.fence)

        return section

    async with rwlock(redis_server) as rw:
        holder = await rw.write.acquire("k")
        assert holder is not None
        waiters = [
            await start_waiting(r, rw.write.run, "k", body(n), wait_ms=FOREVER_MS)
            for n in range(4)
        ]
        assert await holder.release() is True
        for w in waiters:
            await w.result()
    assert order == [0, 1, 2, 3]
    assert fences == sorted(fences) and fences[0] > holder.fence
    assert len(set(fences)) == 4
    assert queued(r) == []


async def test_a_dead_waiter_holds_up_the_queue_only_until_its_place_ends(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    served: dict[str, int] = {}

    async def read(h: RoleHandle) -> int:
        served["at"] = redis_ms(r)
        return h.fence

    async with rwlock(redis_server) as rw:
        holder = await spawn(rw.read.acquire, "k").result()
        assert holder is not None
        # A writer's waiting attempt from a process that is gone just after sending it:
        # refused (a reader holds), it leaves a place in the queue that nobody renews.
        dead = "d" * 32
        reply = send(r, Command(Op.ACQUIRE, KEY, dead, TTL, kind=Kind.WRITE, queue_ms=TTL))
        assert reply[0] == 0 and reply[1] > 0
        assert queued(r) == [dead]
        ends = int(r.hget(PLACES, dead) or 0)
        assert 0 < ends - redis_ms(r) <= LONGEST_BLOCK_MS + QUEUE_GRACE_MS
        # A reader waits behind it (writer preference), though it could share the key.
        reader = await start_waiting(r, rw.read.run, "k", read, wait_ms=TTL)
        assert await holder.release() is True
        # Served once the dead writer's place is over, not at the end of its wait.
        assert await reader.result() >= holder.fence
        assert served["at"] >= ends
    assert dead not in queued(r) and r.hget(PLACES, dead) is None


async def test_a_writer_that_gives_up_wakes_the_readers_it_kept_out(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # A writer first in the queue keeps the readers behind it out, though a reader holds.
    # Its last attempt, refused, takes it out of the queue: the reader behind it may come
    # in now, and must be told so, as a withdrawal tells it, not left to find out at the
    # end of its block.
    async with rwlock(redis_server) as rw:
        holder = await rw.read.acquire("k")
        assert holder is not None
        writer, reader = "w" * 32, "r" * 32
        for token, kind in ((writer, Kind.WRITE), (reader, Kind.READ)):
            reply = send(r, Command(Op.ACQUIRE, KEY, token, TTL, kind=kind, queue_ms=TTL))
            assert reply[0] == 0
        assert queued(r) == [writer, reader]
        last = send(r, Command(Op.ACQUIRE, KEY, writer, TTL, kind=Kind.WRITE, queue_ms=0))
        assert last == [0, 0]
        assert queued(r) == [reader]
        assert r.lrange(WAKE + reader, 0, -1) == [b"1"]
        # Its attempt is granted: it shares the key with the holder.
        granted = send(r, Command(Op.ACQUIRE, KEY, reader, TTL, kind=Kind.READ, queue_ms=TTL))
        assert granted == [holder.fence, 0]
        assert set(leases(r)) == {holder.token, reader} and queued(r) == []
        assert await holder.release() is True


async def test_readers_behind_a_writer_that_timed_out_are_let_in(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        holder = await spawn(rw.read.acquire, "k").result()
        assert holder is not None
        writer = await start_waiting(r, rw.write.acquire, "k", wait_ms=300)
        reader = await start_waiting(r, rw.read.run, "k", fence_of, wait_ms=FOREVER_MS)
        assert await writer.result() is None
        # In while the first reader still holds: nothing keeps it out any more.
        assert await reader.result() == holder.fence
        assert holder.held and r.zscore(READERS, holder.token) is not None
        assert queued(r) == [] and await holder.release() is True


# -- one holder, one section per key -------------------------------------------------------


async def test_an_upgrade_is_refused_with_nothing_sent(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        reader = await rw.read.acquire("k")  # a manual handle: nothing renews it
        assert reader is not None
        state = (r.hgetall(KEY), r.zrange(READERS, 0, -1, withscores=True), counter(r))
        sent = {k: v for k, v in calls(r).items() if k != "info"}
        with pytest.raises(UpgradeError) as refused:
            await rw.write.acquire("k", wait_ms=FOREVER_MS)
        assert isinstance(refused.value, ReentryError)
        assert isinstance(refused.value, UsageError)
        assert refused.value.key == KEY
        with pytest.raises(UpgradeError):
            await rw.write.run("k", nothing)
        with pytest.raises(UpgradeError):
            async with rw.write.hold("k"):
                pytest.fail("the writer's body ran")
        assert {k: v for k, v in calls(r).items() if k != "info"} == sent
        assert (r.hgetall(KEY), r.zrange(READERS, 0, -1, withscores=True), counter(r)) == state
        assert queued(r) == [] and r.exists(PLACES) == 0
        # The read goes on, and once it is given back the write may be taken.
        assert reader.held and await reader.extend() is True
        assert await reader.release() is True
        writer = await rw.write.acquire("k")
        assert writer is not None and await writer.release() is True


@pytest.mark.parametrize(
    ("holds", "wants"), [("write", "write"), ("write", "read"), ("read", "read")]
)
async def test_a_holder_asking_again_is_refused(
    holds: str, wants: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        held = getattr(rw, holds)
        side = getattr(rw, wants)
        async with held.hold("k") as handle:
            before = r.hgetall(KEY), r.zcard(READERS)
            with pytest.raises(ReentryError) as refused:
                await side.acquire("k")
            assert not isinstance(refused.value, UpgradeError)
            assert holds in str(refused.value) and wants in str(refused.value)
            with pytest.raises(ReentryError):
                await side.run("k", nothing)
            with pytest.raises(ReentryError):
                async with side.hold("k"):
                    pytest.fail("a second section of the same holder ran")
            assert (r.hgetall(KEY), r.zcard(READERS)) == before
            assert handle.held
            # Another key is another lock.
            assert await side.run("other", fence_of) >= 1
        assert await side.run("k", fence_of) >= handle.fence


async def test_another_task_or_thread_is_another_holder(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw, rwlock(redis_server) as other:
        async with rw.read.hold("k") as mine:
            # Not the holder: another reader shares, a writer is refused by Redis, not
            # as an upgrade.
            theirs = await spawn(rw.read.acquire, "k").result()
            assert theirs is not None and theirs.token != mine.token
            assert await theirs.release() is True
            assert await spawn(rw.write.acquire, "k").result() is None
            # Another object is another holder too, on the holder's own task or thread.
            assert await other.write.acquire("k") is None
            shared = await other.read.acquire("k")
            assert shared is not None and await shared.release() is True
            # A writer that waits gets the key once the reader is done.
            writer = await start_waiting(r, rw.write.run, "k", fence_of, wait_ms=FOREVER_MS)
        assert await writer.result() > mine.fence


# -- other primitives on the same key --------------------------------------------------------


async def test_locks_semaphores_and_read_write_locks_refuse_each_other_s_keys(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = client_for(redis_server)
    async with (
        rwlock(redis_server) as rw,
        Lock(client, prefix="rw", ttl_ms=TTL) as locks,
        ReentrantLock(client, prefix="rw", ttl_ms=TTL) as rlocks,
        Semaphore(client, prefix="rw", limit=3, ttl_ms=TTL) as sems,
    ):
        others: list[Any] = [locks, rlocks, sems]
        reader = await rw.read.acquire("read")
        writer = await rw.write.acquire("write")
        assert reader is not None and writer is not None
        for held in ("read", "write"):
            for p in others:
                assert await p.acquire(held) is None
                with pytest.raises(LockNotAcquiredError, match=f"rw:{held}"):
                    await p.run(held, nothing)
        theirs = [await p.acquire(name) for p, name in zip(others, ["l", "r", "s"], strict=True)]
        assert all(h is not None for h in theirs)
        for name in ("l", "r", "s"):
            for side in (rw.read, rw.write):
                assert await spawn(side.acquire, name).result() is None
                with pytest.raises(LockNotAcquiredError, match=f"rw:{name}"):
                    await spawn(side.run, name, nothing).result()
        # Waiting attempts too (their scripts read the key's type as well), side by side.
        waits: list[Callable[[], Any]] = [
            *(partial(p.acquire, id, wait_ms=50) for p in others for id in ("read", "write")),
            *(partial(side.acquire, id, wait_ms=50) for side in (rw.read, rw.write)
              for id in ("l", "r", "s")),
        ]
        assert await gather(*waits) == [None] * len(waits)
        # Each key is still its holder's, in its own format.
        assert r.type("rw:l") == b"string" and r.type("rw:r") == b"hash"
        assert r.type("rw:s") == b"zset" and r.hget("rw:read", "rw") == b"1"
        for h in [reader, writer, *theirs]:
            assert h is not None and h.held and await h.release() is True
        assert r.keys("rw:*") == []
    await client.aclose()


# -- release, extend, loss ---------------------------------------------------------------------


async def test_release_is_true_only_while_the_lease_is_ours(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        sides = {"r": rw.read, "w": rw.write}  # a reader of rw:r, a writer of rw:w
        for id, side in sides.items():
            handle = await side.acquire(id)
            assert handle is not None
            assert await handle.release() is True
            assert await handle.release() is False
        # Expired by Redis's clock (the keys may linger until Redis expires them).
        expiring = [await side.acquire(id, ttl_ms=1_000) for id, side in sides.items()]
        await until_redis_passes(r, max(r.pexpiretime(f"rw:{id}") for id in sides))
        for handle in expiring:
            assert handle is not None and await handle.release() is False
        # Taken away by an operator: every lease of the key, either role's.
        for id, side in sides.items():
            handle = await side.acquire(id)
            assert handle is not None
            assert await side.force_unlock(id) is True
            assert r.exists(handle.key, readers_key(handle.key)) == 0
            assert await handle.extend() is False and handle.signal.aborted
            assert await handle.release() is False
            assert await side.force_unlock(id) is False


@pytest.mark.parametrize("role", ["read", "write"])
async def test_a_resent_release_is_answered_as_released(
    role: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    kind = Kind(role)
    async with rwlock(redis_server) as rw:
        handle = await getattr(rw, role).acquire("k")
        assert handle is not None
        # A resent acquire (its reply was lost) is granted again, with the same value,
        # and takes no second lease.
        again = send(r, Command(Op.ACQUIRE, KEY, handle.token, TTL, kind=kind))
        assert again == [1, handle.fence]
        assert r.zcard(READERS) == (1 if role == "read" else 0)
        assert await handle.release() is True
    # The client library resends the release (its reply was lost): answered as released;
    # a release by a token that never held it is not.
    assert send(r, Command(Op.RELEASE, KEY, handle.token, 0, kind=kind)) == 1
    assert send(r, Command(Op.RELEASE, KEY, "f" * 32, 0, kind=kind)) == 0
    assert r.exists(KEY, READERS) == 0


@pytest.mark.parametrize("role", ["read", "write"])
async def test_force_unlock_mid_section_fires_the_signal_and_fails_the_section(
    role: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    seen: list[bool] = []

    async def body(handle: RoleHandle) -> None:
        assert await rw.write.force_unlock("k") is True
        await signalled(handle.signal)
        seen.append(handle.held)  # not cancelled, though the loss was known

    async with rwlock(redis_server) as rw:
        side = getattr(rw, role)
        with pytest.raises(LockLeaseLostError) as lost:
            await side.run("k", body, **UNCANCELLED)
        assert lost.value.reason is LossReason.RENEW_REJECTED
        assert lost.value.key == KEY
        with pytest.raises(LockLeaseLostError) as lost_hold:
            async with side.hold("k", **UNCANCELLED) as handle:
                await body(handle)
        assert lost_hold.value.reason is LossReason.RENEW_REJECTED
        assert handle.signal.reason is lost_hold.value
    assert seen == [False, False]
    assert r.exists(KEY, READERS) == 0


def lease_end(r: redis.Redis, handle: RoleHandle) -> float | None:
    """The instant ``handle``'s lease ends by Redis's clock (None: it has none)."""
    if r.hget(handle.key, "w") == handle.token.encode():
        return float(r.hget(handle.key, "x") or 0)
    return r.zscore(readers_key(handle.key), handle.token)


async def test_renewal_keeps_each_role_s_lease_past_its_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def body(handle: RoleHandle) -> bool:
        first = lease_end(r, handle)
        assert first is not None
        # Past the first TTL in Redis's time: only renewals can have kept it.
        await until_redis_passes(r, first)
        later = lease_end(r, handle)
        return handle.held and later is not None and later > first

    async with rwlock(redis_server, ttl_ms=1_000, heartbeat_ms=100) as rw:
        # A reader of one key and a writer of another, side by side.
        assert await gather(
            lambda: rw.read.run("r", body), lambda: rw.write.run("w", body)
        ) == [True, True]
    assert r.keys("rw:*") == []


# -- close ---------------------------------------------------------------------------------


async def test_close_mid_section_releases_both_sides_and_fails_their_sections(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    rw = rwlock(redis_server)
    entered = {"read": Event(), "write": Event()}
    closed = Event()
    seen: dict[str, Any] = {}

    async def section(role: str, id: str) -> None:
        async with getattr(rw, role).hold(id, **UNCANCELLED) as handle:
            seen[role] = handle
            entered[role].set()
            await closed.wait()
            seen[role + " aborted"] = handle.signal.aborted

    tasks = [spawn(section, "read", "k"), spawn(section, "write", "other")]
    try:
        for event in entered.values():
            await event.wait()
        assert r.zcard(READERS) == 1 and r.hget("rw:other", "w") is not None
        await rw.aclose()
        # Both sides' sections were given back by close itself, while the bodies run.
        assert r.exists(KEY, READERS, "rw:other") == 0
        assert seen["read"].signal.aborted and seen["write"].signal.aborted
    finally:
        closed.set()
        errors = []
        for task in tasks:
            with pytest.raises(LockLeaseLostError) as info:
                await task.result()
            errors.append(info.value)
    assert seen["read aborted"] is True and seen["write aborted"] is True
    assert [e.reason for e in errors] == [LossReason.LOCK_CLOSED] * 2
    for side in (rw.read, rw.write):
        with pytest.raises(LockClosedError, match="this ReadWriteLock is closed"):
            await side.acquire("k")
        with pytest.raises(LockClosedError, match="this ReadWriteLock is closed"):
            await side.run("k", nothing)


async def test_close_wakes_a_waiter_which_withdraws(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as other:
        holder = await other.write.acquire("k")
        assert holder is not None
        rw = rwlock(redis_server)
        waiter = await start_waiting(r, rw.read.acquire, "k", wait_ms=FOREVER_MS)
        await rw.aclose()
        with pytest.raises(LockClosedError, match="this ReadWriteLock is closed"):
            await waiter.result()
        assert queued(r) == [] and r.exists(PLACES) == 0
        assert await holder.release() is True
        assert r.exists(KEY, READERS) == 0  # nobody was let in


@pytest.mark.parametrize("side", ["read", "write"])
async def test_closing_one_side_closes_the_whole_lock(
    redis_server: RedisServer, r: redis.Redis, side: str
) -> None:
    rw = rwlock(redis_server)
    await getattr(rw, side).aclose()
    for either in (rw.read, rw.write):
        with pytest.raises(LockClosedError, match="this ReadWriteLock is closed"):
            await either.acquire("k")
    assert r.exists(KEY) == 0


async def test_a_url_client_is_owned_and_closed(redis_server: RedisServer, r: redis.Redis) -> None:
    rw = ReadWriteLock(redis_server.url, ttl_ms=TTL)
    assert await rw.read.run("k", fence_of) >= 1
    assert await rw.write.run("k", fence_of) >= 1
    client = await rw.client()
    readers = rw.read
    assert await readers.client() is client  # one client for both sides
    await rw.aclose()
    assert disconnected(client)


async def test_a_section_s_transitions_are_recorded_with_its_role(
    redis_server: RedisServer,
) -> None:
    events: list[dict[str, Any]] = []
    async with rwlock(redis_server, trace=events.append) as rw:
        await rw.read.run("k", nothing)
        await rw.write.run("k", nothing)
    acquires = [e for e in events if e["action"] == "Acquire"]
    assert [e["kind"] for e in acquires] == ["read", "write"]
    assert [e["action"] for e in events].count("ReleaseReply") == 2


# unasync: begin async only
async def test_a_loss_cancels_the_body_by_default(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    reached: list[str] = []

    async def body(handle: RoleHandle) -> None:
        assert await rw.read.force_unlock("k") is True
        reached.append("taken")
        await asyncio.sleep(60)  # cancelled at the next renewal
        reached.append("not cancelled")

    async with rwlock(redis_server) as rw:
        for side in (rw.read, rw.write):
            with pytest.raises(LockLeaseLostError) as lost:
                await side.run("k", body)
            assert lost.value.reason is LossReason.RENEW_REJECTED
    assert reached == ["taken", "taken"]


@pytest.mark.parametrize("role", ["read", "write"])
async def test_a_cancelled_waiter_withdraws_its_place(
    role: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    async with rwlock(redis_server) as rw:
        holder = await rw.write.acquire("k")
        assert holder is not None
        side = getattr(rw, role)
        cancelled = await start_waiting(r, side.acquire, "k", wait_ms=FOREVER_MS)
        [token] = queued(r)
        after = await start_waiting(r, side.acquire, "k", wait_ms=FOREVER_MS)
        cancelled.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled.task
        # Its place is gone before the cancellation left the call.
        assert token not in queued(r) and len(queued(r)) == 1
        assert r.hget(PLACES, token) is None and r.exists(WAKE + token) == 0
        assert await holder.release() is True
        handle = await after.result()
        assert handle is not None and handle.held
        assert await handle.release() is True
    assert queued(r) == [] and r.exists(KEY, READERS, PLACES) == 0
# unasync: end
