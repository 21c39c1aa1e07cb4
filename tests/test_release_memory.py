"""A release is remembered for every token released within the memory, not only the last.

Client A releases and its reply is lost; B acquires and releases the same key; then A's
client library sends A's release again.  The resend must be answered as released: A kept
its key to the end, and a memory of the last releaser only (B) would report A's section
lost.  Checked on the scripts themselves and through both drivers, for the lock and the
reentrant lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock._core.commands import Command, Kind, Op
from distlock._protocol import R_RELEASE, RELEASE, RELEASE_MEMORY_MS, encode
from tests.redis_server import RedisServer

TTL = 60_000
KINDS = (Kind.LOCK, Kind.REENTRANT)


def send(r: redis.Redis, command: Command) -> int:
    script, keys, args = encode(command)
    reply: Any = r.eval(script.source, len(keys), *keys, *args)
    if isinstance(reply, list):
        return int(reply[1]) if int(reply[0]) == 1 else 0
    return int(reply)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name.lower())
def test_a_resend_after_another_release_is_answered_released(r: redis.Redis, kind: Kind) -> None:
    a, b = "a" * 32, "b" * 32

    def cmd(op: Op, token: str) -> Command:
        return Command(op, "mem:k", token, TTL, kind=kind)

    assert send(r, cmd(Op.ACQUIRE, a)) >= 1
    assert send(r, cmd(Op.RELEASE, a)) == 1  # its reply is lost
    assert send(r, cmd(Op.ACQUIRE, b)) >= 1
    assert send(r, cmd(Op.RELEASE, b)) == 1
    assert send(r, cmd(Op.RELEASE, a)) == 1  # A's resend: A's release, remembered
    assert send(r, cmd(Op.RELEASE, b)) == 1
    # Never released by this token: not ours, and not remembered as ours.
    assert send(r, cmd(Op.RELEASE, "c" * 32)) == 0
    assert r.get("mem:k") is None


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name.lower())
def test_each_record_is_short_lived(r: redis.Redis, kind: Kind) -> None:
    for token in ("a" * 32, "b" * 32):
        assert send(r, Command(Op.ACQUIRE, "mem:k", token, TTL, kind=kind)) >= 1
        assert send(r, Command(Op.RELEASE, "mem:k", token, TTL, kind=kind)) == 1
    records = r.keys("distlock:released:*")
    assert len(records) == 2
    assert all(0 < r.pttl(record) <= RELEASE_MEMORY_MS for record in records)


def _lock(kind: Kind, client: Any) -> Any:
    return (distlock.Lock if kind is Kind.LOCK else distlock.ReentrantLock)(
        client, prefix="mem", ttl_ms=TTL
    )


def _alock(kind: Kind, client: Any) -> Any:
    if kind is Kind.LOCK:
        return distlock.asyncio.Lock(client, prefix="mem", ttl_ms=TTL)
    return distlock.asyncio.ReentrantLock(client, prefix="mem", ttl_ms=TTL)


class ReleaseLostThenResent(redis.Redis):
    """Runs the first release script, then ``meanwhile`` (another client's whole section),
    then the same release again, answering with the second reply: a client retry of a
    release whose first reply was lost, with another owner's cycle in between."""

    meanwhile: Callable[[], None]
    resent = False

    def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if args[0] == "EVALSHA" and args[1] in (RELEASE.sha, R_RELEASE.sha) and not self.resent:
            self.resent = True
            self.meanwhile()
            reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return reply


class AsyncReleaseLostThenResent(aredis.Redis):
    meanwhile: Callable[[], None]
    resent = False

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if args[0] == "EVALSHA" and args[1] in (RELEASE.sha, R_RELEASE.sha) and not self.resent:
            self.resent = True
            self.meanwhile()
            reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return reply


def _other_owner(kind: Kind, url: str) -> Callable[[], None]:
    """B's whole section on the same key, on a client of its own, built as users build it."""

    def section() -> None:
        other = redis.Redis.from_url(url, decode_responses=True)
        with _lock(kind, other) as locks:
            fences.append(locks.run("k", lambda h: h.fence))
        other.close()

    def cycle() -> None:
        # On a thread of its own, as another process's would be (and a sync reentrant
        # lock refuses a thread that runs an event loop).
        other = threading.Thread(target=section)
        other.start()
        other.join()
        assert fences.pop() >= 1

    fences: list[int] = []
    return cycle


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name.lower())
def test_a_section_whose_release_was_resent_is_not_reported_lost(
    redis_server: RedisServer, r: redis.Redis, kind: Kind
) -> None:
    url = f"redis://{redis_server.host}:{redis_server.port}"
    client = ReleaseLostThenResent(host=redis_server.host, port=redis_server.port)
    client.meanwhile = _other_owner(kind, url)
    with _lock(kind, client) as locks:
        assert locks.run("k", lambda h: h.fence) >= 1  # not RELEASE_REJECTED
    assert client.resent
    assert r.get("mem:k") is None


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name.lower())
def test_an_asyncio_section_whose_release_was_resent_is_not_reported_lost(
    redis_server: RedisServer, r: redis.Redis, kind: Kind
) -> None:
    url = f"redis://{redis_server.host}:{redis_server.port}"

    async def main() -> None:
        client = AsyncReleaseLostThenResent(host=redis_server.host, port=redis_server.port)
        client.meanwhile = _other_owner(kind, url)
        async with _alock(kind, client) as locks, locks.hold("k") as h:
            assert h.held
        assert client.resent
        await client.aclose()

    asyncio.run(main())
    assert r.get("mem:k") is None
