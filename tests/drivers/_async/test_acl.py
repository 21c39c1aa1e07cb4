"""The least a restricted Redis user needs, on both drivers: the ACL docs/acl.md documents,
on a real server."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import redis

from distlock import Leader, LockError
from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from distlock.asyncio import Election, Leadership, Lock, LockHandle
from distlock.events import Renewed
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer

from .concurrency import Event, Task, client_for, spawn, until

#: The documented ACL (docs/acl.md), for locks under the prefix "orders".
ACL = documented_acl("locker")
#: The documented ACL of a leader election under the default prefix.
ELECTOR_ACL = documented_acl("elector")
#: Its rights (keys, channels, commands): each one taken away in turn below.
ELECTOR_RIGHTS = [rule for rule in ELECTOR_ACL if rule[0] in "~&+"]


@pytest.fixture
def restricted(fresh_redis: RedisServer) -> RedisServer:
    """A server of the test's own with the documented restricted user on it."""
    admin = redis.Redis(port=fresh_redis.port)
    admin.acl_setuser("locker", reset=True)
    admin.execute_command("ACL", "SETUSER", "locker", *ACL)  # type: ignore[no-untyped-call]
    admin.close()
    return fresh_redis


def as_locker(server: RedisServer) -> Any:
    """A client of the driver's, connected as the restricted user."""
    return client_for(server, username="locker", password="s3cret")


async def fence_of(h: LockHandle) -> int:
    return h.fence


async def test_the_documented_acl_is_enough(restricted: RedisServer) -> None:
    admin = redis.Redis(port=restricted.port)
    client = as_locker(restricted)
    async with Lock(client, prefix="orders", ttl_ms=10_000) as locks:
        assert await locks.run("1", fence_of) >= 1
        handle = await locks.acquire("2")
        assert handle is not None
        assert await handle.extend(20_000) is True
        # Scripts flushed (a restart, a SCRIPT FLUSH): EVALSHA fails, EVAL takes over.
        admin.script_flush()
        assert await handle.release() is True
        assert await locks.run("3", fence_of) >= 1
        admin.script_flush()
        async with locks.hold("4") as h:
            assert h.fence >= 1
        # Waiting: a refused attempt queues, the block times out, the last attempt leaves.
        held = await locks.acquire("5")
        assert held is not None
        assert await locks.acquire("5", wait_ms=50) is None
        # A release wakes the waiter: the queue's commands run under the restricted user.
        waiter = spawn(locks.acquire, "5", wait_ms=60_000)
        await until(lambda: admin.exists(queue_keys("orders:5")[0]), "the waiter queued")
        assert await held.release() is True
        got = await waiter.result()
        assert isinstance(got, LockHandle) and await got.release()
    await client.aclose()
    assert admin.keys("orders:*") == []
    admin.close()


async def test_the_documented_acl_is_restrictive(restricted: RedisServer) -> None:
    # Not vacuous: the user can touch nothing but its locks and the fence counters.
    plain = redis.Redis(port=restricted.port, username="locker", password="s3cret")
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.get("elsewhere:1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.keys("*")
    plain.close()
    client = as_locker(restricted)
    async with Lock(client, prefix="elsewhere") as locks:
        with pytest.raises(redis.exceptions.NoPermissionError):
            await locks.acquire("1")
    await client.aclose()


async def test_background_renewals_need_no_more_than_the_documented_acl(
    restricted: RedisServer,
) -> None:
    """A pipelined renewal that meets a Redis without its script goes again by EVAL: no
    SCRIPT LOAD, which the ACL does not grant."""
    admin = redis.Redis(port=restricted.port)
    admin.script_flush()  # the renewal script is not loaded until a renewal sends it
    renewed = Event()

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            renewed.set()

    client = as_locker(restricted)
    locks = Lock(client, prefix="orders", ttl_ms=10_000, heartbeat_ms=100, trace=trace)
    async with locks, locks.hold("5") as handle:
        await renewed.wait()  # "no renewal was answered under the restricted user" otherwise
        assert handle.held
    await client.aclose()
    admin.close()


# -- a leader election ---------------------------------------------------------------------


def elector(server: RedisServer, rules: list[str]) -> Any:
    """The user ``elector`` with ``rules`` on the server (keyspace notifications on), and a
    client of the driver's connected as it."""
    admin = redis.Redis(port=server.port)
    admin.acl_setuser("elector", reset=True)
    admin.execute_command("ACL", "SETUSER", "elector", *rules)  # type: ignore[no-untyped-call]
    admin.config_set("notify-keyspace-events", "Kghx")
    admin.close()
    return client_for(server, username="elector", password="s3cret")


async def election_calls(server: RedisServer, client: Any, heard_within_s: float) -> None:
    """Every call of an election: a campaign, a renewal, a campaign that queues, blocks
    and gives up, a resignation that passes a dead candidate's expired place and wakes the
    waiting one (after a script flush: EVAL), leader(), and observe() hearing a
    resignation on Redis's word (it polls once a minute), within ``heard_within_s``.

    The waiting candidate is woken, not handed the lease: its place's handoff TTL is taken
    away, as a campaign with ``replicas=`` leaves none (its grant must reach the replicas
    before it leads); the resignation's handoff is the dead-waiter test's and the client
    matrix's."""
    admin = redis.Redis(port=server.port)
    queue, places, _ = queue_keys("election:1", Kind.CAMPAIGN)
    seen: list[Leader | None] = []
    renewed = Event()

    def renewal(event: object) -> None:
        if isinstance(event, Renewed) and event.key == "election:1":
            renewed.set()

    options: Any = {"ttl_ms": 10_000, "heartbeat_ms": 100, "observers": [renewal]}
    started: list[Task[Any]] = []  # each one's outcome is collected, whatever happens
    try:
        async with Election(client, "1", identity="a", **options) as a:

            async def observe() -> None:
                async for now in a.observe(poll_ms=60_000):
                    seen.append(now)

            async with Election(client, "1", identity="b", ttl_ms=10_000) as b:
                first = await a.campaign(wait_ms=0)
                assert isinstance(first, Leadership)
                await renewed.wait()
                assert await b.campaign(wait_ms=50) is None  # queued, blocked, gave up
                admin.script_flush()
                # First in line, a candidate that died long ago: its place has expired.
                admin.rpush(queue, "dead")
                admin.hset(places, mapping={"dead": 1, ">dead": 3_000, "#dead": "dead"})
                waiter = spawn(b.campaign, wait_ms=60_000)
                started.append(waiter)
                await until(
                    lambda: admin.lindex(queue, -1) not in (None, b"dead") or waiter.done(),
                    "b queued",
                )
                token = admin.lindex(queue, -1)
                assert isinstance(token, bytes)
                admin.hdel(places, b">" + token)  # to be woken, not handed the lease
                assert await first.resign() is True
                second = await waiter.result()
                assert isinstance(second, Leadership) and second.fence > first.fence
                assert admin.lrange(queue, 0, -1) == []  # the dead one's place too
                now = await a.leader()
                assert now is not None and now.identity == "b"
                observer = spawn(observe)
                started.append(observer)
                await until(lambda: len(seen) == 1 or observer.done(), "observe's first read")
                assert await second.resign() is True
                await until(lambda: len(seen) == 2 or observer.done(), "the resignation heard",
                            limit_s=heard_within_s)
                assert seen[-1] is None
    finally:
        for task in started:  # ended by the Elections' close; the test's failure says why
            with contextlib.suppress(Exception):
                await task.result()
        admin.close()


async def test_the_documented_election_acl_is_enough(fresh_redis: RedisServer) -> None:
    client = elector(fresh_redis, ELECTOR_ACL)
    await election_calls(fresh_redis, client, heard_within_s=30.0)
    await client.aclose()
    admin = redis.Redis(port=fresh_redis.port)
    assert admin.exists("election:1") == 0
    admin.close()
    # Not vacuous: the user can touch no other key, nor a lock's queue.
    plain = redis.Redis(port=fresh_redis.port, username="elector", password="s3cret")
    for key in ("elsewhere:1", queue_keys("election:1")[0]):
        with pytest.raises(redis.exceptions.NoPermissionError):
            plain.get(key)
    plain.close()


@pytest.mark.parametrize("right", ELECTOR_RIGHTS)
async def test_the_election_needs_every_right_its_line_gives(
    fresh_redis: RedisServer, right: str
) -> None:
    """Each right taken away: a call is refused, or (a channel, or SUBSCRIBE) observe()
    polls, and does not hear the resignation within the 3 s it hears it in otherwise."""
    client = elector(fresh_redis, [rule for rule in ELECTOR_ACL if rule != right])
    with pytest.raises((redis.RedisError, LockError, AssertionError)):
        await election_calls(fresh_redis, client, heard_within_s=3.0)
    await client.aclose()
