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
of the model lies within a few ms of now, so that on an idle machine the script's ``NOW``
is on a known side of every instant.  A loaded machine may delay the script anywhere
between the ``TIME`` read before the step and the one after, so the model is run at every
ms in between, and at the script's start: Redis 7.0 judges keys' expiry then, but
``TIME`` moves on within a script (the PTTL of another primitive's key reads it later
than ``NOW``; the wake-up goes to the waiter the script chose at ``NOW``, its place
ended or not by the time it is pushed).  The instants a script writes
(``NOW`` + a TTL, + a place's life) are read back and give its exact ``NOW``.  Where
several of these give Redis's reply but not the same state (something ended within the
step), Redis's state tells which one the script saw.  A failure's message holds the
model before the step, each of its reruns, Redis's state and the example's steps.

Checked after every step, against Redis read in one MULTI with its ``TIME``: the reply
is the model's; never a live writer beside any other live lease; each live reader scored
at the instant its own last grant or renewal set; a new writer's fence larger than every
fence returned before; the live queue in the model's order, each place with its role and
end; the wake lists, the release records, the keys' expiry; the raw queue as the model
keeps it.
"""

from __future__ import annotations

import copy
import re
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
from tests.properties.seen import Seen
from tests.redis_server import RedisServer, redis_ms

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
#: No instant within this many ms of a step's start: on an idle machine, the script's NOW
#: is then on a known side of each.
GUARD: Final = 8
#: Instants further than this are never waited for (long leases).
NEAR: Final = 1_000
#: A wake list may outlive the place it was given at by this much: its PEXPIRE's length
#: is reckoned from TIME read earlier in the script, and counts from Redis's clock as the
#: PEXPIRE runs (a loaded machine may stall the script in between).
LINGER: Final = 100
SEEN: Final = Seen()



# -- the model -----------------------------------------------------------------------------


@dataclass
class Expect:
    """What the model says a step answers."""

    #: The reply, with ``NEW`` where a new fence goes (checked against the counter).
    reply: list[int] | int
    #: A waiting attempt refused: how long it may block, as a function of NOW and of the
    #: instant (at or after NOW) Redis's PTTL of another primitive's key counts from.
    recheck: Callable[[int, int], int] | None = None
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
    #: The end of the place each wake-up was given at: its wake list expires then, or up
    #: to LINGER later, unless a script deletes it first.
    wake_ends: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    #: The instant each key expires at (None: it does not exist).
    key_until: int | None = None
    readers_until: int | None = None
    queue_until: int | None = None
    #: Another primitive's key (a Lock's string) holds the key until then.
    foreign_until: int | None = None
    #: The places' hash has an expiry of its own: its PEXPIRE reads the clock apart from
    #: the queue's, a ms or more later on a loaded machine.
    places_until: int | None = None
    #: The largest fence returned so far, to anyone.
    top: int = 0
    #: The script's start, set for the one step being run: Redis judges keys' expiry then
    #: (at or before NOW: a key that expired by NOW may still be there).
    start: int | None = None

    def live_places(self, now: int) -> list[tuple[str, str, int]]:
        return [
            (t, "write" if t in self.marks else "read", self.places[t])
            for t in self.queue
            if self.places.get(t, 0) > now
        ]

    def key_instants(self) -> list[int]:
        """The instants at which keys expire (judged at a script's start)."""
        out = list(self.records.values())
        for until in (
            self.key_until,
            self.readers_until,
            self.queue_until,
            self.places_until,
            self.foreign_until,
        ):
            if until is not None:
                out.append(until)
        return out

    def instants(self) -> list[int]:
        """Every instant at which something the model holds ends."""
        out = list(self.readers.values()) + list(self.places.values()) + self.key_instants()
        if self.writer:
            out.append(self.writer[2])
        return out

    # Time passes: what ended counts for nothing (leases and places are ended when their
    # instant is not after NOW; keys expire after their instant, as Redis's do).
    def expire(self, now: int) -> None:
        start = now if self.start is None else min(self.start, now)
        self.readers = {t: end for t, end in self.readers.items() if end > now}
        if self.writer and self.writer[2] <= now:
            self.writer = None
        self.records = {t: end for t, end in self.records.items() if start <= end}
        if self.foreign_until is not None and start > self.foreign_until:
            self.foreign_until = None
        if self.key_until is not None and start > self.key_until:
            self.key_until = None
        if self.readers_until is not None and start > self.readers_until:
            self.readers_until = None
        if self.queue_until is not None and start > self.queue_until:
            self.queue, self.queue_until = [], None
        if self.places_until is not None and start > self.places_until:
            self.places, self.marks, self.places_until = {}, set(), None
        self.woken = {t for t in self.woken if self.places.get(t, 0) > now}

    def live_head(self, now: int) -> str | None:
        while self.queue:
            head = self.queue[0]
            if self.places.get(head, 0) > now:
                return head
            self.queue.pop(0)
            self.leave(head)
        self.tidy()
        return None

    def leave(self, token: str) -> None:
        if token in self.queue:
            self.queue.remove(token)
        self.places.pop(token, None)
        self.marks.discard(token)
        self.woken.discard(token)
        self.wake_ends.pop(token, None)
        self.tidy()

    def tidy(self) -> None:
        """Redis deletes a list or a hash with its last element."""
        if not self.queue:
            self.queue_until = None
        if not self.places and not self.marks:
            self.places_until = None

    def wake_next(self, now: int, readers: int) -> None:
        """The first live waiter is woken if its attempt would be granted now: the waiter
        chosen at NOW, with the end of its place read then, even if that place ends before
        the script pushes the wake-up (no one else is woken, whatever its role)."""
        if self.writer or not self.queue:
            return
        head = self.live_head(now)
        if head is None or (readers > 0 and head in self.marks):
            return
        if head not in self.woken:
            self.woken.add(head)
            self.wake_ends[head] = self.places[head]

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

        foreign_until = self.foreign_until

        def busy(at: int, pttl_at: int) -> int:
            if foreign_until is not None:
                rest = foreign_until - pttl_at
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
            # First in line, it kept out whoever is behind it: that one is woken if it
            # may come in now, as on a withdrawal.
            if head == token and not foreign:
                self.wake_next(now, len(self.readers))
            return Expect([0, 0])

        def recheck(at: int, pttl_at: int) -> int:
            wait = busy(at, pttl_at)
            if ahead is not None:
                wait = min(ahead - at, ttl) if wait <= 0 else min(wait, ahead - at)
            if head is not None and head != token:
                wait = min(wait, head_until - at)
            return max(1, wait)

        # The place: kept if live, else taken at the tail; its end is read back.
        had = self.places.get(token)
        if had is not None and had <= now:
            if token in self.queue:
                self.queue.remove(token)
            had = None
        if had is None:
            self.queue.append(token)
        self.places[token] = had or 0  # set from the reply's block and NOW, see place()
        if writing:
            self.marks.add(token)
        self.woken.discard(token)
        self.wake_ends.pop(token, None)
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

    def __str__(self) -> str:
        wait = {None: "fail-fast", 0: "last"}.get(self.left, f"waiting {self.left} ms")
        more = f", ttl {self.ttl}, {wait}" if self.op is Op.ACQUIRE else ""
        more = f", ttl {self.ttl}" if self.op is Op.RENEW else more
        return f"{self.op.value} {_tok(self.token)}{more}"


@dataclass
class Tried:
    """One rerun of the model within a step: at NOW, with the script's start, what it
    answers and why that is not what Redis did (None: it is)."""

    now: int
    start: int
    expect: Expect
    why: str | None


def _tok(token: str) -> str:
    return token[0] + token[-1]


def _ms(instant: int | None, base: int) -> str:
    """An instant as ms from ``base`` (Redis's -1 and -2 as they are)."""
    if instant is None or abs(instant) < 1_000_000_000:
        return str(instant)
    return f"{instant - base:+d}"


def _span(before: int, after: int) -> str:
    return f"{before}..{_ms(after, before)}"


def _show(m: Model, base: int) -> list[str]:
    writer = m.writer and (_tok(m.writer[0]), m.writer[1], _ms(m.writer[2], base))
    return [
        f"readers {({_tok(t): _ms(e, base) for t, e in m.readers.items()})}, writer {writer}, "
        f"counter {m.counter}, top {m.top}",
        f"queue {[_tok(t) for t in m.queue]}, places "
        f"{({_tok(t): _ms(e, base) for t, e in m.places.items()})}, writers' "
        f"{sorted(_tok(t) for t in m.marks)}, woken {sorted(_tok(t) for t in m.woken)}",
        f"records {({_tok(t): _ms(e, base) for t, e in m.records.items()})}",
        f"expiries: key {_ms(m.key_until, base)}, readers {_ms(m.readers_until, base)}, "
        f"queue {_ms(m.queue_until, base)}, places {_ms(m.places_until, base)}, "
        f"another primitive's key {_ms(m.foreign_until, base)}",
    ]


def _runs(tried: list[Tried], base: int) -> list[str]:
    """The reruns, those at consecutive NOWs that fare alike (but for numbers that move
    with NOW) on one line."""
    out: list[list[Any]] = []
    for run in sorted(tried, key=lambda r: (r.start - r.now, r.now)):
        clocks = ""
        if run.start != run.now:
            clocks += f" / start {_ms(run.start, base)}"
        reply = run.expect.reply
        shown = ["NEW" if v == NEW else v for v in reply] if isinstance(reply, list) else reply
        text = f": answers {shown}; {run.why or 'fits'}"
        kind = (run.start == run.now, re.sub(r"[-+]?\d+", "#", text))
        if out and out[-1][0] == kind and out[-1][2] + 1 == run.now and not clocks:
            out[-1][2:4] = [run.now, text]
        else:
            out.append([kind, run.now, run.now, text, text, clocks])
    return [
        f"NOW {_ms(a, base)}{clocks}{first}"
        if a == b
        else f"NOW {_ms(a, base)}..{_ms(b, base)}{first}"
        + ("" if first == last else f" .. {last[2:]}")
        for _, a, b, last, first, clocks in out
    ]


class Snapshot:
    """Redis's state as one MULTI reads it, between two TIMEs (t0, t1)."""

    def __init__(self, values: list[Any]) -> None:
        (s0, us0), kind, fields, key_at, members, readers_at, counter, *rest = values
        queue, places, queue_at, places_at, *per_token, (s1, us1) = rest
        self.t0 = int(s0) * 1000 + int(us0) // 1000
        self.t1 = int(s1) * 1000 + int(us1) // 1000
        self.kind = kind
        fields = fields if isinstance(fields, dict) else {}
        self.hash = {k.decode(): v.decode() for k, v in fields.items()}
        self.key_at = key_at
        self.members: list[tuple[bytes, float]] = members
        self.readers_at = readers_at
        self.counter = counter
        self.queue: list[bytes] = queue
        self.places = {k.decode(): v.decode() for k, v in places.items()}
        self.queue_at = queue_at
        self.places_at = places_at
        self.wakes: list[list[bytes]] = per_token[::3]
        self.wakes_at: list[int] = per_token[1::3]
        self.records: list[bytes | None] = per_token[2::3]

    def show(self, base: int) -> list[str]:
        hash_ = {k: _ms(int(v), base) if k == "x" else v for k, v in self.hash.items()}
        places = {
            k: v if k.startswith(">") else _ms(int(v), base) for k, v in self.places.items()
        }
        woken = [_tok(t) for t, w in zip(TOKENS, self.wakes, strict=True) if w]
        records = [_tok(t) for t, r in zip(TOKENS, self.records, strict=True) if r]
        return [
            f"{KEY}: a {self.kind.decode()} {hash_}, expiring at {_ms(self.key_at, base)}",
            f"readers {({k.decode(): _ms(int(s), base) for k, s in self.members})}, "
            f"expiring at {_ms(self.readers_at, base)}; counter {self.counter}",
            f"queue {[_tok(q.decode()) for q in self.queue]}, expiring at "
            f"{_ms(self.queue_at, base)}; places {places}, expiring at "
            f"{_ms(self.places_at, base)}",
            f"wake lists with a wake-up {woken}; release records {records}",
        ]


class ReadWriteMachine(RuleBasedStateMachine):
    server: RedisServer

    @initialize()
    def start(self) -> None:
        SEEN.saw("examples")
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
        #: The example's steps so far, for a failure's account.
        self.history: list[str] = []
        self.tried: list[Tried] = []

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
        prior = copy.deepcopy(self.model)
        self.tried = []
        raw: Any = self.r.evalsha(script.sha, len(keys), *keys, *args)
        after = self.now()
        reply: list[int] | int = [int(v) for v in raw] if isinstance(raw, list) else int(raw)
        try:
            self.model, at = self.match(sent, reply, before, after)
        except AssertionError as error:
            raise AssertionError(
                self.account(error, sent, reply, before, after, prior, None)
            ) from None
        self.history.append(
            f"{_span(before, after)} {sent} -> {reply}, at NOW {_ms(at, before)}"
        )
        if held_back and isinstance(reply, list) and reply[0] <= 0:
            SEEN.saw("a reader held back by a waiting writer")
        if self.model.woken - prior.woken:
            SEEN.saw("a waiter woken")
        self.tally(sent, reply)

    def run_model(self, model: Model, sent: Sent, now: int) -> Expect:
        if sent.op is Op.ACQUIRE:
            return model.acquire(sent.token, sent.ttl, sent.left, now)
        if sent.op is Op.RENEW:
            return model.renew(sent.token, sent.ttl, now)
        if sent.op is Op.RELEASE:
            return model.release(sent.token, now)
        return model.withdraw(sent.token, now)

    def starts(self, now: int, before: int) -> list[int]:
        """The script's starts that make a difference at NOW ``now``: NOW, or the expiry
        of a key (then still there)."""
        starts = {u for u in self.model.key_instants() if before <= u < now}
        return [now, *sorted(starts, reverse=True)]

    def match(
        self, sent: Sent, reply: list[int] | int, before: int, after: int
    ) -> tuple[Model, int]:
        """The model after the step, at a NOW (and the script's start, see
        :meth:`starts`) within the step that gives the reply Redis gave, the instants it
        wrote, and the state Redis holds: every ms of the step is tried, so that no
        instant the model does not list can fall between two tries."""
        read = self.read_back(sent)
        fitting: list[tuple[Model, int, str]] = []
        for now in range(before, after + 1):
            for start in self.starts(now, before):
                model = copy.deepcopy(self.model)
                model.start = start
                expect = self.run_model(model, sent, now)
                exact = self.exact_now(sent, expect, reply, read)
                why = (
                    f"it wrote its instants at NOW {_ms(exact, before)}"
                    if exact is not None and exact != now
                    else self.fits(model, sent, expect, reply, now, after, read)
                )
                self.tried.append(Tried(now, start, expect, why))
                if why is None:
                    model.start = None
                    if all(repr(model) != repr(m) for m, _, _ in fitting):
                        clocks = "" if start == now else "with the script's start before NOW"
                        fitting.append((model, now, clocks))
        if not fitting:
            raise AssertionError(
                f"{sent}: Redis answered {reply}; the model, at each NOW the step may have "
                f"seen in [{before}, {after}], answers otherwise (its reruns below)"
            )
        # Where NOWs give the same reply but not the same state (something ended within
        # the step), Redis's state tells which one the script saw.
        snap = self.snapshot()
        errors: list[AssertionError] = []
        for model, now, clocks in fitting:
            try:
                self.verify(model, snap)
            except AssertionError as error:
                errors.append(error)
                continue
            if clocks:
                SEEN.saw(f"a step followed only {clocks}")
            return model, now
        lines = [
            f"at NOW {_ms(now, before)}: {error}"
            for (_, now, _), error in zip(fitting, errors, strict=True)
        ]
        raise AssertionError(
            f"{sent}: Redis answered {reply}, as the model does at "
            f"{len(fitting)} NOW(s) of the step, but holds what none of them holds:\n"
            + "\n".join(lines)
        )

    def read_back(self, sent: Sent) -> dict[str, Any]:
        """What the step may have written, read once right after it: the instants that
        give its exact NOW, and the queue's expiry."""
        pipe = self.r.pipeline(transaction=True)
        pipe.time()
        pipe.hget(KEY, "x")
        pipe.zscore(READERS, sent.token)
        pipe.hget(PLACES, sent.token)
        pipe.pexpiretime(QUEUE)
        pipe.pexpiretime(PLACES)
        (seconds, micros), x, score, place, queue_at, places_at = pipe.execute(
            raise_on_error=False
        )

        def number(value: Any) -> int | None:
            if value is None or isinstance(value, Exception):
                return None
            return int(float(value))

        return {
            f"HGET {KEY}": number(x),
            f"ZSCORE {READERS}": number(score),
            f"HGET {PLACES}": number(place),
            "queue_at": queue_at,
            "places_at": places_at,
            "t": int(seconds) * 1000 + int(micros) // 1000,
        }

    def exact_now(
        self, sent: Sent, expect: Expect, reply: list[int] | int, read: dict[str, Any]
    ) -> int | None:
        """The script's NOW, from the instant it wrote where the model says it wrote one."""
        if expect.stamp is None:
            return None
        command, key, _, plus = expect.stamp
        value = read[f"{command} {key}"]
        if value is None:
            return None
        if expect.recheck is None:
            return int(value) - plus
        # A refused waiting attempt: its place ends NOW + its life, unless it was
        # promised longer (then NOW is not written anywhere: any in the step will do).
        if not (isinstance(reply, list) and reply[0] == 0 and sent.left):
            return None
        life = min(sent.left, reply[1], LONGEST_BLOCK_MS) + GRACE
        promised = self.model.places.get(sent.token, 0)
        return None if value == promised else int(value) - life

    def fits(
        self,
        model: Model,
        sent: Sent,
        expect: Expect,
        reply: list[int] | int,
        now: int,
        after: int,
        read: dict[str, Any],
    ) -> str | None:
        """Why the reply is not the model's at NOW ``now`` (None: it is)."""
        if expect.recheck is not None:
            assert isinstance(reply, list) and sent.left is not None
            if not isinstance(reply, list) or reply[0] != 0:
                return "it refuses and queues"
            # Another primitive's key: its PTTL counts from Redis's clock as the script
            # runs, at NOW or later.
            pttls = range(now, after + 1) if expect.foreign else range(now, now + 1)
            blocks = sorted({expect.recheck(now, at) for at in pttls})
            if reply[1] not in blocks:
                return f"it blocks {blocks}"
            old = (model.queue_until, model.places_until)
            life = model.place(sent.token, sent.left, reply[1], now)
            # The queue's PTTL and PEXPIREs count from Redis's clock as they run: its
            # expiry, and its places', is read back; a step slower than the place's life
            # (a loaded machine) finds them gone, and then they ended unread.
            at = (read["queue_at"], read["places_at"])
            lapsed = now + life < read["t"]
            for was, a in zip(old, at, strict=True):
                if not (a == was or now + life <= a <= after + life or (a == -2 and lapsed)):
                    return f"the queue and its places expire at {at}, not {old} nor {life} ms on"
            model.queue_until, model.places_until = (
                a if a != -2 else model.queue_until for a in at
            )
            return None
        if not expect.new_fence:
            return None if reply == expect.reply else f"it answers {expect.reply}"
        assert isinstance(reply, list) and isinstance(expect.reply, list)
        slot = 1 if sent.left is None else 0
        shape = [v if i != slot else reply[slot] for i, v in enumerate(expect.reply)]
        fence = reply[slot]
        # A new fence: the counter's next, or the clock's floor as the script read TIME.
        floor_ok = floor_at(now) <= fence <= floor_at(after)
        if reply != shape or not (fence == (self.model.counter or 0) + 1 or floor_ok):
            return f"it answers {expect.reply} (NEW: a new fence)"
        assert fence > self.model.top, f"a new fence {fence}, not above {self.model.top}"
        model.counter = fence
        if model.writer and model.writer[1] == NEW:
            model.writer = (model.writer[0], fence, model.writer[2])
        return None

    # -- the checks ---------------------------------------------------------------------

    def tally(self, sent: Sent, reply: list[int] | int) -> None:
        m = self.model
        if sent.op is Op.ACQUIRE and isinstance(reply, list):
            granted = reply[0] == 1 if sent.left is None else reply[0] > 0
            if granted:
                m.top = max(m.top, reply[1] if sent.left is None else reply[0])
                if sent.token not in self.granted:
                    self.granted.append(sent.token)
                SEEN.saw(f"{ROLE[sent.token].value} granted")
            else:
                SEEN.saw(f"{ROLE[sent.token].value} refused")

    def snapshot(self) -> Snapshot:
        """Redis's state, read in one MULTI between two TIMEs.  Keys expire by the clock
        as each command runs: a MULTI that spans a ms boundary is read again (a few
        times), so that key instants are judged at one known ms."""
        for _ in range(5):
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
                pipe.pexpiretime(WAKE + token)
                pipe.get(released_key(KEY, token))
            pipe.time()
            values = pipe.execute(raise_on_error=False)
            snap = Snapshot(values)
            if snap.t1 == snap.t0:
                break
        return snap

    def verify(self, m: Model, snap: Snapshot) -> None:
        """Redis's state is the model's (what ends within a ms of the read is let be)."""
        t, t1 = snap.t0, snap.t1

        def near(instant: int | None) -> bool:
            return instant is not None and t - 1 <= instant <= t1 + 1

        def alive(until: int | None) -> int | None:
            """A key's expiry instant, if it has not passed at t (else None: gone)."""
            return until if until is not None and t <= until else None

        def crossed(until: int | None) -> bool:
            """The key may have expired between the MULTI's first command and a later."""
            return until is not None and t <= until < t1

        # Leases: never a live writer beside another live lease; each reader its own.
        live_readers = {k.decode(): int(s) for k, s in snap.members if s > t}
        hash_ = snap.hash
        writer = None
        if "w" in hash_ and int(hash_["x"]) > t:
            writer = (hash_["w"], int(hash_["f"]), int(hash_["x"]))
        assert not (writer and live_readers), f"a writer {writer} beside readers {live_readers}"
        model_readers = {k: v for k, v in m.readers.items() if v > t}
        if not crossed(m.readers_until):
            assert live_readers == model_readers, f"readers {live_readers}, model {model_readers}"
        model_writer = m.writer if m.writer and m.writer[2] > t else None
        if not crossed(m.key_until):
            assert writer == model_writer, f"writer {writer}, model {model_writer}"
        assert int(snap.counter or 0) == (m.counter or 0), (
            f"counter {snap.counter}, model {m.counter}"
        )
        # The keys' life.
        kind, key_at = snap.kind, snap.key_at
        if alive(m.foreign_until) and not near(m.foreign_until):
            assert kind == b"string" and key_at == m.foreign_until, (
                f"{KEY} is a {kind} expiring at {key_at}, not another primitive's until "
                f"{m.foreign_until}"
            )
        elif not near(m.key_until) and not near(m.foreign_until):
            if alive(m.key_until) is None:
                assert key_at == -2, f"{KEY} outlived its leases"
            else:
                assert kind == b"hash" and hash_.get("rw") == "1"
                assert key_at == m.key_until, f"{KEY} expires at {key_at}, not {m.key_until}"
        if not near(m.readers_until):
            expires = alive(m.readers_until)
            assert snap.readers_at == (-2 if expires is None else expires), (
                f"{READERS} expires at {snap.readers_at}, not {m.readers_until}"
            )
        # The queue: Redis's list as the model keeps it, the live places as the spec's.
        if not near(m.queue_until):
            listed = [q.decode() for q in snap.queue]
            queued = [] if alive(m.queue_until) is None else m.queue
            assert listed == queued, f"queue {listed}, model {queued}"
            if queued:
                assert snap.queue_at == m.queue_until, (
                    f"the queue expires at {snap.queue_at}, the model's at {m.queue_until}"
                )
        if not near(m.places_until):
            modelled = {tok: str(end) for tok, end in m.places.items()}
            modelled |= {">" + tok: "w" for tok in m.marks}
            if alive(m.places_until) is None:
                modelled = {}
            assert snap.places == modelled, f"places {snap.places}, model {modelled}"
            if modelled:
                assert snap.places_at == m.places_until, (
                    f"the places expire at {snap.places_at}, the model's at {m.places_until}"
                )
        wakes = zip(TOKENS, snap.wakes, snap.wakes_at, snap.records, strict=True)
        for token, wake, wake_at, record in wakes:
            end = m.wake_ends.get(token)
            lingers = (
                token not in m.places
                and end is not None
                and wake == [b"1"]
                and end <= wake_at <= end + LINGER
            )
            if (m.places.get(token, 0) > t1 + 2 or token not in m.places) and not lingers:
                expected = [b"1"] if token in m.woken else []
                assert wake == expected, f"{token} woken {wake}, model {token in m.woken}"
            if not near(m.records.get(token)):
                assert (record == token.encode()) == (token in m.records), (
                    f"{token}'s release record {record!r}, model {m.records.get(token)}"
                )
        if live_readers and writer is None:
            SEEN.saw("readers held at once" if len(live_readers) > 1 else "a reader held")
        if any(role == "write" for _, role, _ in m.live_places(t)) and live_readers:
            SEEN.saw("a writer waited while readers held")

    # -- a failure's account ------------------------------------------------------------

    def account(
        self,
        error: AssertionError,
        sent: Sent,
        reply: list[int] | int,
        before: int,
        after: int,
        prior: Model,
        snap: Snapshot | None,
    ) -> str:
        """The failure, with all it takes to tell the model's fault from the script's: the
        step, the model before it, each rerun of the model within the step, Redis's state
        and the example's steps so far (instants are shown as ms from the step's start,
        Redis time ``before``)."""
        snap = snap or self.snapshot()
        lines = [
            str(error),
            "",
            f"the step: {sent}, sent at Redis time {before}, answered {reply} by "
            f"{_ms(after, before)}",
            "the model before it:",
            *(f"  {line}" for line in _show(prior, before)),
            "its reruns (NOW / the script's start: why it does not fit):",
            *(f"  {line}" for line in _runs(self.tried, before)),
            f"Redis after it (read at {_ms(snap.t0, before)}..{_ms(snap.t1, before)}):",
            *(f"  {line}" for line in snap.show(before)),
            "the example's steps (Redis time, ms):",
            *(f"  {line}" for line in self.history),
        ]
        return "\n".join(lines)

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
            SEEN.saw("resent")
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
        self.history.append(f"{now} another primitive's key, until {self.model.foreign_until}")
        SEEN.saw("another primitive took the key")

    @rule()
    def let_time_pass(self) -> None:
        """Redis's clock passes the next instant at which a lease or a place ends."""
        now = self.now()
        soon = [i for i in self.model.instants() if now <= i <= now + NEAR]
        if soon:
            self.history.append(f"{now} time passes {min(soon)}")
            self.sleep_past(min(soon) + 1)
            SEEN.saw("waited for an instant")

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

