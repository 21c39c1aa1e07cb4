"""The election's scripts driven step by step on a real Redis by several candidates, each
step checked against a model of the Redis side of ``spec/Election.tla`` (DistLock's
RedisStep with the handoff, and the leader record ``rec`` its grants write).

Four candidates (tokens, each with an identity of its own, one of them not ASCII) send
what :func:`distlock._protocol.encode` makes of their ``Kind.CAMPAIGN`` commands, as the
election's drivers do: a campaign's attempt (W_ACQUIRE with the leader record and the
identity; a waiting one that asks to be handed the key, a waiting one that asks to be
woken, or the last one), a withdrawal (WITHDRAW), a resignation (RELEASE), a renewal
(E_RENEW, with one of two TTLs), and the observer's read (E_LEADER).  The world: another
key of the slot takes a fence (the shared counter moves on: the spec's SharedIncr), a
waiter reads its wake list (what its BLPOP would answer), the key's lease ends (alone,
the record lingering, or with the record: the spec's EKeyLost), a place in the queue ends
(its waiter died).

No outcome depends on the machine's speed, so that Hypothesis replays every example as it
ran: leases and handed leases last minutes, and places too (the scripts' QUEUE_GRACE_MS
argument is made as long); what ends, ends because a rule ends it.  A lease ends by a
PEXPIRE of 1 ms and a poll of Redis until the key is gone; a place ends by its end being
written into the past, as a waiter that stopped renewing it leaves it.  Time enters only
the numbers a script writes from Redis's clock (a TTL's instant, a place's end, a fence's
clock floor, a refusal's block), which each lie between Redis's TIME read before the step
and after it.

The model holds the key's holder and its expiry, the leader record (token, identity,
fence) and its expiry, the fence counter, the queue as Redis keeps it (an ended place
stays until a script drops it from the head), each place's end, its handoff TTL and its
identity note, the wake lists, and the release records.  Checked after every step,
against Redis read in one MULTI: all of that; no key of the election the model does not
know of; and the properties:

- LeaderReadSound: E_LEADER reports nobody or the key's holder, with its own identity
  and the last fence Redis issued to it (never an identity that was never granted), and
  the key's PTTL; and exactly what the model reports;
- the record names the key's holder whenever the key is held (after a campaign's grant,
  a handoff, a renewal), and does not expire before the lease it names;
- every new fence is larger than every fence issued before it;
- at most one holder: a key handed over in a wake list ('=fence') belongs to the key's
  holder, unless that lease has since ended or been given back.

Seen to catch (each script broken by hand, the machine run, the script restored): the
record's PEXPIRE dropped from lib/hands_off.lua's ``handed`` (a record with no TTL); a
handoff's record naming the caller's identity (ARGV[7], the withdrawing candidate's)
rather than the one its waiter's place keeps; E_LEADER's token check dropped (it reports
a record the key's holder did not write: the story below has it report a resigned
leader while a Lock holds the key); the identity note's HDEL dropped from
lib/queue.lua's ``leave`` (a stale ``#token`` stays in the places).  E_RENEW giving the
record its TTL before the key's (the record may expire before its lease), which the
machine meets only when a renewal spans a ms boundary, is caught every time by the
regression test at the end.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import redis
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import LONGEST_BLOCK_MS
from distlock._fence_floor import floor_at
from distlock._protocol import (
    ACQUIRE,
    E_LEADER,
    E_RENEW,
    RELEASE,
    W_ACQUIRE,
    WITHDRAW,
    encode,
    fence_key,
    leader_key,
    queue_keys,
    released_key,
)
from tests.properties import profiles
from tests.properties.seen import Seen
from tests.redis_server import RedisServer, redis_ms

KEY: Final = "ep:k"
RECORD: Final = leader_key(KEY)
FENCES: Final = fence_key(KEY)
QUEUE, PLACES, WAKE = queue_keys(KEY, Kind.CAMPAIGN)
TOKENS: Final = tuple(c * 31 + str(i) for i, c in enumerate("abcd", 1))
IDENTITY: Final = dict(zip(TOKENS, ("node-1", "node-2", "node 3", "nœud-4"), strict=True))
#: A Lock of the election's name (the lock's own ACQUIRE, which writes no record).
LOCK_TOKEN: Final = "f" * 32
#: A candidate's lease, and the TTL a release hands the key over with: both outlive every
#: example (a lease ends when a rule ends it), and differ, so that each instant tells
#: which TTL set it.
LONG: Final = 600_000
HAND: Final = 300_000
TTLS: Final = {"long": LONG, "hand": HAND}
#: A campaign's attempt: (the ms it may still wait, 0: the last; the TTL a release may
#: hand it the key with, 0: woken instead).
MODES: Final = {"waiting, handed": (LONG, HAND), "waiting, woken": (LONG, 0), "last": (0, HAND)}
#: As drawn: mostly as an election's campaign waits (handed the key, renewed at once).
DRAWN_MODES: Final = ("waiting, handed",) * 3 + ("waiting, woken", "last")
#: A place outlives its block by this much (the scripts' QUEUE_GRACE_MS argument): longer
#: than any example, so that a place ends only when a rule ends it.
GRACE: Final = 900_000
#: How long a lease given a PEXPIRE of 1 ms may take to be gone (a hang, not a timing
#: claim).
GONE_WITHIN_S: Final = 10.0
SCRIPTS: Final = (W_ACQUIRE, WITHDRAW, RELEASE, E_RENEW, E_LEADER, ACQUIRE)
#: A new fence, until the step's counter tells it.
NEW: Final = -1
SEEN: Final = Seen()



def _tok(token: str | None) -> str:
    return "-" if token is None else token[0] + token[-1]


#: An instant a script wrote from Redis's clock: known to lie in [lo, hi] until Redis is
#: read, then exact (lo == hi).
Span = tuple[int, int]


@dataclass
class Record:
    """The leader record: the token, identity and fence of the key's last grant."""

    tok: str
    id: str
    fence: int


@dataclass
class Model:
    """The Redis side of spec/Election.tla, with what the scripts keep beside it."""

    holder: str | None = None
    key_at: Span | None = None
    rec: Record | None = None
    rec_at: Span | None = None
    #: The fence counter (None: absent).
    counter: int | None = None
    queue: list[str] = field(default_factory=list)
    #: Each place's end (an ended one: in the past, written there by a rule).
    places: dict[str, Span] = field(default_factory=dict)
    hands: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    #: What each waiter's wake list holds: "1" (woken) or "=<fence>" (handed the key).
    wake: dict[str, list[str]] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    #: The step's instants: Redis's clock before it and after it.
    before: int = 0
    after: int = 0
    #: The step gave a new fence: between these (the counter's next, or its clock floor).
    fresh: Span | None = None
    #: The last fence Redis issued to each token (NEW until read).
    last_fence: dict[str, int] = field(default_factory=dict)
    #: Tokens handed the key in a wake list whose lease since ended, or was given back.
    lapsed: set[str] = field(default_factory=set)
    #: The identities a grant named in the record.
    granted_ids: set[str] = field(default_factory=set)

    def span(self, ttl: int) -> Span:
        return (self.before + ttl, self.after + ttl)

    def ended(self, token: str) -> bool:
        lo, hi = self.places[token]
        assert hi < self.before or lo > self.after, f"{_tok(token)}'s place ends in the step"
        return hi < self.before

    # lib/queue.lua
    def leave(self, token: str) -> None:
        if token in self.queue:
            self.queue.remove(token)
        self.places.pop(token, None)
        self.hands.pop(token, None)
        self.notes.pop(token, None)
        self.wake.pop(token, None)

    def live_head(self) -> str | None:
        while self.queue:
            head = self.queue[0]
            if head in self.places and not self.ended(head):
                return head
            self.queue.pop(0)
            self.leave(head)
        return None

    def hand_head(self) -> None:
        """The first live waiter is handed the key (its place keeps a TTL for it), else
        woken, unless a wake-up waits in its list already."""
        if not self.queue:
            return
        head = self.live_head()
        if head is None:
            return
        ttl = self.hands.get(head)
        if ttl:
            fence = self.handed(head, ttl, self.notes.get(head, ""))
            self.leave(head)
            self.wake[head] = [f"={fence}"]
            self.lapsed.discard(head)
        elif not self.wake.get(head):
            self.wake[head] = ["1"]

    # lib/claim.lua, lib/held.lua, lib/hands_off.lua
    def next_fence(self) -> int:
        low = (self.counter or 0) + 1
        self.fresh = (max(low, floor_at(self.before)), max(low, floor_at(self.after)))
        self.counter = NEW
        return NEW

    def handed(self, token: str, ttl: int, identity: str) -> int:
        """The key claimed for ``token``, and the record written: the fence (0: not)."""
        if self.holder is None:
            self.holder = token
            fence = self.next_fence()
        elif self.holder == token:
            assert self.counter is not None
            fence = self.counter
        else:
            return 0
        self.key_at = self.span(ttl)
        self.rec = Record(token, identity, fence)
        self.rec_at = self.span(ttl)
        self.last_fence[token] = fence
        self.granted_ids.add(identity)
        return fence

    # The scripts.
    def campaign(self, token: str, left: int, hand: int, reply: list[int]) -> list[int]:
        head = self.live_head()
        if self.holder == token or (self.holder is None and head in (None, token)):
            fence = self.handed(token, LONG, IDENTITY[token])
            self.leave(token)
            return [fence, 0]
        if left == 0:
            self.leave(token)
            return [0, 0]
        # Refused: the block is the holder's PTTL, cut to the rest of the head's place
        # when that is another's; or, the key free, the rest of the head's place cut to a
        # lease.  Both count down as the step runs.
        assert head is not None or self.holder is not None
        head_until = self.places[head][0] if head is not None else 0

        def block(at: int) -> int:
            if self.holder is None:
                return max(1, min(head_until - at, LONG))
            assert self.key_at is not None
            wait = self.key_at[0] - at
            if head is not None and head != token:
                wait = min(wait, head_until - at)
            return max(1, wait)

        # The reply's block, if it is one the step may have seen (else the model's own,
        # which the reply is then found to differ from).
        fits = reply[0] == 0 and block(self.after) <= reply[1] <= block(self.before)
        recheck = reply[1] if fits else block(self.before)
        life = min(left, recheck, LONGEST_BLOCK_MS) + GRACE
        had = self.places.get(token)
        if had is None:
            self.queue.append(token)
        old = had[0] if had is not None else 0
        self.places[token] = (max(old, self.before + life), max(old, self.after + life))
        if hand:
            self.hands[token] = hand
        self.notes[token] = IDENTITY[token]
        self.wake.pop(token, None)
        return [0, recheck]

    def withdraw(self, token: str) -> int:
        head = self.live_head()
        self.leave(token)
        mine = self.holder == token
        if mine:
            self.holder, self.key_at = None, None
            self.lapsed.add(token)
        if (head == token or mine) and self.holder is None:
            self.hand_head()
        return 1

    def release(self, token: str) -> int:
        if self.holder != token:
            return 1 if token in self.released else 0
        self.holder, self.key_at = None, None
        self.lapsed.add(token)
        self.released.add(token)
        self.hand_head()
        return 1

    def lock_acquire(self) -> int:
        """ACQUIRE of a Lock of the same name: the key, a fence, and no record."""
        if self.holder is not None:
            return 0
        self.holder = LOCK_TOKEN
        self.key_at = self.span(LONG)
        return self.next_fence()

    def renew(self, token: str, ttl: int) -> int:
        if self.holder != token:
            return 0
        self.key_at = self.span(ttl)
        if self.rec is not None:
            self.rec_at = self.span(ttl)
        return 1

    def leader(self) -> Record | None:
        """What E_LEADER reports (the spec's LeaderRead)."""
        if self.holder is not None and self.rec is not None and self.rec.tok == self.holder:
            return self.rec
        return None

    # What Redis tells of the step: its new fence, and the instants it wrote.
    def settle(self, fence: int, top: int) -> None:
        if self.fresh is not None:
            lo, hi = self.fresh
            assert lo <= fence <= hi, f"a new fence {fence}, not in [{lo}, {hi}]"
            assert fence > top, f"a new fence {fence}, not above the last issued, {top}"
            self.fresh = None
            self.counter = fence
            if self.rec is not None and self.rec.fence == NEW:
                self.rec.fence = fence
            self.last_fence = {t: fence if f == NEW else f for t, f in self.last_fence.items()}
            self.wake = {t: [f"={fence}" if e == f"={NEW}" else e for e in w]
                         for t, w in self.wake.items()}

    def show(self) -> str:
        rec = self.rec and (_tok(self.rec.tok), self.rec.id, self.rec.fence)
        return (
            f"holder {_tok(self.holder)} until {self.key_at}, record {rec} until "
            f"{self.rec_at}, counter {self.counter}, queue {[_tok(t) for t in self.queue]}, "
            f"places {({_tok(t): e for t, e in self.places.items()})}, hands "
            f"{sorted(_tok(t) for t in self.hands)}, woken "
            f"{({_tok(t): w for t, w in self.wake.items()})}, released "
            f"{sorted(_tok(t) for t in self.released)}"
        )


def _pin(name: str, span: Span | None, actual: int) -> Span | None:
    """An instant the model knows within ``span`` (None: the key is gone), as Redis has
    it (PEXPIRETIME: -2 for a key that does not exist, -1 for one with no expiry)."""
    if span is None:
        assert actual == -2, f"{name} exists (expiring at {actual}); the model has it gone"
        return None
    assert span[0] <= actual <= span[1], f"{name} expires at {actual}, not within {span}"
    return (actual, actual)


class Snapshot:
    """Redis's state, read in one MULTI."""

    def __init__(self, r: redis.Redis) -> None:
        pipe = r.pipeline(transaction=True)
        pipe.time()
        pipe.get(KEY)
        pipe.pexpiretime(KEY)
        pipe.hgetall(RECORD)
        pipe.pexpiretime(RECORD)
        pipe.get(FENCES)
        pipe.lrange(QUEUE, 0, -1)
        pipe.hgetall(PLACES)
        pipe.pexpiretime(QUEUE)
        pipe.pexpiretime(PLACES)
        for token in TOKENS:
            pipe.lrange(WAKE + token, 0, -1)
            pipe.get(released_key(KEY, token))
        pipe.keys(f"*{KEY}*")
        (s, us), holder, self.key_at, rec, self.rec_at, counter, *rest = pipe.execute()
        queue, places, self.queue_at, self.places_at, *per_token, keys = rest
        self.now = int(s) * 1000 + int(us) // 1000
        self.holder = holder.decode() if holder else None
        self.rec = {k.decode(): v.decode() for k, v in rec.items()}
        self.counter = int(counter) if counter is not None else None
        self.queue = [t.decode() for t in queue]
        self.places = {k.decode(): v.decode() for k, v in places.items()}
        self.wake = {
            t: [e.decode() for e in w] for t, w in zip(TOKENS, per_token[::2], strict=True) if w
        }
        self.released = {t for t, v in zip(TOKENS, per_token[1::2], strict=True) if v}
        self.keys = {k.decode() for k in keys}

    def show(self) -> str:
        return (
            f"holder {_tok(self.holder)} until {self.key_at}, record {self.rec} until "
            f"{self.rec_at}, counter {self.counter}, queue {[_tok(t) for t in self.queue]} "
            f"until {self.queue_at}, places {self.places} until {self.places_at}, woken "
            f"{({_tok(t): w for t, w in self.wake.items()})}, released "
            f"{sorted(_tok(t) for t in self.released)}, keys {sorted(self.keys)}"
        )


class ElectionMachine(RuleBasedStateMachine):
    server: RedisServer

    @initialize()
    def start(self) -> None:
        SEEN.saw("examples")
        self.r = redis.Redis(port=self.server.port)
        for script in SCRIPTS:
            self.r.script_load(script.source)
        self.r.delete(KEY, RECORD, QUEUE, PLACES)
        for token in TOKENS:
            self.r.delete(WAKE + token, released_key(KEY, token))
        # The counter serves every key of the slot: fences count on from where it is.
        counter = self.r.get(FENCES)
        self.model = Model(counter=int(counter) if counter is not None else None)
        #: The largest fence issued so far.
        self.top = self.model.counter or 0
        self.history: list[str] = []

    def teardown(self) -> None:
        if hasattr(self, "r"):
            self.r.delete(KEY, RECORD, QUEUE, PLACES)
            for token in TOKENS:
                self.r.delete(WAKE + token, released_key(KEY, token))
            self.r.close()

    # -- one step -------------------------------------------------------------------------

    def now(self) -> int:
        return redis_ms(self.r)

    def send(self, op: Op, token: str, ttl: int = LONG, left: int = 0, hand: int = 0) -> Any:
        if token == LOCK_TOKEN:
            command = Command(op, KEY, token, ttl)
        else:
            command = Command(op, KEY, token, ttl, kind=Kind.CAMPAIGN, queue_ms=left,
                              identity=IDENTITY[token])
            command.hand_ms = hand
        script, keys, args = encode(command)
        if script is W_ACQUIRE or script is WITHDRAW:
            args[3] = GRACE
        prior = copy.deepcopy(self.model)
        before = self.now()
        raw: Any = self.r.evalsha(script.sha, len(keys), *keys, *args)
        after = self.now()
        reply: list[int] | int = [int(v) for v in raw] if isinstance(raw, list) else int(raw)
        m = self.model
        m.before, m.after = before, after
        try:
            if token == LOCK_TOKEN:
                expect: list[int] | int = m.lock_acquire()
            elif op is Op.ACQUIRE:
                assert isinstance(reply, list)
                expect = m.campaign(token, left, hand, reply)
            elif op is Op.WITHDRAW:
                expect = m.withdraw(token)
            elif op is Op.RELEASE:
                expect = m.release(token)
            else:
                expect = m.renew(token, ttl)
            snap = Snapshot(self.r)
            if m.fresh is not None:
                assert snap.counter is not None, "a new fence, and no counter"
                m.settle(snap.counter, self.top)
                self.top = snap.counter
            if isinstance(expect, list) and expect[0] == NEW:
                expect[0] = snap.counter or 0
            elif expect == NEW:
                expect = snap.counter or 0
            assert reply == expect, f"Redis answered {reply}, the model {expect}"
            self.verify(snap)
        except AssertionError as error:
            raise AssertionError(
                self.account(error, f"{op.value} {_tok(token)}", prior)
            ) from None
        self.history.append(
            f"{op.value} {_tok(token)} ttl {ttl} left {left} hand {hand} -> {reply} "
            f"({after - before} ms)"
        )
        return reply

    def account(self, error: AssertionError, what: str, prior: Model) -> str:
        return "\n".join([
            str(error),
            f"the step: {what}",
            f"the model before it: {prior.show()}",
            f"the model after it: {self.model.show()}",
            f"Redis: {Snapshot(self.r).show()}",
            "the example's steps:",
            *(f"  {line}" for line in self.history),
        ])

    # -- the checks -----------------------------------------------------------------------

    def verify(self, snap: Snapshot) -> None:
        """Redis's state is the model's, and the properties hold."""
        m = self.model
        assert snap.holder == m.holder, f"the key holds {_tok(snap.holder)}"
        m.key_at = _pin("the key", m.key_at, snap.key_at)
        assert snap.counter == m.counter, f"the counter is {snap.counter}"
        if m.rec is None:
            assert not snap.rec, f"a record {snap.rec}; the model has none"
        else:
            want = {"tok": m.rec.tok, "id": m.rec.id, "fence": str(m.rec.fence)}
            assert snap.rec == want, f"the record is {snap.rec}, not {want}"
        m.rec_at = _pin("the record", m.rec_at, snap.rec_at)
        assert snap.queue == m.queue, f"the queue is {[_tok(t) for t in snap.queue]}"
        for token, span in list(m.places.items()):
            raw = snap.places.get(token)
            assert raw is not None, f"{_tok(token)} has no place"
            m.places[token] = _pin(f"{_tok(token)}'s place", span, int(raw)) or span
        places = {t: str(e[0]) for t, e in m.places.items()}
        places |= {">" + t: str(h) for t, h in m.hands.items()}
        places |= {"#" + t: n for t, n in m.notes.items()}
        assert snap.places == places, f"the places are {snap.places}, not {places}"
        ends = [e[0] for e in m.places.values()]
        for name, at, exists in (
            ("queue", snap.queue_at, bool(m.queue)),
            ("places", snap.places_at, bool(places)),
        ):
            if exists:
                assert at >= max(ends, default=0) and at != -1, (
                    f"the {name} expire at {at}, before a place ends ({max(ends, default=0)})"
                )
        assert snap.wake == {t: w for t, w in m.wake.items() if w}, "the wake lists differ"
        assert snap.released == m.released, "the release records differ"
        expected_keys = {KEY} if m.holder else set()
        expected_keys |= {RECORD} if m.rec else set()
        expected_keys |= {QUEUE} if m.queue else set()
        expected_keys |= {PLACES} if places else set()
        expected_keys |= {WAKE + t for t, w in m.wake.items() if w}
        expected_keys |= {released_key(KEY, t) for t in m.released}
        assert snap.keys == expected_keys, (
            f"keys {sorted(snap.keys ^ expected_keys)} are not as the model has them"
        )
        # The record names the key's holder whenever the key is held, with the last fence
        # issued to it, and lives at least as long as the lease it names.
        if snap.holder is not None and snap.holder != LOCK_TOKEN:
            assert snap.rec.get("tok") == snap.holder, "the key is held, its record names another"
            assert snap.rec.get("id") == IDENTITY[snap.holder], "the record's identity"
            assert snap.rec.get("fence") == str(m.last_fence[snap.holder]), "the record's fence"
            assert snap.rec_at >= snap.key_at, (
                f"the record expires at {snap.rec_at}, before its lease ({snap.key_at})"
            )
        # At most one holder: a key handed over is the holder's, unless it since ended.
        for token, w in snap.wake.items():
            if w[0].startswith("="):
                assert token == snap.holder or token in m.lapsed, (
                    f"{_tok(token)} was handed the key, which {_tok(snap.holder)} holds"
                )

    @invariant()
    def leader_read_is_sound(self) -> None:
        """E_LEADER, read now: what the model reports, and LeaderReadSound."""
        if not hasattr(self, "model"):
            return
        before = self.now()
        raw: Any = self.r.evalsha(E_LEADER.sha, 2, KEY, RECORD)
        after = self.now()
        m = self.model
        expect = m.leader()
        if expect is None:
            assert raw == [], self.account(AssertionError(f"E_LEADER reports {raw}"), "read",
                                           m)
            return
        assert len(raw) == 3, f"E_LEADER answers {raw}"
        identity, fence, pttl = raw[0].decode(), int(raw[1]), int(raw[2])
        holder = m.holder
        assert holder is not None and m.key_at is not None
        problem = None
        if identity != IDENTITY[holder] or identity not in m.granted_ids:
            problem = f"E_LEADER reports {identity!r}; {_tok(holder)} ({IDENTITY[holder]}) holds"
        elif fence != m.last_fence[holder] or fence != expect.fence:
            problem = f"E_LEADER reports fence {fence}, not {m.last_fence[holder]}"
        elif not m.key_at[0] - after <= pttl <= m.key_at[0] - before or pttl <= 0:
            problem = f"E_LEADER reports PTTL {pttl}; the key expires at {m.key_at[0]}"
        if problem:
            raise AssertionError(self.account(AssertionError(problem), "read", m))
        SEEN.saw("a leader read")

    # -- rules ----------------------------------------------------------------------------

    def pick(self, pick: int) -> str:
        """The ``pick``-th of: the holder (four times), the queued, every candidate."""
        m = self.model
        holders = [m.holder] * 4 if m.holder in TOKENS else []
        chosen = [*holders, *m.queue, *TOKENS]
        return chosen[pick % len(chosen)]

    @rule(token=st.sampled_from(TOKENS), mode=st.sampled_from(DRAWN_MODES))
    def campaign(self, token: str, mode: str) -> None:
        left, hand = MODES[mode]
        was = self.model.holder
        reply = self.send(Op.ACQUIRE, token, LONG, left, hand)
        if reply[0] > 0:
            SEEN.saw("campaign re-granted to its holder" if was == token else "campaign granted")
        else:
            SEEN.saw("campaign refused" + (", queued" if left else ", gave up"))

    @rule(pick=st.integers(0, 11))
    def withdraw(self, pick: int) -> None:
        token = self.pick(pick)
        handed = self.model.holder == token
        head = self.model.queue[:1] == [token]
        before = self.model.holder
        self.send(Op.WITHDRAW, token, LONG)
        if self.model.holder not in (None, before):
            SEEN.saw("withdrawal handed the key on")
        elif handed:
            SEEN.saw("withdrawal gave the key back")
        elif head:
            SEEN.saw("withdrawal of the head")

    @rule(pick=st.integers(0, 11))
    def resign(self, pick: int) -> None:
        token = self.pick(pick)
        before = self.model.holder
        if self.send(Op.RELEASE, token, LONG) and before == token:
            SEEN.saw("resigned, handed on" if self.model.holder else "resigned")

    @rule(pick=st.integers(0, 11), ttl=st.sampled_from(sorted(TTLS)))
    def renew(self, pick: int, ttl: str) -> None:
        if self.send(Op.RENEW, self.pick(pick), TTLS[ttl]):
            SEEN.saw("renewed")

    @rule(pick=st.integers(0, 3))
    def a_lock_of_the_same_name_takes_the_key(self, pick: int) -> None:
        """A Lock named as the election takes the key while it is free (now and then):
        the key is held, and the record (if any) names somebody else."""
        if pick or self.model.holder is not None:
            return
        if self.model.rec is not None:
            SEEN.saw("a lock took the key beside a stale record")
        self.send(Op.ACQUIRE, LOCK_TOKEN)

    @rule(with_record=st.booleans())
    def lease_ends(self, with_record: bool) -> None:
        """The holder's lease runs out (it died, or lost its renewals): the key expires,
        with its record, or alone (the record may outlive it by a ms, or be kept by an
        eviction): either way, no read may name it any more."""
        m = self.model
        if m.holder is None:
            return
        self.r.pexpire(KEY, 1)
        if with_record:
            self.r.pexpire(RECORD, 1)
        gone = [KEY, RECORD] if with_record else [KEY]
        deadline = time.monotonic() + GONE_WITHIN_S
        while self.r.exists(*gone):
            assert time.monotonic() < deadline, "a key given 1 ms is still there"
            time.sleep(0.001)
        self.history.append(f"{_tok(m.holder)}'s lease ends" + (", and its record" * with_record))
        m.lapsed.add(m.holder)
        m.holder, m.key_at = None, None
        if with_record:
            m.rec, m.rec_at = None, None
        self.verify(Snapshot(self.r))
        SEEN.saw("lease ended")

    @rule(pick=st.integers(0, 7))
    def place_ends(self, pick: int) -> None:
        """A waiter stops renewing its place (it died): the place's end is in the past."""
        m = self.model
        placed = sorted(m.places)
        if not placed:
            return
        token = placed[pick % len(placed)]
        end = self.now() - 1
        self.r.hset(PLACES, token, end)
        m.places[token] = (end, end)
        self.history.append(f"{_tok(token)}'s place ends")
        self.verify(Snapshot(self.r))
        SEEN.saw("place ended")

    @rule()
    def another_key_takes_a_fence(self) -> None:
        """A lock on another key of the slot is granted: the shared counter moves on."""
        m = self.model
        fence = int(self.r.incr(FENCES))
        assert fence == (m.counter or 0) + 1
        m.counter = self.top = fence
        self.history.append(f"another key takes fence {fence}")

    @rule(pick=st.integers(0, 7))
    def read_wake_list(self, pick: int) -> None:
        """A waiter reads its wake list, as its BLPOP would."""
        m = self.model
        woken = sorted(t for t, w in m.wake.items() if w)
        if not woken:
            return
        token = woken[pick % len(woken)]
        element: Any = self.r.lpop(WAKE + token)
        expected = m.wake[token].pop(0)
        assert element is not None and element.decode() == expected
        if not m.wake[token]:
            del m.wake[token]
        self.history.append(f"{_tok(token)} reads {expected}")
        SEEN.saw("read a handed key" if expected.startswith("=") else "read a wake-up")

    @rule()
    def leader_read_writes_nothing(self) -> None:
        """Two reads in a row report the same, and Redis holds what it held."""
        if not hasattr(self, "model"):
            return
        first = Snapshot(self.r).show()
        a = self.r.evalsha(E_LEADER.sha, 2, KEY, RECORD)
        b = self.r.evalsha(E_LEADER.sha, 2, KEY, RECORD)
        assert a[:2] == b[:2] and Snapshot(self.r).show() == first
        SEEN.saw("leader read" + (" nobody" if not a else ""))


def test_the_election_scripts_follow_the_model(redis_server: RedisServer) -> None:
    ElectionMachine.server = redis_server
    run_state_machine_as_test(ElectionMachine, settings=profiles.scaled(10, floor=25, steps=40))
    print(f"election stateful: {dict(sorted(SEEN.items()))}")
    # What each run meets varies (a handoff needs a holder's resignation or withdrawal
    # while a candidate that asked to be handed the key is first): the handoffs' stories
    # are told for certain by the test below.
    for what in ("campaign granted", "campaign refused, queued", "a leader read"):
        assert SEEN.get(what), f"no step: {what}"


def test_the_election_stories_step_by_step(redis_server: RedisServer) -> None:
    """The same machine, its rules taken in a fixed order: a resignation hands the key on
    with the record; the new leader, handed the key unawares, withdraws and gives it back;
    the record it leaves is never reported, though a Lock of the same name holds the key;
    a dead waiter's place is passed over."""
    ElectionMachine.server = redis_server
    before = dict(SEEN)
    m = ElectionMachine()
    a, b, c, d = TOKENS
    steps: list[Callable[[], None]] = [
        m.start,
        lambda: m.campaign(a, "waiting, handed"),  # granted
        lambda: m.campaign(b, "waiting, handed"),  # queued
        lambda: m.campaign(c, "waiting, woken"),  # queued behind b
        lambda: m.renew(0, "hand"),  # a's
        lambda: m.resign(0),  # a's: handed to b, the record with it
        lambda: m.read_wake_list(0),  # b's "=fence"
        lambda: m.withdraw(0),  # b gives the key back: c is woken, not handed
        lambda: m.a_lock_of_the_same_name_takes_the_key(0),  # beside b's stale record
        m.leader_read_writes_nothing,  # nobody leads
        lambda: m.lease_ends(False),  # the Lock's
        lambda: m.campaign(c, "waiting, handed"),  # granted: first in line
        lambda: m.campaign(d, "waiting, handed"),  # queued
        lambda: m.place_ends(0),  # d's: it died
        lambda: m.resign(0),  # c's: nobody to hand it to
        lambda: m.campaign(a, "last"),  # granted
    ]
    try:
        for step in steps:
            step()
            m.leader_read_is_sound()
        assert m.model.holder == a and not m.model.queue
    finally:
        m.teardown()

    def new(what: str) -> int:
        return SEEN.get(what, 0) - before.get(what, 0)

    assert new("resigned, handed on") == 1 and new("read a handed key") == 1
    assert new("withdrawal gave the key back") == 1 and new("read a wake-up") == 0
    assert new("a lock took the key beside a stale record") == 1
    assert new("leader read nobody") == 1 and new("resigned") == 1


def test_a_renewal_never_leaves_the_record_to_expire_before_its_lease(
    fresh_redis: RedisServer,
) -> None:
    """E_RENEW gives the key its TTL before the record.  Redis before 7.2 reads its clock
    at each command of a script, so a renewal that gave the record its TTL first, across
    a ms boundary, left it to expire before the lease it names; a renewal run in that last
    ms of the lease finds the key its own and renews it, while the record is gone, and
    ``leader()`` reports nobody for the whole renewed lease.  Here every PEXPIRE publishes
    a keyspace notification to patterns made to take ms to refute, so that every renewal
    spans a ms boundary: the record's instant is then strictly after the key's."""
    r = redis.Redis(port=fresh_redis.port)
    sub = r.pubsub()
    try:
        key = "er:" + "x" * 20_000
        r.config_set("notify-keyspace-events", "Kg")
        sub.psubscribe(*["*" + "x*" * 200 + f"y{i}" for i in range(200)])
        token = TOKENS[0]
        campaign = Command(Op.ACQUIRE, key, token, LONG, kind=Kind.CAMPAIGN, queue_ms=0,
                           identity=IDENTITY[token])
        script, keys, args = encode(campaign)
        assert int(r.eval(script.source, len(keys), *keys, *args)[0]) > 0
        renew = Command(Op.RENEW, key, token, HAND, kind=Kind.CAMPAIGN)
        script, keys, args = encode(renew)
        assert keys == [key, leader_key(key)]
        for _ in range(3):
            assert r.eval(script.source, len(keys), *keys, *args) == 1
            key_at, record_at = r.pexpiretime(key), r.pexpiretime(leader_key(key))
            assert record_at > key_at, (
                f"the record expires at {record_at}, its lease at {key_at}"
            )
    finally:
        sub.close()
        r.close()
