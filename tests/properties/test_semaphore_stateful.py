"""Permits of one semaphore id taken, renewed, released and abandoned by several clients,
on a real Redis, checked step by step against a model of the permits and their expiry.

Clients: two threads sharing one sync ``Semaphore``, a third thread with a second
``Semaphore`` object (whose limit is, in some examples, one more than the others': each
acquire counts the live permits against its caller's own limit), and a task on an event
loop thread with an asyncio ``Semaphore``.  Every call runs on its client's own thread or
task.  Permits come from ``acquire`` (not renewed in the background): a client renews one
with ``extend``, gives it back with ``release``, or dies: it forgets its permits, never
renewing or releasing them again, and they must be reclaimed after their own TTL however
often the others renew theirs.  A rule lets Redis's clock pass the earliest short expiry,
and one has every client ask for a short permit in turn, once per example (a crowd: more
asks than the smallest limit, so every run meets refusals, whatever else it draws).

Every rule is always drawn and does nothing where it does not apply (no preconditions):
which rules apply depends on Redis's clock, and Hypothesis must draw the same way when it
replays an example.

A permit of the short TTL whose grant arrives after the lease it granted (a round trip
slower than that TTL) is refused to the caller with ``LockLeaseLostError`` and released;
the model then waits until it would have expired anyway.

Time is Redis's: each step reads ``TIME`` before and after its call, so a permit's expiry
instant is known to lie in ``[before + ttl, after + ttl]``, and a permit is live for the
step (it counts, it renews, it releases) when its earliest instant is after the step, and
expired when its latest instant is before it.  A permit whose instant falls inside a step
(a loaded machine's slow step) may go either way; the model then waits on Redis's clock
until it has certainly expired.  So no outcome depends on how fast the machine is.

Checked after every step, in one MULTI with Redis's ``TIME``: every permit the model has
live is in the key with a score inside its bounds, every live member is a permit of the
model's, never more live members than the largest limit, a released permit is gone, and
the key expires exactly at its latest permit's instant (so it is gone with its last
permit).  And over each example: never more than the largest limit of the permits that
were released successfully (held from the grant to the release) held at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
import redis
import redis.asyncio as aredis
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError
from tests.properties import profiles
from tests.properties.seen import Seen
from tests.properties.workers import LoopThread, TaskWorker, ThreadWorker
from tests.redis_server import RedisServer

PREFIX: Final = "ss"
KEY: Final = "ss:k"
#: A permit that never runs out within an example.
LONG: Final = 600_000
#: A permit whose expiry an example waits for (on Redis's clock): short to keep the waits
#: short, never a deadline the machine must meet.
SHORT: Final = 300
TTLS: Final = {"long": LONG, "short": SHORT}
CLIENTS: Final = ("t1", "t2", "other-object", "task")
#: What the runs did, for the summary line: examples, and steps by what they found.
SEEN: Final = Seen()


@dataclass
class Permit:
    """A permit in the model: its handle and the bounds of its expiry instant (Redis ms)."""

    client: str
    handle: Any
    lo: int
    hi: int
    ttl: int
    #: The step of its grant, for the history of successes.
    since: int
    #: Its expiry instant has certainly passed (Redis's clock read after ``hi``).
    expired: bool = False
    #: Its client died: nobody will renew or release it.
    dead: bool = False


class Client:
    """One client of the semaphore: how it calls, and the permits it holds."""

    def __init__(
        self,
        name: str,
        limit: int,
        call: Callable[[Callable[[], Any]], Any],
        acquire: Callable[[int], Any],
    ) -> None:
        self.name = name
        self.limit = limit
        self.call = call
        self.acquire = acquire
        self.permits: list[Permit] = []


def _on_thread(worker: ThreadWorker) -> Callable[[Callable[[], Any]], Any]:
    return worker.call


def _in_task(worker: TaskWorker) -> Callable[[Callable[[], Any]], Any]:
    def call(fn: Callable[[], Any]) -> Any:
        async def run() -> Any:
            result = fn()
            return await result if isinstance(result, Awaitable) else result

        return worker.call(run)

    return call


class SemaphoreMachine(RuleBasedStateMachine):
    server: RedisServer
    loop: LoopThread

    @initialize(limit=st.integers(1, 3), more=st.booleans(), corpse=st.booleans())
    def start(self, limit: int, more: bool, corpse: bool) -> None:
        """``corpse``: the example begins with a short permit whose client just died, so
        that most examples see a dead permit count against the limit, then go."""
        port = self.server.port
        SEEN.saw("examples")
        if more:
            SEEN.saw("examples with two limits")
        self.admin = redis.Redis(port=port)
        self.admin.delete(KEY)
        self.step = 0
        self.sync_a = distlock.Semaphore(redis.Redis(port=port), prefix=PREFIX, limit=limit)
        self.sync_b = distlock.Semaphore(
            redis.Redis(port=port), prefix=PREFIX, limit=limit + more
        )
        self.aio = distlock.asyncio.Semaphore(aredis.Redis(port=port), prefix=PREFIX, limit=limit)
        self.t1, self.t2, self.t3 = ThreadWorker(), ThreadWorker(), ThreadWorker()
        self.task = TaskWorker(self.loop.loop)
        self.loop.run(self.task.start())

        def sync(worker: ThreadWorker, sem: distlock.Semaphore) -> tuple[Any, Any]:
            call = _on_thread(worker)
            return call, lambda ttl: call(lambda: sem.acquire("k", ttl_ms=ttl))

        def aio(worker: TaskWorker) -> tuple[Any, Any]:
            call = _in_task(worker)
            return call, lambda ttl: call(lambda: self.aio.acquire("k", ttl_ms=ttl))

        made = {
            "t1": (limit, *sync(self.t1, self.sync_a)),
            "t2": (limit, *sync(self.t2, self.sync_a)),
            "other-object": (limit + more, *sync(self.t3, self.sync_b)),
            "task": (limit, *aio(self.task)),
        }
        self.clients = {name: Client(name, *made[name]) for name in CLIENTS}
        self.largest = limit + more
        #: Every permit of the model not yet released (dead ones included).
        self.permits: list[Permit] = []
        #: Tokens released while live: never in the key again.
        self.released: set[str] = set()
        #: Grant and release steps of the permits released while live.
        self.successes: list[tuple[int, int]] = []
        self.crowded = False
        if corpse:
            self.acquire("t2", "short")
            self.die(1)

    # -- Redis's clock --------------------------------------------------------------------

    def now(self) -> int:
        seconds, micros = self.admin.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def expire(self, at: int) -> None:
        """Redis's clock read ``at``: every permit whose latest instant is past has expired."""
        for p in self.permits:
            if not p.expired and p.hi <= at:
                p.expired = True

    def wait_out(self, permits: list[Permit]) -> None:
        """Wait until Redis's clock is past the latest instant of each of ``permits``."""
        if not permits:
            return
        until = max(p.hi for p in permits)
        while (now := self.now()) < until + 1:
            time.sleep((until + 1 - now) / 1000)
        self.expire(self.now())

    def timed(self, client: Client, fn: Callable[[], Any]) -> tuple[int, Any, int]:
        self.step += 1
        before = self.now()
        self.expire(before)
        result = client.call(fn)
        return before, result, self.now()

    @staticmethod
    def live(p: Permit, after: int) -> bool:
        """Certainly live throughout a step that ended at ``after``."""
        return not p.expired and p.lo > after

    # -- rules ----------------------------------------------------------------------------

    @rule(name=st.sampled_from(CLIENTS), ttl=st.sampled_from(sorted(TTLS)))
    def acquire(self, name: str, ttl: str) -> None:
        client = self.clients[name]
        ms = TTLS[ttl]
        self.step += 1
        before = self.now()
        self.expire(before)
        try:
            handle = client.acquire(ms)
        except LockLeaseLostError:
            # The grant arrived after the short lease it granted (a slow round trip on a
            # loaded machine): no permit, and the client released it.  Wait until it
            # would have expired in any case, so that nothing of it is left to count.
            ghost = Permit(name, None, before + ms, self.now() + ms, ms, self.step, dead=True)
            self.wait_out([ghost])
            SEEN.saw("grant arrived after its own lease")
            return
        after = self.now()
        counted = [p for p in self.permits if not p.expired]
        live = [p for p in counted if self.live(p, after)]
        unsure = [p for p in counted if not self.live(p, after)]
        if handle is None:
            assert len(live) + len(unsure) >= client.limit, (
                f"{name} refused with {len(live)} live permits (+{len(unsure)} expiring) "
                f"and limit {client.limit}"
            )
            SEEN.saw("refused")
            if any(p.dead for p in live):
                SEEN.saw("refused while a dead client's permit counted")
        else:
            assert len(live) < client.limit, (
                f"{name} granted with {len(live)} live permits and limit {client.limit}"
            )
            assert handle.key == KEY and handle.held
            # Dead clients' expired permits are reclaimed: the model forgets them, and
            # notes when the grant needed one's place.
            in_place = [p for p in self.permits if p.expired and p.dead]
            if in_place and len(live) + len(in_place) >= client.limit:
                SEEN.saw("granted in place of a dead client's expired permit")
            self.permits = [p for p in self.permits if p not in in_place]
            if len(live) >= self.clients["t1"].limit:
                SEEN.saw("granted beyond another client's limit")
            permit = Permit(name, handle, before + ms, after + ms, ms, self.step)
            self.permits.append(permit)
            client.permits.append(permit)
            SEEN.saw("granted")
        # A permit whose instant fell inside the step: wait until it certainly passed.
        self.wait_out(unsure)

    @rule()
    def crowd(self) -> None:
        """Once per example, every client asks for a short permit, one after another:
        more asks than the smallest limit, so a run meets the limit's edge (a refusal) whatever
        else its examples draw.  Short, and once: the crowd's permits expire within the
        example, and the rest of it is drawn as it would be without one."""
        if self.crowded:
            return
        self.crowded = True
        for name in CLIENTS:
            self.acquire(name, "short")
        SEEN.saw("crowd")

    def held(self, pick: int) -> tuple[Client, Permit] | None:
        """The ``pick``-th permit held by a client still alive, and its client."""
        held = [(c, p) for c in self.clients.values() for p in c.permits]
        return held[pick % len(held)] if held else None

    @rule(pick=st.integers(0, 11), ttl=st.sampled_from(sorted(TTLS)))
    def extend(self, pick: int, ttl: str) -> None:
        chosen = self.held(pick)
        if chosen is None:
            return
        client, permit = chosen
        name = client.name
        ms = TTLS[ttl]
        lingering = self.admin.zscore(KEY, permit.handle.token) is not None
        before, ok, after = self.timed(client, lambda: permit.handle.extend(ms))
        if permit.expired:
            assert ok is False, f"{name} renewed an expired permit"
            assert permit.handle.signal.aborted
            SEEN.saw(
                "renewal of an expired, not yet evicted permit refused"
                if lingering
                else "renewal of an evicted permit refused"
            )
            return
        if self.live(permit, after):
            assert ok is True, f"{name}'s renewal of its live permit answered {ok}"
        if ok:
            permit.lo, permit.hi, permit.ttl = before + ms, after + ms, ms
            SEEN.saw("renewed")
        else:
            self.wait_out([permit])
            SEEN.saw("renewal refused as its permit expired during it")

    @rule(pick=st.integers(0, 11))
    def release(self, pick: int) -> None:
        chosen = self.held(pick)
        if chosen is None:
            return
        client, permit = chosen
        name = client.name
        client.permits.remove(permit)
        _before, ok, after = self.timed(client, permit.handle.release)
        self.permits.remove(permit)
        if permit.expired:
            assert ok is False, f"{name}'s release of an expired permit answered True"
            SEEN.saw("release of an expired permit answered False")
        elif self.live(permit, after):
            assert ok is True, f"{name}'s release of its live permit answered {ok}"
        if ok:
            self.released.add(permit.handle.token)
            self.successes.append((permit.since, self.step))
            SEEN.saw("released")

    @rule(pick=st.integers(0, 3))
    def die(self, pick: int) -> None:
        """A client stops: its permits are never renewed or released again (only one
        whose permits are all short: a long one would outlive the example)."""
        mortal = [
            c
            for c in self.clients.values()
            if c.permits and all(p.ttl == SHORT for p in c.permits)
        ]
        if not mortal:
            return
        client = mortal[pick % len(mortal)]
        for p in client.permits:
            p.dead = True
        client.permits = []
        SEEN.saw("client died")

    @rule()
    def let_time_pass(self) -> None:
        """Redis's clock passes the earliest short expiry."""
        short = [p for p in self.permits if p.ttl == SHORT and not p.expired]
        if not short:
            return
        self.wait_out([min(short, key=lambda p: p.hi)])
        SEEN.saw("waited for an expiry")

    # -- checks ---------------------------------------------------------------------------

    @invariant()
    def redis_mirrors_the_model(self) -> None:
        if not hasattr(self, "permits"):
            return
        pipe = self.admin.pipeline(transaction=True)
        pipe.time()
        pipe.zrange(KEY, 0, -1, withscores=True)
        pipe.pexpiretime(KEY)
        (seconds, micros), members, expires_at = pipe.execute()
        now = int(seconds) * 1000 + int(micros) // 1000
        stored = {token.decode(): score for token, score in members}
        ours = {p.handle.token: p for p in self.permits}
        for token, p in ours.items():
            score = stored.get(token)
            if score is not None:
                assert p.lo <= score <= p.hi, (
                    f"{p.client}'s permit expires at {score}, not within [{p.lo}, {p.hi}]"
                )
            elif not p.expired and p.lo > now:
                raise AssertionError(f"{p.client}'s live permit is missing from {KEY}")
        live = {token for token, score in stored.items() if score > now}
        strays = live - set(ours)
        assert not strays, f"live permits nobody holds: {strays}"
        assert not self.released & set(stored), "a released permit is back"
        assert len(live) <= self.largest
        if stored:
            assert expires_at == int(max(stored.values())), (
                f"{KEY} expires at {expires_at}, its latest permit at {max(stored.values())}"
            )
        else:
            assert expires_at == -2, f"{KEY} outlived its permits"

    def teardown(self) -> None:
        if not hasattr(self, "clients"):
            return
        # Never more than the largest limit of the successes held at once (grant to release).
        for step in {since for since, _ in self.successes}:
            held = sum(1 for since, until in self.successes if since <= step < until)
            assert held <= self.largest, f"{held} successes held at once at step {step}"
        for client in self.clients.values():
            for p in client.permits:
                client.call(p.handle.release)
        self.t1.close()
        self.t2.close()
        self.t3.close()
        self.task.close()
        for sem in (self.sync_a, self.sync_b):
            sem.close()
            sem.client.close()
        self.loop.run(self.aio.aclose())
        self.loop.run(self.aio._client.aclose())  # type: ignore[union-attr]
        self.admin.delete(KEY)
        self.admin.close()


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


def test_permits_mirror_the_model(redis_server: RedisServer, loop_thread: LoopThread) -> None:
    SemaphoreMachine.server = redis_server
    SemaphoreMachine.loop = loop_thread
    # At least 25 examples: with a quarter of the examples (the compiled run) a dozen once met
    # no refusal at all, and the check below failed on coverage, not on a bug; so did 25
    # once on a loaded machine before the crowd rule, which meets the limit's edge at once.
    run_state_machine_as_test(SemaphoreMachine, settings=profiles.scaled(20, floor=25, steps=30))
    print(f"semaphore stateful: {dict(sorted(SEEN.items()))}")
    # What each run meets varies (Hypothesis leaves rules out of some examples); the story
    # of a dead client's permit is told for certain by the test below.
    assert SEEN.get("granted") and SEEN.get("refused")


def test_a_dead_clients_permit_goes_at_its_own_expiry(
    redis_server: RedisServer, loop_thread: LoopThread
) -> None:
    """The story the random runs tell only now and then, step by step through the same
    machine and checks: a dead client's permit fills the limit while the live holder
    renews its own, and is given to another at its own expiry; that one's permit expires
    in turn, and its renewal is refused although the permit is still in the key."""
    SemaphoreMachine.server = redis_server
    SemaphoreMachine.loop = loop_thread
    before = dict(SEEN)
    machine = SemaphoreMachine()
    steps: list[Callable[[], None]] = [
        lambda: machine.start(limit=2, more=False, corpse=True),
        lambda: machine.acquire("t1", "long"),
        lambda: machine.acquire("task", "long"),  # refused: the dead permit counts
        lambda: machine.extend(0, "long"),
        lambda: machine.extend(0, "long"),  # t1's renewals keep its own permit only
        machine.let_time_pass,
        lambda: machine.acquire("other-object", "short"),  # in the dead permit's place
        machine.let_time_pass,  # nobody acquires: the expired permit stays in the key
        lambda: machine.extend(1, "long"),  # refused: expired, though still a member
        lambda: machine.release(1),  # False: it was no longer ours
        lambda: machine.release(0),
    ]
    try:
        for step in steps:
            step()
            machine.redis_mirrors_the_model()
    finally:
        machine.teardown()

    def new(what: str) -> int:
        return SEEN.get(what, 0) - before.get(what, 0)

    assert new("refused while a dead client's permit counted") == 1
    assert new("granted in place of a dead client's expired permit") == 1
    assert new("renewal of an expired, not yet evicted permit refused") == 1
    assert new("release of an expired permit answered False") == 1
    assert new("renewed") == 2 and new("released") == 1
