"""Leader election against a real redis-server, on both drivers (the sync twin is written
from this module by ``tools/unasync.py``; what only asyncio has, a cancelled campaign or a
body cancelled by a loss, is left out of it).

Every outcome that depends on time waits on Redis's own state (a candidate's place in the
election's queue, the key gone) or on an event; nothing sleeps to let something happen.
Leases that must not run out are 30 s; the short ones (a few hundred ms) are where an
expiry is the point.  A candidate that dies is a real process of the driver under test,
killed with SIGKILL.
"""

from __future__ import annotations

import asyncio  # unasync: async only
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest
import redis

from distlock import (
    Leader,
    LockClosedError,
    LockLeaseLostError,
    LossReason,
    NotReplicatedError,
    UsageError,
    ValidationError,
)
from distlock._core.commands import Kind
from distlock._leader import MAX_IDENTITY
from distlock._protocol import leader_key, queue_keys
from distlock.asyncio import Election, Leadership
from tests.redis_server import RedisServer
from tests.waiting import calls

from .concurrency import (
    DRIVER,
    BlockingConnectionPool,
    Event,
    Redis,
    Task,
    client_for,
    signalled,
    spawn,
    until,
)

TTL = 30_000
#: A lease that must run out within a test.
SHORT_TTL = 400
QUICK = 100  # heartbeat: a lease taken away is noticed within one
NAME = "e"
KEY = f"election:{NAME}"
RECORD = leader_key(KEY)
QUEUE, PLACES, WAKE = queue_keys(KEY, Kind.CAMPAIGN)


def election(server: RedisServer, identity: str, **kwargs: Any) -> Election:
    """A candidate of election ``e`` with a client of its own (made from the URL, closed
    with the Election)."""
    options: dict[str, Any] = {"ttl_ms": TTL, "heartbeat_ms": QUICK, **kwargs}
    return Election(server.url, NAME, identity=identity, **options)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def queued(r: redis.Redis) -> list[str]:
    return [text(t) for t in r.lrange(QUEUE, 0, -1)]


def nothing_waits(r: redis.Redis) -> bool:
    """No place, no queue and no wake list of the election's is left."""
    return r.exists(QUEUE, PLACES) == 0 and r.keys(WAKE + "*") == []


async def start_campaign(r: redis.Redis, candidate: Election, **kwargs: Any) -> Task[Any]:
    """Start ``candidate.campaign(**kwargs)`` concurrently and return once its place is in
    the queue; a campaign that ends first is reported at once."""
    before = len(queued(r))
    task = spawn(candidate.campaign, **kwargs)
    await until(lambda: len(queued(r)) > before or task.done(), "a candidate queued")
    if task.done():
        pytest.fail(f"returned without waiting: {await task.result()!r}")
    return task


def script_held(r: redis.Redis) -> bool:
    """Whether a script call is held unexecuted by CLIENT PAUSE WRITE."""
    return any(
        c.get("cmd") in ("evalsha", "eval") and "b" in c["flags"] for c in r.client_list()
    )


async def led(candidate: Election, **kwargs: Any) -> Leadership:
    leadership = await candidate.campaign(**kwargs)
    assert isinstance(leadership, Leadership)
    return leadership


# -- campaign, resign, leader() --------------------------------------------------------------


async def test_a_campaign_leads_until_it_resigns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a:
        assert await a.leader() is None
        leadership = await led(a, wait_ms=0)
        assert leadership.is_leader and leadership.held
        assert leadership.identity == "a" and leadership.key == KEY
        assert r.get(KEY) == leadership.token.encode()
        now = await a.leader()
        assert isinstance(now, Leader)
        assert (now.identity, now.fence) == ("a", leadership.fence)
        assert 0 < now.ttl_ms <= TTL
        assert await leadership.resign() is True
        assert await leadership.resign() is True  # twice: what the first one said
        assert not leadership.is_leader
        assert await a.leader() is None
        assert r.exists(KEY) == 0
    assert nothing_waits(r)


async def test_a_waiting_candidate_is_handed_the_lease_on_resign(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a, election(redis_server, "b") as b:
        first = await led(a)
        waiting = await start_campaign(r, b)  # no deadline
        now = await b.leader()
        assert now is not None and now.identity == "a"  # a queued candidate is not named
        assert await first.resign() is True
        second = await waiting.result()
        assert isinstance(second, Leadership) and second.is_leader
        assert second.fence > first.fence
        now = await a.leader()
        assert now is not None and (now.identity, now.fence) == ("b", second.fence)
        assert not first.is_leader
        assert nothing_waits(r)
        assert await second.resign() is True
        assert await a.leader() is None


async def test_campaigns_with_a_deadline_give_up_while_the_leader_holds_on(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a, election(redis_server, "b") as b:
        leadership = await led(a, wait_ms=0)
        assert await b.campaign(wait_ms=0) is None
        assert await b.campaign(wait_ms=50) is None
        assert nothing_waits(r)  # the last attempt left the queue
        now = await b.leader()
        assert now is not None and (now.identity, now.fence) == ("a", leadership.fence)
        assert leadership.is_leader
        assert await leadership.resign() is True
        # Free again: the next candidate leads at once, with a larger fence.
        after = await led(b, wait_ms=0)
        assert after.fence > leadership.fence
        assert await after.resign() is True


async def test_leader_names_only_a_candidate_whose_lease_the_key_holds(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a, election(redis_server, "b") as b:
        leadership = await led(a)
        assert await b.campaign(wait_ms=0) is None  # refused: never named
        now = await b.leader()
        assert now is not None and now.identity == "a"
        # The key gone under the leader: its record is still there, but names no lease.
        r.delete(KEY)
        assert r.hget(RECORD, "id") == b"a"
        assert await a.leader() is None
        await signalled(leadership.signal)
        assert await b.leader() is None
        got = await led(b, wait_ms=0)
        now = await a.leader()
        assert now is not None and (now.identity, now.fence) == ("b", got.fence)
        assert got.fence > leadership.fence
        assert await got.resign() is True
        assert await leadership.resign() is False
        assert await a.leader() is None


# -- candidates that die -----------------------------------------------------------------------

_CANDIDATE = """
import asyncio, sys
import redis, redis.asyncio
import distlock, distlock.asyncio
url, driver, identity, ttl = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if driver == "sync":
    e = distlock.Election(redis.Redis.from_url(url), "e", identity=identity, ttl_ms=ttl)
    e.campaign()
    print("leading", flush=True)
    import time
    time.sleep(600)
else:
    async def main():
        client = redis.asyncio.Redis.from_url(url)
        e = distlock.asyncio.Election(client, "e", identity=identity, ttl_ms=ttl)
        await e.campaign()
        print("leading", flush=True)
        await asyncio.sleep(600)
    asyncio.run(main())
"""


def doomed_candidate(server: RedisServer, identity: str, ttl_ms: int) -> subprocess.Popen[bytes]:
    """A candidate of the driver under test in a process of its own: it campaigns without
    a deadline and, once it leads, holds on (started at once)."""
    return subprocess.Popen(
        [sys.executable, "-c", _CANDIDATE, server.url, DRIVER, identity, str(ttl_ms)],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        stdout=subprocess.PIPE,
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


async def test_a_dead_leader_is_replaced_after_its_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "live") as live:
        dead = doomed_candidate(redis_server, "doomed", SHORT_TTL)
        try:
            await until(lambda: r.exists(KEY), "the doomed candidate leads")
        finally:
            kill(dead)
        # Written by the grant itself, with the key (the lease may have ended since).
        assert r.hget(RECORD, "id") == b"doomed"
        dead_fence = int(r.hget(RECORD, "fence") or 0)
        # Its lease is not renewed any more: the live candidate leads once it ends.
        leadership = await led(live, wait_ms=10_000)
        assert leadership.fence > dead_fence
        now = await live.leader()
        assert now is not None and (now.identity, now.fence) == ("live", leadership.fence)
        assert await leadership.resign() is True
    assert nothing_waits(r)


async def test_a_dead_waiting_candidate_does_not_stall_the_queue(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The dead candidate is first in line with a minute's TTL; the one behind it is
    served within its 20 s: the dead one's place ends (or the lease handed to it,
    unrenewed) within a few seconds, whatever its TTL."""
    async with election(redis_server, "a") as a, election(redis_server, "b") as b:
        first = await led(a)
        dead = doomed_candidate(redis_server, "doomed", 60_000)
        try:
            await until(lambda: len(queued(r)) == 1, "the doomed candidate queued")
        finally:
            kill(dead)
        waiting = await start_campaign(r, b, wait_ms=20_000)
        assert await first.resign() is True
        second = await waiting.result()
        assert isinstance(second, Leadership) and second.fence > first.fence
        now = await b.leader()
        assert now is not None and (now.identity, now.fence) == ("b", second.fence)
        assert await second.resign() is True
    await until(lambda: nothing_waits(r), "the dead candidate's place gone")


# -- the leadership as a handle ----------------------------------------------------------------


async def test_a_leadership_is_not_extended_by_hand(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a:
        leadership = await led(a, wait_ms=0)
        ttl = r.pttl(KEY)
        with pytest.raises(UsageError, match="renewed for you"):
            await leadership.extend(60_000)
        assert r.pttl(KEY) <= ttl and leadership.is_leader
        assert await leadership.resign() is True


async def test_async_with_a_leadership_resigns_at_its_exit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a:
        leadership = await led(a, wait_ms=0)
        async with leadership as inside:
            assert inside is leadership and inside.is_leader
        assert not leadership.is_leader
        assert r.exists(KEY) == 0 and await a.leader() is None
        assert await leadership.resign() is True
        # And when the block raises: resigned, the error goes on.
        again = await led(a, wait_ms=0)
        with pytest.raises(KeyError):
            async with again:
                raise KeyError("body")
        assert r.exists(KEY) == 0


async def test_async_with_a_lost_leadership_raises_at_its_exit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """As a hold's exit does: a leadership lost inside the block is not resigned quietly."""

    async def lost(leadership: Leadership, *, resign: bool = False, fail: bool = False) -> None:
        async with leadership:
            r.delete(KEY)  # an operator's force-unlock, say
            if resign:
                assert await leadership.resign() is False
            if fail:
                raise KeyError("body")

    async with election(redis_server, "a") as a:
        leadership = await led(a, wait_ms=0)
        with pytest.raises(LockLeaseLostError):
            await lost(leadership)
        assert await leadership.resign() is False
        # Lost and resigned inside the block: the exit raises the loss all the same.
        with pytest.raises(LockLeaseLostError):
            await lost(await led(a, wait_ms=0), resign=True)
        # The block's own exception and a loss: the loss, the block's error its cause.
        with pytest.raises(LockLeaseLostError) as info:
            await lost(await led(a, wait_ms=0), fail=True)
        assert isinstance(info.value.__cause__, KeyError)
        assert r.exists(KEY) == 0 and nothing_waits(r)


async def test_a_second_resign_while_the_first_is_out_returns_what_it_returns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # No renewal while writes are paused: the first is 10 s away.
    async with election(redis_server, "a", heartbeat_ms=10_000) as a:
        leadership = await led(a, wait_ms=0)
        r.client_pause(60_000, all=False)
        try:
            first = spawn(leadership.resign)
            await until(lambda: script_held(r), "the resignation held by the pause")
            second = spawn(leadership.resign)
        finally:
            r.client_unpause()
        assert await first.result() is True
        assert await second.result() is True  # not False while the first was out
        assert await leadership.resign() is True
        assert r.exists(KEY) == 0


async def test_a_lost_lease_turns_is_leader_false_and_fires_the_signal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a:
        leadership = await led(a, wait_ms=0)
        assert not leadership.signal.aborted
        r.delete(KEY)  # the lease taken away, as an operator's deletion would
        await signalled(leadership.signal)
        reason = leadership.signal.reason
        assert reason is not None and reason.reason is LossReason.RENEW_REJECTED
        assert not leadership.is_leader
        assert await leadership.resign() is False
        assert await leadership.resign() is False
        assert await a.leader() is None


# -- run_as_leader ---------------------------------------------------------------------------


async def test_run_as_leader_runs_fn_with_the_fence_and_resigns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    seen: list[tuple[int, bool, str | None]] = []

    async def fn(leadership: Leadership) -> str:
        now = await a.leader()
        seen.append((leadership.fence, leadership.is_leader, None if now is None else now.identity))
        return "done"

    async with election(redis_server, "a") as a:
        assert await a.run_as_leader(fn) == "done"
        [(fence, leading, named)] = seen
        assert fence >= 1 and leading and named == "a"
        assert r.exists(KEY) == 0 and await a.leader() is None


async def test_run_as_leader_campaigns_again_after_a_loss(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    fences: list[int] = []

    async def fn(leadership: Leadership) -> int:
        fences.append(leadership.fence)
        if len(fences) == 1:
            r.delete(KEY)  # deposed
            await signalled(leadership.signal)  # cancelled here under asyncio
            assert not leadership.is_leader
        return leadership.fence

    async with election(redis_server, "a") as a:
        assert await a.run_as_leader(fn) == fences[1]
        assert len(fences) == 2 and fences[1] > fences[0]
        assert r.exists(KEY) == 0


async def test_fn_that_finished_before_its_loss_was_known_is_not_run_again(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """fn returns while its leadership still looks whole; only the resignation finds the
    lease gone (taken away before fn returned: not known to have been exclusive to the
    end).  fn did its work: it is not run a second time, and the loss is raised, as a
    hold raises it, for the caller to reconcile."""
    runs: list[int] = []

    async def fn(leadership: Leadership) -> str:
        runs.append(leadership.fence)
        r.delete(KEY)  # deposed, and no renewal (every 10 s) has told it yet
        return "done"

    async with election(redis_server, "a", heartbeat_ms=10_000) as a:
        with pytest.raises(LockLeaseLostError) as lost:
            await a.run_as_leader(fn)
        assert lost.value.reason is LossReason.RELEASE_REJECTED
        assert len(runs) == 1


async def test_an_exception_of_fn_resigns_and_propagates(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def fn(leadership: Leadership) -> None:
        assert r.exists(KEY) == 1
        raise KeyError("fn")

    async with election(redis_server, "a") as a, election(redis_server, "b") as b:
        with pytest.raises(KeyError):
            await a.run_as_leader(fn)
        assert r.exists(KEY) == 0 and await a.leader() is None
        # Resigned, not left to expire: another candidate leads at once.
        other = await led(b, wait_ms=0)
        assert await other.resign() is True


# -- closing -------------------------------------------------------------------------------


async def nobody(leadership: Leadership) -> None:
    pytest.fail("a closed Election's candidate led")


async def test_closing_refuses_the_campaigns_that_wait(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with election(redis_server, "a") as a:
        leadership = await led(a)
        b = election(redis_server, "b")
        campaign = await start_campaign(r, b)
        before = len(queued(r))
        running = spawn(b.run_as_leader, nobody)
        await until(lambda: len(queued(r)) > before, "run_as_leader queued")
        await b.aclose()
        with pytest.raises(LockClosedError, match="this Election is closed"):
            await campaign.result()
        with pytest.raises(LockClosedError, match="this Election is closed"):
            await running.result()
        assert nothing_waits(r)
        assert r.get(KEY) == leadership.token.encode()  # the leader undisturbed
        assert leadership.is_leader
        assert await leadership.resign() is True
    assert r.keys("election:*") == []


async def test_closing_mid_leadership_fires_the_signal_and_gives_the_key_back(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    a = election(redis_server, "a")
    leadership = await led(a, wait_ms=0)
    await a.aclose()
    await signalled(leadership.signal)
    reason = leadership.signal.reason
    assert reason is not None and reason.reason is LossReason.LOCK_CLOSED
    assert not leadership.is_leader
    assert r.exists(KEY) == 0 and nothing_waits(r)
    assert await leadership.resign() is False
    async with election(redis_server, "b") as b:
        assert await b.leader() is None


async def test_closing_while_run_as_leader_runs_fn(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    entered = Event()

    async def fn(leadership: Leadership) -> None:
        entered.set()
        await signalled(leadership.signal)  # cancelled here under asyncio

    a = election(redis_server, "a")
    running = spawn(a.run_as_leader, fn)
    await entered.wait()
    await a.aclose()
    with pytest.raises(LockLeaseLostError) as lost:
        await running.result()
    assert lost.value.reason is LossReason.LOCK_CLOSED
    assert r.exists(KEY) == 0 and nothing_waits(r)


async def test_a_closed_election_refuses_to_campaign(redis_server: RedisServer) -> None:
    a = election(redis_server, "a")
    await a.aclose()
    with pytest.raises(LockClosedError, match="this Election is closed"):
        await a.campaign(wait_ms=0)
    with pytest.raises(LockClosedError, match="this Election is closed"):
        await a.run_as_leader(nobody)


async def test_a_grant_no_replica_acknowledged_is_raised_not_taken_for_a_refusal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The test's server has no replica: a campaign whose grant must reach one is told so
    (NotReplicatedError, as a Lock's acquire is), whatever its wait, rather than returning
    None as if another candidate led, or campaigning again for ever; the grant is given
    back each time."""
    async with election(redis_server, "a", replicas=1, replica_timeout_ms=50) as a:
        with pytest.raises(NotReplicatedError):
            await a.campaign(wait_ms=0)
        assert r.exists(KEY) == 0 and nothing_waits(r)
        with pytest.raises(NotReplicatedError):
            await a.campaign(wait_ms=TTL)
        assert r.exists(KEY) == 0 and nothing_waits(r)
        with pytest.raises(NotReplicatedError):
            await a.campaign()
        with pytest.raises(NotReplicatedError):
            await a.run_as_leader(nobody)
        assert r.exists(KEY) == 0 and nothing_waits(r)


# -- observe() ---------------------------------------------------------------------------------


@pytest.fixture(params=["notifications", "polling"])
def notifications(request: pytest.FixtureRequest, r: redis.Redis) -> Generator[bool]:
    """Keyspace notifications on the test's server (``Kghx``), or off."""
    on = request.param == "notifications"
    r.config_set("notify-keyspace-events", "Kghx" if on else "")
    yield on
    r.config_set("notify-keyspace-events", "")


class Observer:
    """``election.observe(poll_ms=...)`` iterated concurrently: what it yields, in order,
    each setting an event the test waits for."""

    def __init__(self, candidate: Election, poll_ms: int) -> None:
        self.seen: list[Leader | None] = []
        self._news = Event()
        self.task = spawn(self._observe, candidate, poll_ms)

    async def _observe(self, candidate: Election, poll_ms: int) -> None:
        async for now in candidate.observe(poll_ms=poll_ms):
            self.seen.append(now)
            self._news.set()

    async def next(self, count: int) -> Leader | None:
        """The ``count``-th value yielded (from 1), once it is."""
        while len(self.seen) < count:
            await self._news.wait()
            self._news.clear()
        return self.seen[count - 1]


async def test_observe_yields_the_leader_then_each_change(
    redis_server: RedisServer, r: redis.Redis, notifications: bool
) -> None:
    """With notifications on, observe polls only once a minute: each change here is
    read on Redis's word.  Without, within its 50 ms."""
    poll_ms = 60_000 if notifications else 50
    a, b = election(redis_server, "a"), election(redis_server, "b")
    watcher = election(redis_server, "w")
    observer = Observer(watcher, poll_ms)
    assert await observer.next(1) is None
    first = await led(a, wait_ms=0)
    now = await observer.next(2)
    assert now is not None and (now.identity, now.fence) == ("a", first.fence)
    waiting = await start_campaign(r, b)
    assert await first.resign() is True  # handed to b
    second = await waiting.result()
    now = await observer.next(3)
    assert now is not None and (now.identity, now.fence) == ("b", second.fence)
    assert await second.resign() is True  # nobody waits: nobody leads
    assert await observer.next(4) is None
    third = await led(a, wait_ms=0)
    now = await observer.next(5)
    assert now is not None and (now.identity, now.fence) == ("a", third.fence)
    r.delete(KEY)  # the lease taken away
    assert await observer.next(6) is None
    await watcher.aclose()  # the observer ends, whatever its poll_ms
    await observer.task.result()
    assert len(observer.seen) == 6
    for candidate in (a, b):
        await candidate.aclose()


async def test_an_observer_takes_no_connection_from_a_bounded_pool(
    redis_server: RedisServer, r: redis.Redis, notifications: bool
) -> None:
    """The observer's subscription is on a connection of its own, as a waiter's block is:
    with a pool of one connection, the election's own calls still get it while an
    observer listens (a subscription taken from the pool would hold it for good, and
    they would wait out the pool's timeout)."""
    pool = BlockingConnectionPool.from_url(redis_server.url, max_connections=1, timeout=2)
    client = Redis(connection_pool=pool)
    watcher = Election(client, NAME, identity="w", ttl_ms=TTL, heartbeat_ms=QUICK)
    observer = Observer(watcher, 60_000 if notifications else 50)
    assert await observer.next(1) is None
    leadership = await led(watcher, wait_ms=0)
    now = await observer.next(2)
    assert now is not None and now.fence == leadership.fence
    read = await watcher.leader()
    assert read is not None and read.identity == "w"
    assert await leadership.resign() is True
    assert await observer.next(3) is None
    await watcher.aclose()
    await observer.task.result()
    await client.aclose()
    await pool.disconnect()


@pytest.mark.parametrize("poll_ms", [60_000])
async def test_observe_ends_when_the_election_closes(
    redis_server: RedisServer, r: redis.Redis, notifications: bool, poll_ms: int
) -> None:
    watcher = election(redis_server, "w")
    observer = Observer(watcher, poll_ms)
    assert await observer.next(1) is None
    await watcher.aclose()
    await observer.task.result()  # within the task's bound, not poll_ms's minute
    assert observer.seen == [None]


async def test_observe_ends_quietly_when_the_election_closes_mid_read(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """Closed while its read of who leads is out (held by CLIENT PAUSE WRITE), on the
    client the Election made and closes: the observer ends, as on any close, rather than
    raising the read's ConnectionError."""
    watcher = election(redis_server, "w")
    observer = Observer(watcher, 20)
    assert await observer.next(1) is None
    r.client_pause(60_000, all=False)
    try:
        await until(lambda: script_held(r), "the observer's read held by the pause")
        await watcher.aclose()
    finally:
        r.client_unpause()
    await observer.task.result()
    assert observer.seen == [None]


# -- bad input -------------------------------------------------------------------------------

BAD_NAMES = ["", 5, None, b"e"]
BAD_IDENTITIES = ["", "x" * (MAX_IDENTITY + 1), 5, b"a"]
BAD_WAITS = [-1, 1.5, "10", True]
BAD_POLLS = [0, -1, 1.5, "10", True, 2**31]


async def first_of(observing: AsyncIterator[Leader | None]) -> Leader | None:
    async for now in observing:
        return now
    pytest.fail("observe() yielded nothing")


def scripts_run(r: redis.Redis) -> int:
    sent = calls(r)
    return sum(sent.get(name, 0) for name in ("evalsha", "eval", "blpop", "subscribe"))


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_a_bad_name_is_refused(redis_server: RedisServer, name: Any) -> None:
    with pytest.raises(ValidationError, match="election name"):
        Election(client_for(redis_server), name)


@pytest.mark.parametrize("identity", BAD_IDENTITIES)
async def test_a_bad_identity_is_refused(redis_server: RedisServer, identity: Any) -> None:
    with pytest.raises(ValidationError):
        Election(client_for(redis_server), NAME, identity=identity)


async def test_the_longest_identity_is_taken_and_reported(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    longest = "é" * MAX_IDENTITY
    async with election(redis_server, longest) as a:
        leadership = await led(a, wait_ms=0)
        now = await a.leader()
        assert now is not None and now.identity == longest
        assert await leadership.resign() is True


@pytest.mark.parametrize("wait_ms", BAD_WAITS)
async def test_a_bad_wait_is_refused_before_anything_is_sent(
    redis_server: RedisServer, r: redis.Redis, wait_ms: Any
) -> None:
    async with election(redis_server, "a") as a:
        before = scripts_run(r)
        with pytest.raises(ValidationError):
            await a.campaign(wait_ms=wait_ms)
        assert scripts_run(r) == before
        assert r.exists(KEY) == 0 and nothing_waits(r)


@pytest.mark.parametrize("poll_ms", BAD_POLLS)
async def test_a_bad_poll_is_refused_before_anything_is_sent(
    redis_server: RedisServer, r: redis.Redis, poll_ms: Any
) -> None:
    async with election(redis_server, "a") as a:
        before = scripts_run(r)
        with pytest.raises(ValidationError):
            await first_of(a.observe(poll_ms=poll_ms))
        assert scripts_run(r) == before


# unasync: begin async only
# -- cancellation at every await of a campaign (asyncio only: a thread cannot be cancelled) --
#
# A campaign is parked at one await point (writes paused with CLIENT PAUSE WRITE, which
# holds a script unexecuted; or blocked in the queue), cancelled there, and Redis let go on;
# then nothing of it is left.  The clients have no socket timeout (see
# tests/drivers/test_lock_asyncio.py: with one, redis-py on Python 3.11 may drop a cancel
# that arrives as a parked script's reply comes in).


def cancellable(server: RedisServer, identity: str) -> Election:
    return Election(
        client_for(server, socket_timeout=None), NAME, identity=identity, ttl_ms=TTL,
        heartbeat_ms=QUICK,
    )


async def parked_scripts(r: redis.Redis, count: int) -> None:
    def parked() -> bool:
        held = [
            c for c in r.client_list() if c.get("cmd") in ("evalsha", "eval") and "b" in c["flags"]
        ]
        return len(held) >= count

    await until(parked, "a script held by the pause")


async def closed(candidate: Election) -> None:
    """Close the candidate and its client (what lets a cut-short withdrawal finish)."""
    client = await candidate.client()
    await candidate.aclose()
    await client.aclose()


async def test_a_campaign_cancelled_in_its_attempt_leaves_nothing(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    a = cancellable(redis_server, "a")
    r.client_pause(60_000, all=False)
    try:
        task = asyncio.get_running_loop().create_task(a.campaign())
        await parked_scripts(r, 1)
        task.cancel()
        await asyncio.sleep(0)  # the shielded clean-up is sent
    finally:
        r.client_unpause()
    with pytest.raises(asyncio.CancelledError):
        await task
    await closed(a)
    assert r.exists(KEY) == 0 and nothing_waits(r)


async def test_a_campaign_cancelled_in_the_queue_withdraws_its_place(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    a, b, c = (cancellable(redis_server, i) for i in "abc")
    leadership = await led(a)
    cancelled = await start_campaign(r, b)
    [token] = queued(r)
    after = await start_campaign(r, c)
    cancelled.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled.task
    # Its place is gone before the cancellation left the call.
    assert token not in queued(r) and len(queued(r)) == 1
    assert r.hget(PLACES, token) is None and r.hget(PLACES, "#" + token) is None
    assert r.exists(WAKE + token) == 0
    assert await leadership.resign() is True
    got = await after.result()  # handed to c, not to the cancelled b
    assert isinstance(got, Leadership)
    now = await a.leader()
    assert now is not None and now.identity == "c"
    assert await got.resign() is True
    for candidate in (a, b, c):
        await closed(candidate)
    assert r.exists(KEY) == 0 and nothing_waits(r)


async def test_a_campaign_cancelled_in_its_withdrawal_still_withdraws(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """Cancelled in the queue, the campaign withdraws; cancelled again while that
    withdrawal is out, the withdrawal still runs to its end."""
    # No renewal of the leader's while writes are paused: its first is 10 s away.
    a = Election(client_for(redis_server, socket_timeout=None), NAME, identity="a",
                 ttl_ms=TTL, heartbeat_ms=10_000)
    b = cancellable(redis_server, "b")
    leadership = await led(a)
    waiting = await start_campaign(r, b)
    r.client_pause(60_000, all=False)
    try:
        waiting.task.cancel()
        await parked_scripts(r, 1)  # the withdrawal, held by the pause
        assert not waiting.done()
        waiting.task.cancel()
        await asyncio.sleep(0)
    finally:
        r.client_unpause()
    with pytest.raises(asyncio.CancelledError):
        await waiting.task
    await closed(b)  # lets a withdrawal cut short finish
    assert nothing_waits(r)
    assert r.get(KEY) == leadership.token.encode()
    assert await leadership.resign() is True
    await closed(a)
    assert r.exists(KEY) == 0


async def test_a_resignation_cancelled_in_flight_still_resigns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    a = cancellable(redis_server, "a")
    leadership = await led(a, wait_ms=0)
    r.client_pause(60_000, all=False)
    try:
        resigning = asyncio.get_running_loop().create_task(leadership.resign())
        await parked_scripts(r, 1)
        resigning.cancel()
        with pytest.raises(asyncio.CancelledError):
            await resigning
        assert r.exists(KEY) == 1  # not resigned yet...
    finally:
        r.client_unpause()
    await closed(a)
    assert r.exists(KEY) == 0  # ...and it still ran to the end


async def test_a_loss_cancels_run_as_leader_s_fn_and_it_runs_again(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    reached: list[str] = []

    async def fn(leadership: Leadership) -> str:
        if not reached:
            r.delete(KEY)
            try:
                await asyncio.sleep(60)  # cancelled at the next renewal
            except asyncio.CancelledError:
                reached.append("cancelled")
                raise
        reached.append("ran")
        return "done"

    async with cancellable(redis_server, "a") as a:
        assert await a.run_as_leader(fn) == "done"
        await (await a.client()).aclose()
    assert reached == ["cancelled", "ran"]
    assert r.exists(KEY) == 0


async def test_a_cancelled_observer_closes_its_subscription(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """Cancelled while it waits for news, an observer's generator closes its
    subscription's connection (its own, outside the client's pool) before the
    cancellation leaves it."""
    r.config_set("notify-keyspace-events", "Kghx")
    try:
        watcher = cancellable(redis_server, "w")
        before = {c["id"] for c in r.client_list()}
        observer = Observer(watcher, 60_000)
        assert await observer.next(1) is None
        await until(
            lambda: any(c["cmd"] == "subscribe" for c in r.client_list() if c["id"] not in before),
            "the observer subscribed",
        )
        observer.task.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await observer.task.task
        subscribed = [c for c in r.client_list() if int(c["sub"]) > 0]
        assert subscribed == []
        await closed(watcher)
    finally:
        r.config_set("notify-keyspace-events", "")


async def test_cancelling_run_as_leader_resigns(redis_server: RedisServer, r: redis.Redis) -> None:
    entered = asyncio.Event()

    async def fn(leadership: Leadership) -> None:
        entered.set()
        await asyncio.Event().wait()

    a = cancellable(redis_server, "a")
    task = asyncio.get_running_loop().create_task(a.run_as_leader(fn))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert r.exists(KEY) == 0
    await closed(a)
# unasync: end
