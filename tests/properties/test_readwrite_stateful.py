"""The read-write lock's scripts driven step by step on a real Redis, each step checked
against a reference model of the Redis state of ``spec/ReadWrite.tla`` (its RedisStep).

Three readers' tokens and three writers' send the scripts as the drivers would
(``EVALSHA`` of what :func:`distlock._protocol.encode` makes): acquires, fail-fast,
waiting or a waiter's last attempt, with a short or a long TTL; renewals; releases;
withdrawals; the same request sent again (a client library's resend); another primitive
(a Lock) taking the key while it is free; and Redis's clock passing the next instant at
which a lease or a place ends.  A token nobody calls again is a client that died: its
lease must end at its own TTL.  A waiting attempt's place ends a short grace after its
block (the scripts' ``QUEUE_GRACE_MS`` argument), so that places end within an example.

The model holds what the spec's RedisStep holds, with each instant on Redis's clock: each
reader's own expiry, the writer's token, fence and expiry, the fence counter, the queue
(places in arrival order, each with its role and its end), plus what the scripts keep
beside it: the wake-ups waiting in the wake lists, the release records, and when each key
expires.  Expired leases and places count for nothing, as on the spec's Tick.

Time is Redis's: before each step, the machine waits (on Redis's clock) until no instant
of the model lies within a few ms of now, so that the script's ``NOW`` is on a known side
of every instant.  A step slower than that (a loaded machine) is matched against every
side it could have been on.  The instants a script writes (``NOW`` + a TTL, + a place's
life) are read back, must lie within the step, and give its exact ``NOW``.

Checked after every step, against Redis read in one MULTI with its ``TIME``: the reply
is the model's; never a live writer beside any other live lease; each live reader scored
at the instant its own last grant or renewal set; a new writer's fence larger than every
fence returned before; the live queue in the model's order, each place with its role and
end; the wake lists, the release records, the keys' expiry; the raw queue as the model
keeps it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import redis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import LONGEST_BLOCK_MS
from distlock._fence_floor import floor_at
from distlock._protocol import (
    RELEASE_MEMORY_MS,
    RWLOCK_ACQUIRE,
    RWLOCK_RELEASE,
    RWLOCK_RENEW,
    RWLOCK_WITHDRAW,
    encode,
    fence_key,
    queue_keys,
    readers_key,
    released_key,
)
from tests.properties import profiles
from tests.redis_server import RedisServer

KEY: Final = "rwp:k"
READERS: Final = readers_key(KEY)
FENCES: Final = fence_key(KEY)
QUEUE, PLACES, WAKE = queue_keys(KEY, Kind.READ)
READ_TOKENS: Final = ("r" * 31 + "1", "r" * 31 + "2", "r" * 31 + "3")
WRITE_TOKENS: Final = ("w" * 31 + "1", "w" * 31 + "2", "w" * 31 + "3")
TOKENS: Final = READ_TOKENS + WRITE_TOKENS
ROLE: Final = {t: Kind.READ for t in READ_TOKENS} | {t: Kind.WRITE for t in WRITE_TOKENS}
#: A lease that never ends within an example, and one whose end an example waits for.
LONG: Final = 600_000
SHORT: Final = 60
TTLS: Final = {"long": LONG, "short": SHORT}
#: A waiting attempt may still wait this long (0: its last attempt; None: fail-fast).
WAITS: Final = {"fail-fast": None, "waiting": 40, "last": 0}
#: A place outlives its block by this much: the scripts' QUEUE_GRACE_MS argument, short
#: here so that places end within an example.
GRACE: Final = 20
#: No instant within this many ms of a step's start: the script's NOW is on a known side.
GUARD: Final = 8
#: Instants further than this are never waited for (long leases).
NEAR: Final = 1_000
SEEN: Final[dict[str, int]] = {}


def _count(what: str) -> None:
    SEEN[what] = SEEN.get(what, 0) + 1


def redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


# -- the model -----------------------------------------------------------------------------


@dataclass
class Expect:
    """What the model says a step answers."""

    #: The reply, with ``NEW`` where a new fence goes (checked against the counter).
    reply: list[int] | int
    #: A waiting attempt refused: how long it may block, as a function of NOW.
    recheck: Callable[[int], int] | None = None
    #: The instant the step writes, by which its exact NOW is read back: (command, key,
    #: member or field, ms added to NOW).  None when it writes none.
    stamp: tuple[str, str, str, int] | None = None
    #: The step wrote a new fence (next_fence).
    new_fence: bool = False
    #: Another primitive's key kept the attempt out: its block counts from the PTTL Redis
    #: reads as the script runs, a ms after NOW at times.
    foreign: bool = False


NEW: Final = -1


@dataclass
class Model:
    """The Redis state of the spec's RedisStep, instants on Redis's clock (ms)."""

    readers: dict[str, int] = field(default_factory=dict)
    #: (token, fence, end) of the writer's lease.
    writer: tuple[str, int, int] | None = None
    counter: int | None = None
    #: The queue as Redis keeps it: ended places stay until a script drops them.
    queue: list[str] = field(default_factory=list)
    places: dict[str, int] = field(default_factory=dict)
    marks: set[str] = field(default_factory=set)
    woken: set[str] = field(default_factory=set)
    records: dict[str, int] = field(default_factory=dict)
    #: The instant each key expires at (None: it does not exist).
    key_until: int | None = None
    readers_until: int | None = None
    queue_until: int | None = None
    #: Another primitive's key (a Lock's string) holds the key until then.
    foreign_until: int | None = None
    #: The largest fence returned so far, to anyone.
    top: int = 0

    def live_places(self, now: int) -> list[tuple[str, str, int]]:
        return [
            (t, "write" if t in self.marks else "read", self.places[t])
            for t in self.queue
            if self.places.get(t, 0) > now
        ]

    def instants(self) -> list[int]:
        out = list(self.readers.values()) + list(self.places.values())
        for until in (self.key_until, self.readers_until, self.queue_until, self.foreign_until):
            if until is not None:
                out.append(until)
        if self.writer:
            out.append(self.writer[2])
        return out

    # Time passes: what ended counts for nothing (leases and places are ended when their
    # instant is not after NOW; keys expire after their instant, as Redis's do).
    def expire(self, now: int) -> None:
        self.readers = {t: end for t, end in self.readers.items() if end > now}
        if self.writer and self.writer[2] <= now:
            self.writer = None
        self.records = {t: end for t, end in self.records.items() if now <= end}
        if self.foreign_until is not None and now > self.foreign_until:
            self.foreign_until = None
        if self.key_until is not None and now > self.key_until:
            self.key_until = None
        if self.readers_until is not None and now > self.readers_until:
            self.readers_until = None
        if self.queue_until is not None and now > self.queue_until:
            self.queue, self.places, self.marks, self.queue_until = [], {}, set(), None
        self.woken = {t for t in self.woken if self.places.get(t, 0) > now}

    def live_head(self, now: int) -> str | None:
        while self.queue:
            head = self.queue[0]
            if self.places.get(head, 0) > now:
                return head
            self.queue.pop(0)
            self.leave(head)
        return None

    def leave(self, token: str) -> None:
        if token in self.queue:
            self.queue.remove(token)
        self.places.pop(token, None)
        self.marks.discard(token)
        self.woken.discard(token)
        if not self.queue and not self.places and not self.marks:
            self.queue_until = None

    def wake_next(self, now: int, readers: int) -> None:
        """The first live waiter is woken if its attempt would be granted now."""
        if self.writer or not self.queue:
            return
        head = self.live_head(now)
        if head is None or (readers > 0 and head in self.marks):
            return
        self.woken.add(head)

    def settle(self, now: int) -> None:
        """The keys expire with their latest lease; the key goes now if none is left."""
        self.readers_until = max(self.readers.values()) if self.readers else None
        till = max([*self.readers.values(), self.writer[2] if self.writer else 0])
        self.key_until = till if till > now else None

    # The scripts, as the spec's RedisStep has them.
    def acquire(self, token: str, ttl: int, left: int | None, now: int) -> Expect:
        self.expire(now)
        writing = ROLE[token] is Kind.WRITE
        foreign = self.foreign_until is not None
        if foreign:
            mine = False
        elif writing:
            mine = self.writer is not None and self.writer[0] == token
        else:
            mine = token in self.readers
        queued = not mine and bool(self.queue)
        head = self.live_head(now) if queued else None
        head_until = self.places[head] if head else 0
        ahead: int | None = None
        if head is not None:
            live = self.live_places(now)
            own = [i for i, (t, _, _) in enumerate(live) if t == token]
            before = live[: own[0]] if own else live
            if writing:
                ahead = before[0][2] if before else None
            else:
                ahead = next((end for _, role, end in before if role == "write"), None)
        last = max(self.readers.values(), default=0)
        held = self.writer is not None or (writing and bool(self.readers))

        def busy(at: int) -> int:
            if self.foreign_until is not None:
                rest = self.foreign_until - at
                return rest if rest > 0 else GRACE
            if self.writer is not None:
                return (max(self.writer[2], last) if writing else self.writer[2]) - at
            if writing and self.readers:
                return last - at
            return 0

        if mine or (not foreign and not held and ahead is None):
            ends = now + ttl
            fence: int
            if writing:
                if mine:
                    assert self.writer is not None
                    fence = self.writer[1]
                else:
                    fence = NEW
                self.writer = (token, fence, ends)
                stamp = ("HGET", KEY, "x", ttl)
            else:
                self.readers[token] = ends
                fence = NEW if self.counter is None else self.counter
                stamp = ("ZSCORE", READERS, token, ttl)
            self.settle(now)
            if queued or (mine and not writing):
                self.leave(token)
                if not writing:
                    self.wake_next(now, 1)
            reply = [1, fence] if left is None else [fence, 0]
            return Expect(reply, stamp=stamp, new_fence=fence == NEW)
        if left is None:
            return Expect([0, 0])
        if left == 0:
            self.leave(token)
            # First in line, it kept out whoever is behind it: as a withdrawal does.
            if head == token and not foreign:
                self.wake_next(now, len(self.readers))
            return Expect([0, 0])

        def recheck(at: int) -> int:
            wait = busy(at)
            if ahead is not None:
                wait = min(ahead - at, ttl) if wait <= 0 else min(wait, ahead - at)
            if head is not None and head != token:
                wait = min(wait, head_until - at)
            return max(1, wait)

        # The place: kept if live, else taken at the tail; its end is read back.
        had = self.places.get(token)
        if had is not None and had <= now:
            self.queue.remove(token)
            had = None
        if had is None:
            self.queue.append(token)
        self.places[token] = had or 0  # set from the reply's block and NOW, see place()
        if writing:
            self.marks.add(token)
        self.woken.discard(token)
        return Expect(
            [0, NEW], recheck=recheck, stamp=("HGET", PLACES, token, 0), foreign=foreign
        )

    def place(self, token: str, left: int, block: int, now: int) -> int:
        """A refused waiting attempt's place and the queue's expiry, once its block is
        known: the place ends a grace after it, never earlier than promised."""
        life = min(left, block, LONGEST_BLOCK_MS) + GRACE
        self.places[token] = max(self.places[token], now + life)
        if self.queue_until is None or self.queue_until - now < life:
            self.queue_until = now + life
        return life

    def renew(self, token: str, ttl: int, now: int) -> Expect:
        self.expire(now)
        if self.foreign_until is not None:
            return Expect(0)
        if ROLE[token] is Kind.WRITE:
            if not (self.writer and self.writer[0] == token):
                return Expect(0)
            self.writer = (token, self.writer[1], now + ttl)
            self.settle(now)
            return Expect(1, stamp=("HGET", KEY, "x", ttl))
        if token not in self.readers:
            return Expect(0)
        self.readers[token] = now + ttl
        self.settle(now)
        return Expect(1, stamp=("ZSCORE", READERS, token, ttl))

    def release(self, token: str, now: int) -> Expect:
        self.expire(now)
        hit = False
        if self.foreign_until is None:
            if ROLE[token] is Kind.WRITE:
                if self.writer and self.writer[0] == token:
                    self.writer, hit = None, True
            elif self.readers.pop(token, None) is not None:
                hit = True
        if self.queue:
            self.leave(token)
        if hit:
            self.settle(now)
            self.records[token] = now + RELEASE_MEMORY_MS
            self.wake_next(now, len(self.readers))
            return Expect(1)
        return Expect(1 if token in self.records else 0)

    def withdraw(self, token: str, now: int) -> Expect:
        self.expire(now)
        head = self.live_head(now)
        self.leave(token)
        if head == token and self.foreign_until is None:
            self.wake_next(now, len(self.readers))
        return Expect(1)


# -- the machine ---------------------------------------------------------------------------


SCRIPTS: Final = (RWLOCK_ACQUIRE, RWLOCK_RENEW, RWLOCK_RELEASE, RWLOCK_WITHDRAW)


@dataclass
class Sent:
    """A request as sent, so that it can be sent again."""

    op: Op
    token: str
    ttl: int
    left: int | None


class ReadWriteMachine(RuleBasedStateMachine):
    server: RedisServer

    @initialize()
    def start(self) -> None:
        _count("examples")
        self.r = redis.Redis(port=self.server.port)
        for script in SCRIPTS:
            self.r.script_load(script.source)
        self.r.delete(KEY, READERS, FENCES, QUEUE, PLACES)
        for token in TOKENS:
            self.r.delete(WAKE + token, released_key(KEY, token))
        self.model = Model()
        self.last: Sent | None = None
        #: Tokens granted a lease in this example, in the order of their grants.
        self.granted: list[str] = []

    # -- Redis's clock ------------------------------------------------------------------

    def now(self) -> int:
        return redis_ms(self.r)

    def sleep_past(self, instant: int) -> int:
        while (now := self.now()) <= instant:
            time.sleep((instant + 1 - now) / 1000)
        return now

    def clear_of_instants(self) -> int:
        """Now, once no instant of the model lies within GUARD ms of it."""
        while True:
            now = self.now()
            near = [i for i in self.model.instants() if now - 1 <= i <= now + GUARD]
            if not near:
                return now
            self.sleep_past(max(near) + 1)

    # -- one step -----------------------------------------------------------------------

    def send(self, sent: Sent) -> None:
        self.last = sent
        command = Command(
            sent.op, KEY, sent.token, sent.ttl, kind=ROLE[sent.token], queue_ms=sent.left
        )
        script, keys, args = encode(command)
        if sent.op is Op.ACQUIRE:
            args[4] = GRACE
        before = self.clear_of_instants()
        held_back = (
            sent.op is Op.ACQUIRE
            and ROLE[sent.token] is Kind.READ
            and not (self.model.writer and self.model.writer[2] > before)
            and any(role == "write" for _, role, _ in self.model.live_places(before))
        )
        woken = set(self.model.woken)
        raw: Any = self.r.evalsha(script.sha, len(keys), *keys, *args)
        after = self.now()
        reply: list[int] | int = [int(v) for v in raw] if isinstance(raw, list) else int(raw)
        self.model = self.match(sent, reply, before, after)
        if held_back and isinstance(reply, list) and reply[0] <= 0:
            _count("a reader held back by a waiting writer")
        if self.model.woken - woken:
            _count("a waiter woken")
        self.check(sent, reply)

    def run_model(self, model: Model, sent: Sent, now: int) -> Expect:
        if sent.op is Op.ACQUIRE:
            return model.acquire(sent.token, sent.ttl, sent.left, now)
        if sent.op is Op.RENEW:
            return model.renew(sent.token, sent.ttl, now)
        if sent.op is Op.RELEASE:
            return model.release(sent.token, now)
        return model.withdraw(sent.token, now)

    def match(self, sent: Sent, reply: list[int] | int, before: int, after: int) -> Model:
        """The model after the step, at the one NOW (within the step) that gives the
        reply Redis gave and the instants it wrote."""
        near = {i + d for i in self.model.instants() for d in (0, 1) if before < i + d <= after}

        def rechecks(expect: Expect) -> tuple[int, int] | None:
            if expect.recheck is None:
                return None
            return expect.recheck(before), expect.recheck(after)

        def exact_of(expect: Expect, now: int) -> int | None:
            if expect.stamp is None or self.stamp(expect) is None:
                return None
            return self.exact_now(sent, expect, reply)
        tried = []
        for now in sorted({before} | near):
            model = copy.deepcopy(self.model)
            expect = self.run_model(model, sent, now)
            tried.append((now, exact_of(expect, now), expect.reply, rechecks(expect)))
            exact = None
            if expect.stamp is not None and self.stamp(expect) is not None:
                # The instant it wrote gives the script's NOW; run the model at it.
                exact = self.exact_now(sent, expect, reply)
                if exact is not None and not before <= exact <= after:
                    continue
                if exact is not None and exact != now:
                    model = copy.deepcopy(self.model)
                    expect = self.run_model(model, sent, exact)
            if self.fits(model, sent, expect, reply, exact, now, before, after):
                return model
        raise AssertionError(
            f"{sent}: Redis answered {reply}; the model, at each NOW the step may have "
            f"seen in [{before}, {after}], answers {tried}"
        )

    def stamp(self, expect: Expect) -> str | None:
        assert expect.stamp is not None
        command, key, name, _ = expect.stamp
        value = self.r.hget(key, name) if command == "HGET" else self.r.zscore(key, name)
        return None if value is None else str(int(float(value)))

    def exact_now(self, sent: Sent, expect: Expect, reply: list[int] | int) -> int | None:
        assert expect.stamp is not None
        value = int(self.stamp(expect) or 0)
        if expect.recheck is None:
            return value - expect.stamp[3]
        # A refused waiting attempt: its place ends NOW + its life, unless it was
        # promised longer (then NOW is not written anywhere: any in the step will do).
        assert isinstance(reply, list) and sent.left
        life = min(sent.left, reply[1], LONGEST_BLOCK_MS) + GRACE
        promised = self.model.places.get(sent.token, 0)
        return None if value == promised else value - life

    def fits(
        self,
        model: Model,
        sent: Sent,
        expect: Expect,
        reply: list[int] | int,
        exact: int | None,
        now: int,
        before: int,
        after: int,
    ) -> bool:
        """Whether the reply is the model's at ``exact`` (the script's NOW, where the
        step wrote it) or at some NOW of the step's that ``now`` stands for."""
        if expect.recheck is not None:
            assert isinstance(reply, list) and sent.left is not None
            if exact is not None and not expect.foreign:
                fits = reply[1] == expect.recheck(exact)
            else:
                fits = expect.recheck(after) <= reply[1] <= expect.recheck(exact or now)
            if reply[0] != 0 or not fits:
                return False
            old = model.queue_until
            life = model.place(sent.token, sent.left, reply[1], exact or now)
            # PTTL and PEXPIRE count from Redis's clock as the script runs, a ms after
            # its NOW at times: the queue's new expiry is read back.
            at = self.r.pexpiretime(QUEUE)
            assert at == old or (exact or before) + life <= at <= after + life, (
                f"the queue expires at {at}, not at {old} or {life} ms after the step"
            )
            model.queue_until = at
            return True
        if not expect.new_fence:
            return reply == expect.reply
        assert isinstance(reply, list) and isinstance(expect.reply, list)
        slot = 1 if sent.left is None else 0
        shape = [v if i != slot else reply[slot] for i, v in enumerate(expect.reply)]
        fence = reply[slot]
        floor_ok = floor_at(before) <= fence <= floor_at(after)
        if reply != shape or not (fence == (self.model.counter or 0) + 1 or floor_ok):
            return False
        assert fence > self.model.top, f"a new fence {fence}, not above {self.model.top}"
        model.counter = fence
        if model.writer and model.writer[1] == NEW:
            model.writer = (model.writer[0], fence, model.writer[2])
        return True

    # -- the checks ---------------------------------------------------------------------

    def check(self, sent: Sent, reply: list[int] | int) -> None:
        m = self.model
        if sent.op is Op.ACQUIRE and isinstance(reply, list):
            granted = reply[0] == 1 if sent.left is None else reply[0] > 0
            if granted:
                m.top = max(m.top, reply[1] if sent.left is None else reply[0])
                if sent.token not in self.granted:
                    self.granted.append(sent.token)
                _count(f"{ROLE[sent.token].value} granted")
            else:
                _count(f"{ROLE[sent.token].value} refused")
        pipe = self.r.pipeline(transaction=True)
        pipe.time()
        pipe.type(KEY)
        pipe.hgetall(KEY)
        pipe.pexpiretime(KEY)
        pipe.zrange(READERS, 0, -1, withscores=True)
        pipe.pexpiretime(READERS)
        pipe.get(FENCES)
        pipe.lrange(QUEUE, 0, -1)
        pipe.hgetall(PLACES)
        pipe.pexpiretime(QUEUE)
        pipe.pexpiretime(PLACES)
        for token in TOKENS:
            pipe.lrange(WAKE + token, 0, -1)
            pipe.get(released_key(KEY, token))
        (seconds, micros), kind, fields, key_at, members, readers_at, counter, *rest = (
            pipe.execute(raise_on_error=False)
        )
        queue, places, queue_at, places_at, *per_token = rest
        t = int(seconds) * 1000 + int(micros) // 1000

        def near(instant: int | None) -> bool:
            return instant is not None and t - 1 <= instant <= t + 1

        def alive(until: int | None) -> int | None:
            """A key's expiry instant, if it has not passed at t (else None: gone)."""
            return until if until is not None and t <= until else None

        # Leases: never a live writer beside another live lease; each reader its own.
        live_readers = {k.decode(): int(s) for k, s in members if s > t}
        fields = fields if isinstance(fields, dict) else {}
        hash_ = {k.decode(): v.decode() for k, v in fields.items()}
        writer = None
        if "w" in hash_ and int(hash_["x"]) > t:
            writer = (hash_["w"], int(hash_["f"]), int(hash_["x"]))
        assert not (writer and live_readers), f"a writer {writer} beside readers {live_readers}"
        model_readers = {k: v for k, v in m.readers.items() if v > t}
        assert live_readers == model_readers, f"readers {live_readers}, model {model_readers}"
        model_writer = m.writer if m.writer and m.writer[2] > t else None
        assert writer == model_writer, f"writer {writer}, model {model_writer}"
        assert int(counter or 0) == (m.counter or 0), f"counter {counter}, model {m.counter}"
        # The keys' life.
        if alive(m.foreign_until) and not near(m.foreign_until):
            assert kind == b"string" and key_at == m.foreign_until
        elif not near(m.key_until) and not near(m.foreign_until):
            if alive(m.key_until) is None:
                assert key_at == -2, f"{KEY} outlived its leases"
            else:
                assert kind == b"hash" and hash_.get("rw") == "1"
                assert key_at == m.key_until, f"{KEY} expires at {key_at}, not {m.key_until}"
        if not near(m.readers_until):
            expires = alive(m.readers_until)
            assert readers_at == (-2 if expires is None else expires), (
                f"{READERS} expires at {readers_at}, not {m.readers_until}"
            )
        # The queue: Redis's list as the model keeps it, the live places as the spec's.
        if not near(m.queue_until):
            gone = alive(m.queue_until) is None
            listed = [q.decode() for q in queue]
            assert listed == ([] if gone else m.queue), f"queue {listed}, model {m.queue}"
            stored = {k.decode(): v.decode() for k, v in places.items()}
            modelled = {tok: str(end) for tok, end in m.places.items()}
            modelled |= {">" + tok: "w" for tok in m.marks}
            assert stored == ({} if gone else modelled), f"places {stored}, model {modelled}"
            if m.queue and not gone:
                assert queue_at == m.queue_until and abs(places_at - queue_at) <= 1, (
                    f"the queue expires at {queue_at}, its places at {places_at}, "
                    f"the model's at {m.queue_until}"
                )
        for token, wake, record in zip(TOKENS, per_token[::2], per_token[1::2], strict=True):
            if m.places.get(token, 0) > t + 2 or token not in m.places:
                expected = [b"1"] if token in m.woken else []
                assert wake == expected, f"{token} woken {wake}, model {token in m.woken}"
            if not near(m.records.get(token)):
                assert (record == token.encode()) == (token in m.records), (
                    f"{token}'s release record {record}, model {m.records.get(token)}"
                )
        if live_readers and writer is None:
            _count("readers held at once" if len(live_readers) > 1 else "a reader held")
        if any(role == "write" for _, role, _ in m.live_places(t)) and live_readers:
            _count("a writer waited while readers held")

    # -- rules --------------------------------------------------------------------------

    @rule(
        token=st.sampled_from(TOKENS),
        wait=st.sampled_from(sorted(WAITS)),
        ttl=st.sampled_from(sorted(TTLS)),
    )
    def acquire(self, token: str, wait: str, ttl: str) -> None:
        self.send(Sent(Op.ACQUIRE, token, TTLS[ttl], WAITS[wait]))

    def pick(self, pick: int) -> str:
        """The ``pick``-th of the tokens that hold a lease, then of those granted one in
        this example, then of all tokens: mostly a holder, often one whose lease ended or
        went (a renewal or a release that comes too late), now and then any."""
        now = self.now()
        holders = [t for t, end in self.model.readers.items() if end > now]
        if self.model.writer and self.model.writer[2] > now:
            holders.append(self.model.writer[0])
        chosen = [*holders, *holders, *self.granted, *TOKENS]
        return chosen[pick % len(chosen)]

    @rule(pick=st.integers(0, 11), ttl=st.sampled_from(sorted(TTLS)))
    def renew(self, pick: int, ttl: str) -> None:
        self.send(Sent(Op.RENEW, self.pick(pick), TTLS[ttl], None))

    @rule(pick=st.integers(0, 11))
    def release(self, pick: int) -> None:
        self.send(Sent(Op.RELEASE, self.pick(pick), SHORT, None))

    @rule(token=st.sampled_from(TOKENS))
    def withdraw(self, token: str) -> None:
        self.send(Sent(Op.WITHDRAW, token, SHORT, 0))

    @rule()
    def resend(self) -> None:
        """The last request again, as a client library resends one whose reply was lost."""
        if self.last is not None:
            _count("resent")
            self.send(self.last)

    @rule(pick=st.integers(0, 3))
    def another_primitive_takes_the_key(self, pick: int) -> None:
        """A Lock of the same name takes the key while no lease holds it (now and then:
        while it holds, every attempt is refused)."""
        if pick:
            return
        now = self.clear_of_instants()
        self.model.expire(now)
        if self.model.key_until is not None or self.model.foreign_until is not None:
            return
        assert self.r.set(KEY, "x" * 32, px=SHORT, nx=True), f"{KEY} is not free"
        self.model.foreign_until = self.r.pexpiretime(KEY)
        _count("another primitive took the key")

    @rule()
    def let_time_pass(self) -> None:
        """Redis's clock passes the next instant at which a lease or a place ends."""
        now = self.now()
        soon = [i for i in self.model.instants() if now <= i <= now + NEAR]
        if soon:
            self.sleep_past(min(soon) + 1)
            _count("waited for an instant")

    def teardown(self) -> None:
        if hasattr(self, "r"):
            self.r.close()


def test_the_scripts_follow_the_model(redis_server: RedisServer) -> None:
    ReadWriteMachine.server = redis_server
    run_state_machine_as_test(
        ReadWriteMachine, settings=profiles.scaled(10, floor=25, steps=40)
    )
    print(f"read-write stateful: {dict(sorted(SEEN.items()))}")
    for what in ("read granted", "write granted", "read refused", "write refused"):
        assert SEEN.get(what), f"no step {what}"

