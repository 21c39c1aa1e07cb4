# Generated from tests/drivers/_async/test_election.py by tools/unasync.py: do not edit.
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

import os
import signal
import subprocess
import sys
from collections.abc import Generator, Iterator
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
from distlock import Election, Leadership
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


def start_campaign(r: redis.Redis, candidate: Election, **kwargs: Any) -> Task[Any]:
    """Start ``candidate.campaign(**kwargs)`` concurrently and return once its place is in
    the queue; a campaign that ends first is reported at once."""
    before = len(queued(r))
    task = spawn(candidate.campaign, **kwargs)
    until(lambda: len(queued(r)) > before or task.done(), "a candidate queued")
    if task.done():
        pytest.fail(f"returned without waiting: {task.result()!r}")
    return task


def script_held(r: redis.Redis) -> bool:
    """Whether a script call is held unexecuted by CLIENT PAUSE WRITE."""
    return any(
        c.get("cmd") in ("evalsha", "eval") and "b" in c["flags"] for c in r.client_list()
    )


def led(candidate: Election, **kwargs: Any) -> Leadership:
    leadership = candidate.campaign(**kwargs)
    assert isinstance(leadership, Leadership)
    return leadership


# -- campaign, resign, leader() --------------------------------------------------------------


def test_a_campaign_leads_until_it_resigns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a:
        assert a.leader() is None
        leadership = led(a, wait_ms=0)
        assert leadership.is_leader and leadership.held
        assert leadership.identity == "a" and leadership.key == KEY
        assert r.get(KEY) == leadership.token.encode()
        now = a.leader()
        assert isinstance(now, Leader)
        assert (now.identity, now.fence) == ("a", leadership.fence)
        assert 0 < now.ttl_ms <= TTL
        assert leadership.resign() is True
        assert leadership.resign() is True  # twice: what the first one said
        assert not leadership.is_leader
        assert a.leader() is None
        assert r.exists(KEY) == 0
    assert nothing_waits(r)


def test_a_waiting_candidate_is_handed_the_lease_on_resign(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a, election(redis_server, "b") as b:
        first = led(a)
        waiting = start_campaign(r, b)  # no deadline
        now = b.leader()
        assert now is not None and now.identity == "a"  # a queued candidate is not named
        assert first.resign() is True
        second = waiting.result()
        assert isinstance(second, Leadership) and second.is_leader
        assert second.fence > first.fence
        now = a.leader()
        assert now is not None and (now.identity, now.fence) == ("b", second.fence)
        assert not first.is_leader
        assert nothing_waits(r)
        assert second.resign() is True
        assert a.leader() is None


def test_campaigns_with_a_deadline_give_up_while_the_leader_holds_on(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a, election(redis_server, "b") as b:
        leadership = led(a, wait_ms=0)
        assert b.campaign(wait_ms=0) is None
        assert b.campaign(wait_ms=50) is None
        assert nothing_waits(r)  # the last attempt left the queue
        now = b.leader()
        assert now is not None and (now.identity, now.fence) == ("a", leadership.fence)
        assert leadership.is_leader
        assert leadership.resign() is True
        # Free again: the next candidate leads at once, with a larger fence.
        after = led(b, wait_ms=0)
        assert after.fence > leadership.fence
        assert after.resign() is True


def test_leader_names_only_a_candidate_whose_lease_the_key_holds(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a, election(redis_server, "b") as b:
        leadership = led(a)
        assert b.campaign(wait_ms=0) is None  # refused: never named
        now = b.leader()
        assert now is not None and now.identity == "a"
        # The key gone under the leader: its record is still there, but names no lease.
        r.delete(KEY)
        assert r.hget(RECORD, "id") == b"a"
        assert a.leader() is None
        signalled(leadership.signal)
        assert b.leader() is None
        got = led(b, wait_ms=0)
        now = a.leader()
        assert now is not None and (now.identity, now.fence) == ("b", got.fence)
        assert got.fence > leadership.fence
        assert got.resign() is True
        assert leadership.resign() is False
        assert a.leader() is None


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
    def main():
        client = redis.asyncio.Redis.from_url(url)
        e = distlock.asyncio.Election(client, "e", identity=identity, ttl_ms=ttl)
        e.campaign()
        print("leading", flush=True)
        asyncio.sleep(600)
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


def test_a_dead_leader_is_replaced_after_its_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "live") as live:
        dead = doomed_candidate(redis_server, "doomed", SHORT_TTL)
        try:
            until(lambda: r.exists(KEY), "the doomed candidate leads")
        finally:
            kill(dead)
        # Written by the grant itself, with the key (the lease may have ended since).
        assert r.hget(RECORD, "id") == b"doomed"
        dead_fence = int(r.hget(RECORD, "fence") or 0)
        # Its lease is not renewed any more: the live candidate leads once it ends.
        leadership = led(live, wait_ms=10_000)
        assert leadership.fence > dead_fence
        now = live.leader()
        assert now is not None and (now.identity, now.fence) == ("live", leadership.fence)
        assert leadership.resign() is True
    assert nothing_waits(r)


def test_a_dead_waiting_candidate_does_not_stall_the_queue(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The dead candidate is first in line with a minute's TTL; the one behind it is
    served within its 20 s: the dead one's place ends (or the lease handed to it,
    unrenewed) within a few seconds, whatever its TTL."""
    with election(redis_server, "a") as a, election(redis_server, "b") as b:
        first = led(a)
        dead = doomed_candidate(redis_server, "doomed", 60_000)
        try:
            until(lambda: len(queued(r)) == 1, "the doomed candidate queued")
        finally:
            kill(dead)
        waiting = start_campaign(r, b, wait_ms=20_000)
        assert first.resign() is True
        second = waiting.result()
        assert isinstance(second, Leadership) and second.fence > first.fence
        now = b.leader()
        assert now is not None and (now.identity, now.fence) == ("b", second.fence)
        assert second.resign() is True
    until(lambda: nothing_waits(r), "the dead candidate's place gone")


# -- the leadership as a handle ----------------------------------------------------------------


def test_a_leadership_is_not_extended_by_hand(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a:
        leadership = led(a, wait_ms=0)
        ttl = r.pttl(KEY)
        with pytest.raises(UsageError, match="renewed for you"):
            leadership.extend(60_000)
        assert r.pttl(KEY) <= ttl and leadership.is_leader
        assert leadership.resign() is True


def test_async_with_a_leadership_resigns_at_its_exit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a:
        leadership = led(a, wait_ms=0)
        with leadership as inside:
            assert inside is leadership and inside.is_leader
        assert not leadership.is_leader
        assert r.exists(KEY) == 0 and a.leader() is None
        assert leadership.resign() is True
        # And when the block raises: resigned, the error goes on.
        again = led(a, wait_ms=0)
        with pytest.raises(KeyError):
            with again:
                raise KeyError("body")
        assert r.exists(KEY) == 0


def test_async_with_a_lost_leadership_raises_at_its_exit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """As a hold's exit does: a leadership lost inside the block is not resigned quietly."""

    def lost(leadership: Leadership, *, resign: bool = False, fail: bool = False) -> None:
        with leadership:
            r.delete(KEY)  # an operator's force-unlock, say
            if resign:
                assert leadership.resign() is False
            if fail:
                raise KeyError("body")

    with election(redis_server, "a") as a:
        leadership = led(a, wait_ms=0)
        with pytest.raises(LockLeaseLostError):
            lost(leadership)
        assert leadership.resign() is False
        # Lost and resigned inside the block: the exit raises the loss all the same.
        with pytest.raises(LockLeaseLostError):
            lost(led(a, wait_ms=0), resign=True)
        # The block's own exception and a loss: the loss, the block's error its cause.
        with pytest.raises(LockLeaseLostError) as info:
            lost(led(a, wait_ms=0), fail=True)
        assert isinstance(info.value.__cause__, KeyError)
        assert r.exists(KEY) == 0 and nothing_waits(r)


def test_a_second_resign_while_the_first_is_out_returns_what_it_returns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # No renewal while writes are paused: the first is 10 s away.
    with election(redis_server, "a", heartbeat_ms=10_000) as a:
        leadership = led(a, wait_ms=0)
        r.client_pause(60_000, all=False)
        try:
            first = spawn(leadership.resign)
            until(lambda: script_held(r), "the resignation held by the pause")
            second = spawn(leadership.resign)
        finally:
            r.client_unpause()
        assert first.result() is True
        assert second.result() is True  # not False while the first was out
        assert leadership.resign() is True
        assert r.exists(KEY) == 0


def test_a_lost_lease_turns_is_leader_false_and_fires_the_signal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a:
        leadership = led(a, wait_ms=0)
        assert not leadership.signal.aborted
        r.delete(KEY)  # the lease taken away, as an operator's deletion would
        signalled(leadership.signal)
        reason = leadership.signal.reason
        assert reason is not None and reason.reason is LossReason.RENEW_REJECTED
        assert not leadership.is_leader
        assert leadership.resign() is False
        assert leadership.resign() is False
        assert a.leader() is None


# -- run_as_leader ---------------------------------------------------------------------------


def test_run_as_leader_runs_fn_with_the_fence_and_resigns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    seen: list[tuple[int, bool, str | None]] = []

    def fn(leadership: Leadership) -> str:
        now = a.leader()
        seen.append((leadership.fence, leadership.is_leader, None if now is None else now.identity))
        return "done"

    with election(redis_server, "a") as a:
        assert a.run_as_leader(fn) == "done"
        [(fence, leading, named)] = seen
        assert fence >= 1 and leading and named == "a"
        assert r.exists(KEY) == 0 and a.leader() is None


def test_run_as_leader_campaigns_again_after_a_loss(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    fences: list[int] = []

    def fn(leadership: Leadership) -> int:
        fences.append(leadership.fence)
        if len(fences) == 1:
            r.delete(KEY)  # deposed
            signalled(leadership.signal)  # cancelled here under asyncio
            assert not leadership.is_leader
        return leadership.fence

    with election(redis_server, "a") as a:
        assert a.run_as_leader(fn) == fences[1]
        assert len(fences) == 2 and fences[1] > fences[0]
        assert r.exists(KEY) == 0


def test_fn_that_finished_before_its_loss_was_known_is_not_run_again(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """fn returns while its leadership still looks whole; only the resignation finds the
    lease gone (taken away before fn returned: not known to have been exclusive to the
    end).  fn did its work: it is not run a second time, and the loss is raised, as a
    hold raises it, for the caller to reconcile."""
    runs: list[int] = []

    def fn(leadership: Leadership) -> str:
        runs.append(leadership.fence)
        r.delete(KEY)  # deposed, and no renewal (every 10 s) has told it yet
        return "done"

    with election(redis_server, "a", heartbeat_ms=10_000) as a:
        with pytest.raises(LockLeaseLostError) as lost:
            a.run_as_leader(fn)
        assert lost.value.reason is LossReason.RELEASE_REJECTED
        assert len(runs) == 1


def test_an_exception_of_fn_resigns_and_propagates(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def fn(leadership: Leadership) -> None:
        assert r.exists(KEY) == 1
        raise KeyError("fn")

    with election(redis_server, "a") as a, election(redis_server, "b") as b:
        with pytest.raises(KeyError):
            a.run_as_leader(fn)
        assert r.exists(KEY) == 0 and a.leader() is None
        # Resigned, not left to expire: another candidate leads at once.
        other = led(b, wait_ms=0)
        assert other.resign() is True


# -- closing -------------------------------------------------------------------------------


def nobody(leadership: Leadership) -> None:
    pytest.fail("a closed Election's candidate led")


def test_closing_refuses_the_campaigns_that_wait(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with election(redis_server, "a") as a:
        leadership = led(a)
        b = election(redis_server, "b")
        campaign = start_campaign(r, b)
        before = len(queued(r))
        running = spawn(b.run_as_leader, nobody)
        until(lambda: len(queued(r)) > before, "run_as_leader queued")
        b.close()
        with pytest.raises(LockClosedError, match="this Election is closed"):
            campaign.result()
        with pytest.raises(LockClosedError, match="this Election is closed"):
            running.result()
        assert nothing_waits(r)
        assert r.get(KEY) == leadership.token.encode()  # the leader undisturbed
        assert leadership.is_leader
        assert leadership.resign() is True
    assert r.keys("election:*") == []


def test_closing_mid_leadership_fires_the_signal_and_gives_the_key_back(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    a = election(redis_server, "a")
    leadership = led(a, wait_ms=0)
    a.close()
    signalled(leadership.signal)
    reason = leadership.signal.reason
    assert reason is not None and reason.reason is LossReason.LOCK_CLOSED
    assert not leadership.is_leader
    assert r.exists(KEY) == 0 and nothing_waits(r)
    assert leadership.resign() is False
    with election(redis_server, "b") as b:
        assert b.leader() is None


def test_closing_while_run_as_leader_runs_fn(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    entered = Event()

    def fn(leadership: Leadership) -> None:
        entered.set()
        signalled(leadership.signal)  # cancelled here under asyncio

    a = election(redis_server, "a")
    running = spawn(a.run_as_leader, fn)
    entered.wait()
    a.close()
    with pytest.raises(LockLeaseLostError) as lost:
        running.result()
    assert lost.value.reason is LossReason.LOCK_CLOSED
    assert r.exists(KEY) == 0 and nothing_waits(r)


def test_a_closed_election_refuses_to_campaign(redis_server: RedisServer) -> None:
    a = election(redis_server, "a")
    a.close()
    with pytest.raises(LockClosedError, match="this Election is closed"):
        a.campaign(wait_ms=0)
    with pytest.raises(LockClosedError, match="this Election is closed"):
        a.run_as_leader(nobody)


def test_a_grant_no_replica_acknowledged_is_raised_not_taken_for_a_refusal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The test's server has no replica: a campaign whose grant must reach one is told so
    (NotReplicatedError, as a Lock's acquire is), whatever its wait, rather than returning
    None as if another candidate led, or campaigning again for ever; the grant is given
    back each time."""
    with election(redis_server, "a", replicas=1, replica_timeout_ms=50) as a:
        with pytest.raises(NotReplicatedError):
            a.campaign(wait_ms=0)
        assert r.exists(KEY) == 0 and nothing_waits(r)
        with pytest.raises(NotReplicatedError):
            a.campaign(wait_ms=TTL)
        assert r.exists(KEY) == 0 and nothing_waits(r)
        with pytest.raises(NotReplicatedError):
            a.campaign()
        with pytest.raises(NotReplicatedError):
            a.run_as_leader(nobody)
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

    def _observe(self, candidate: Election, poll_ms: int) -> None:
        for now in candidate.observe(poll_ms=poll_ms):
            self.seen.append(now)
            self._news.set()

    def next(self, count: int) -> Leader | None:
        """The ``count``-th value yielded (from 1), once it is."""
        while len(self.seen) < count:
            self._news.wait()
            self._news.clear()
        return self.seen[count - 1]


def test_observe_yields_the_leader_then_each_change(
    redis_server: RedisServer, r: redis.Redis, notifications: bool
) -> None:
    """With notifications on, observe polls only once a minute: each change here is
    read on Redis's word.  Without, within its 50 ms."""
    poll_ms = 60_000 if notifications else 50
    a, b = election(redis_server, "a"), election(redis_server, "b")
    watcher = election(redis_server, "w")
    observer = Observer(watcher, poll_ms)
    assert observer.next(1) is None
    first = led(a, wait_ms=0)
    now = observer.next(2)
    assert now is not None and (now.identity, now.fence) == ("a", first.fence)
    waiting = start_campaign(r, b)
    assert first.resign() is True  # handed to b
    second = waiting.result()
    now = observer.next(3)
    assert now is not None and (now.identity, now.fence) == ("b", second.fence)
    assert second.resign() is True  # nobody waits: nobody leads
    assert observer.next(4) is None
    third = led(a, wait_ms=0)
    now = observer.next(5)
    assert now is not None and (now.identity, now.fence) == ("a", third.fence)
    r.delete(KEY)  # the lease taken away
    assert observer.next(6) is None
    watcher.close()  # the observer ends, whatever its poll_ms
    observer.task.result()
    assert len(observer.seen) == 6
    for candidate in (a, b):
        candidate.close()


def test_an_observer_takes_no_connection_from_a_bounded_pool(
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
    assert observer.next(1) is None
    leadership = led(watcher, wait_ms=0)
    now = observer.next(2)
    assert now is not None and now.fence == leadership.fence
    read = watcher.leader()
    assert read is not None and read.identity == "w"
    assert leadership.resign() is True
    assert observer.next(3) is None
    watcher.close()
    observer.task.result()
    client.close()
    pool.disconnect()


@pytest.mark.parametrize("poll_ms", [60_000])
def test_observe_ends_when_the_election_closes(
    redis_server: RedisServer, r: redis.Redis, notifications: bool, poll_ms: int
) -> None:
    watcher = election(redis_server, "w")
    observer = Observer(watcher, poll_ms)
    assert observer.next(1) is None
    watcher.close()
    observer.task.result()  # within the task's bound, not poll_ms's minute
    assert observer.seen == [None]


def test_observe_ends_quietly_when_the_election_closes_mid_read(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """Closed while its read of who leads is out (held by CLIENT PAUSE WRITE), on the
    client the Election made and closes: the observer ends, as on any close, rather than
    raising the read's ConnectionError."""
    watcher = election(redis_server, "w")
    observer = Observer(watcher, 20)
    assert observer.next(1) is None
    r.client_pause(60_000, all=False)
    try:
        until(lambda: script_held(r), "the observer's read held by the pause")
        watcher.close()
    finally:
        r.client_unpause()
    observer.task.result()
    assert observer.seen == [None]


# -- bad input -------------------------------------------------------------------------------

BAD_NAMES = ["", 5, None, b"e"]
BAD_IDENTITIES = ["", "x" * (MAX_IDENTITY + 1), 5, b"a"]
BAD_WAITS = [-1, 1.5, "10", True]
BAD_POLLS = [0, -1, 1.5, "10", True, 2**31]


def first_of(observing: Iterator[Leader | None]) -> Leader | None:
    for now in observing:
        return now
    pytest.fail("observe() yielded nothing")


def scripts_run(r: redis.Redis) -> int:
    sent = calls(r)
    return sum(sent.get(name, 0) for name in ("evalsha", "eval", "blpop", "subscribe"))


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_refused(redis_server: RedisServer, name: Any) -> None:
    with pytest.raises(ValidationError, match="election name"):
        Election(client_for(redis_server), name)


@pytest.mark.parametrize("identity", BAD_IDENTITIES)
def test_a_bad_identity_is_refused(redis_server: RedisServer, identity: Any) -> None:
    with pytest.raises(ValidationError):
        Election(client_for(redis_server), NAME, identity=identity)


def test_the_longest_identity_is_taken_and_reported(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    longest = "é" * MAX_IDENTITY
    with election(redis_server, longest) as a:
        leadership = led(a, wait_ms=0)
        now = a.leader()
        assert now is not None and now.identity == longest
        assert leadership.resign() is True


@pytest.mark.parametrize("wait_ms", BAD_WAITS)
def test_a_bad_wait_is_refused_before_anything_is_sent(
    redis_server: RedisServer, r: redis.Redis, wait_ms: Any
) -> None:
    with election(redis_server, "a") as a:
        before = scripts_run(r)
        with pytest.raises(ValidationError):
            a.campaign(wait_ms=wait_ms)
        assert scripts_run(r) == before
        assert r.exists(KEY) == 0 and nothing_waits(r)


@pytest.mark.parametrize("poll_ms", BAD_POLLS)
def test_a_bad_poll_is_refused_before_anything_is_sent(
    redis_server: RedisServer, r: redis.Redis, poll_ms: Any
) -> None:
    with election(redis_server, "a") as a:
        before = scripts_run(r)
        with pytest.raises(ValidationError):
            first_of(a.observe(poll_ms=poll_ms))
        assert scripts_run(r) == before


