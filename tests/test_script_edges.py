"""The scripts' edge cases, checked on what each leaves in Redis: who holds the key, who is
in the queue, what each waiter's wake list holds, what a reply says.

Each case sends the scripts one by one, as the drivers would in some interleaving, and
reads the keys afterwards: nothing waits on time (an expired place or permit is written
as one, on Redis's clock), so each is fast and exact.  ``tests/mutation.py`` names the
script bug each one catches.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import HANDED_TTL_MS
from distlock._protocol import decode, encode, queue_keys
from tests.redis_server import redis_ms

KEY = "edge:k"
TTL = 60_000
WAIT = 5_000
A, B, C = "a" * 32, "b" * 32, "c" * 32
#: Each kind waits in a queue of its own; a case uses one kind, so it reads them all.
QUEUES = [queue_keys(KEY, kind) for kind in Kind]
LOCKS = [pytest.param(Kind.LOCK, id="lock"), pytest.param(Kind.REENTRANT, id="reentrant")]


def send(r: redis.Redis, command: Command) -> int:
    script, keys, args = encode(command)
    reply: Any = r.eval(script.source, len(keys), *keys, *args)
    return decode(command, reply)


def acquire(kind: Kind, token: str, queue_ms: int | None = None, limit: int = 0) -> Command:
    """An attempt; a lock's waiting one asks to be handed the key, as a renewed one does."""
    command = Command(Op.ACQUIRE, KEY, token, TTL, kind=kind, queue_ms=queue_ms, limit=limit)
    if queue_ms is not None and kind is not Kind.SEMAPHORE:
        command.hand_ms = min(TTL, HANDED_TTL_MS)
    return command


def op(kind: Kind, what: Op, token: str, limit: int = 0) -> Command:
    return Command(what, KEY, token, TTL, kind=kind, limit=limit)


def withdraw(kind: Kind, token: str, limit: int = 0) -> Command:
    return Command(Op.WITHDRAW, KEY, token, TTL, kind=kind, queue_ms=0, limit=limit)


def queued(r: Any) -> list[str]:
    return [t.decode() for queue, _, _ in QUEUES for t in r.lrange(queue, 0, -1)]


def wake(r: Any, token: str) -> list[str]:
    return [e.decode() for _, _, wake in QUEUES for e in r.lrange(wake + token, 0, -1)]


def holder(r: Any, kind: Kind) -> str | None:
    if kind is Kind.LOCK:
        value = r.get(KEY)
        return value.decode() if value else None
    fields = [f.decode() for f in r.hkeys(KEY) if f != b"fence"]
    return fields[0] if fields else None



@pytest.mark.parametrize("kind", LOCKS)
def test_a_held_key_queues_its_waiters_and_a_withdrawal_wakes_no_one(
    r: redis.Redis, kind: Kind
) -> None:
    assert send(r, acquire(kind, A)) >= 1
    assert send(r, acquire(kind, B, WAIT)) < 0  # refused: queued, may block a while
    assert send(r, acquire(kind, C, WAIT)) < 0
    assert queued(r) == [B, C]
    # B gives up while A still holds the key: nothing is free to hand C or wake it for.
    assert send(r, withdraw(kind, B)) == 1
    assert queued(r) == [C]
    assert wake(r, C) == []
    assert holder(r, kind) == A


@pytest.mark.parametrize("kind", LOCKS)
def test_a_waiter_that_withdraws_gives_a_handed_key_on(r: redis.Redis, kind: Kind) -> None:
    assert send(r, acquire(kind, A)) >= 1
    assert send(r, acquire(kind, B, WAIT)) < 0
    assert send(r, acquire(kind, C, WAIT)) < 0
    assert send(r, op(kind, Op.RELEASE, A)) == 1
    assert holder(r, kind) == B  # handed to the first waiter, which has not read it yet
    assert wake(r, B)[0].startswith("=")
    assert send(r, withdraw(kind, B)) == 1  # it stops waiting: it holds nothing
    assert holder(r, kind) == C
    assert queued(r) == []
    assert wake(r, B) == []
    assert wake(r, C)[0].startswith("=")
    # And the last waiter's withdrawal gives the key back to nobody: it is free.
    assert send(r, withdraw(kind, C)) == 1
    assert r.exists(KEY) == 0


@pytest.mark.parametrize("kind", LOCKS)
def test_a_release_skips_a_waiter_whose_place_expired(r: redis.Redis, kind: Kind) -> None:
    assert send(r, acquire(kind, A)) >= 1
    assert send(r, acquire(kind, B, WAIT)) < 0
    assert send(r, acquire(kind, C, WAIT)) < 0
    places = queue_keys(KEY, kind)[1]
    r.hset(places, B, redis_ms(r) - 1)  # B died waiting: its place has ended
    assert send(r, op(kind, Op.RELEASE, A)) == 1
    assert holder(r, kind) == C
    assert queued(r) == []
    assert r.hget(places, B) is None


SEM = Kind.SEMAPHORE


def test_a_full_semaphore_queues_its_waiters(r: redis.Redis) -> None:
    assert send(r, acquire(SEM, A, limit=1)) == 1
    assert send(r, acquire(SEM, B, WAIT, limit=1)) < 0
    assert send(r, acquire(SEM, C, WAIT, limit=1)) < 0
    assert queued(r) == [B, C]
    # The first waiter gives up while the permit is still held: no one is woken.
    assert send(r, withdraw(SEM, B, limit=1)) == 1
    assert queued(r) == [C]
    assert wake(r, C) == []


def test_released_permits_wake_the_first_waiters_one_after_another(r: redis.Redis) -> None:
    for token in (A, "d" * 32):
        assert send(r, acquire(SEM, token, limit=2)) == 1
    assert send(r, acquire(SEM, B, WAIT, limit=2)) < 0
    assert send(r, acquire(SEM, C, WAIT, limit=2)) < 0
    assert send(r, op(SEM, Op.RELEASE, A)) == 1
    assert wake(r, B) == ["1"]  # woken: a permit is free
    assert send(r, op(SEM, Op.RELEASE, "d" * 32)) == 1
    assert wake(r, C) == []  # B, first, has not taken its permit yet
    # B's attempt takes a permit; one is still free, so C is woken at once.
    assert send(r, acquire(SEM, B, WAIT, limit=2)) > 0
    assert wake(r, C) == ["1"]


def test_an_expired_permit_is_not_renewed(r: redis.Redis) -> None:
    assert send(r, acquire(SEM, A, limit=2)) == 1
    expired = redis_ms(r) - 1
    r.zadd(KEY, {A: expired}, xx=True)  # its TTL ran out; no acquire evicted it yet
    assert send(r, op(SEM, Op.RENEW, A)) == 0
    assert r.zscore(KEY, A) == expired


def test_a_woken_waiter_that_gives_up_passes_the_wake_up_on(r: redis.Redis) -> None:
    assert send(r, acquire(SEM, A, limit=1)) == 1
    assert send(r, acquire(SEM, B, WAIT, limit=1)) < 0
    assert send(r, acquire(SEM, C, WAIT, limit=1)) < 0
    assert send(r, op(SEM, Op.RELEASE, A)) == 1
    assert wake(r, B) == ["1"]
    assert send(r, withdraw(SEM, B, limit=1)) == 1  # woken, but it stops waiting
    assert wake(r, B) == []
    assert wake(r, C) == ["1"]  # the free permit's wake-up is not dropped with B
